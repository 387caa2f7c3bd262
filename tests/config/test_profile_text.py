"""Pure helpers behind profile errors and `env check`: key lines and TOML rendering."""

from __future__ import annotations

import math
import sys

from hypothesis import given
from hypothesis import strategies as st

from gbr_node.config.keylines import format_key, key_line
from gbr_node.config.render import to_toml
from gbr_node.config.validate import validate_text
from gbr_node.errors import ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TEXT = """\
# comment = 1
system_prompt = '''
not_a_key = 1
[not.a.table]
'''
"quoted key" = 1
tools.enabled = "*"

[tools.run_command]
timeout_s = 1

[[tools.run_command.allow]]
name = "git"

[[ tools . run_command . allow ]]  # second rule
name = "ls"
deny_args = [
  ["-R"],
]
[peers."a b"]
peer_id = "x"
"""


def test_key_line_finds_keys_tables_and_array_of_tables_entries() -> None:
    assert key_line(TEXT, ("system_prompt",)) == 2
    assert key_line(TEXT, ("quoted key",)) == 6
    assert key_line(TEXT, ("tools", "enabled")) == 7
    assert key_line(TEXT, ("tools", "run_command", "timeout_s")) == 10
    assert key_line(TEXT, ("tools", "run_command", "allow", 0, "name")) == 13
    assert key_line(TEXT, ("tools", "run_command", "allow", 1, "name")) == 16
    assert key_line(TEXT, ("peers", "a b", "peer_id")) == 21


def test_key_line_ignores_lookalikes_inside_multi_line_strings() -> None:
    assert key_line(TEXT, ("not_a_key",)) is None
    assert key_line(TEXT, ("not", "a", "table")) is None
    assert key_line(TEXT, ("-R",)) is None


def test_key_line_falls_back_to_the_longest_known_prefix() -> None:
    assert key_line(TEXT, ("tools", "run_command", "allow", 1, "deny_args", 0)) == 17
    assert key_line(TEXT, ("tools", "run_command", "missing")) == 9
    assert key_line(TEXT, ("model",)) is None


def test_format_key_quotes_non_bare_keys_and_indexes_arrays() -> None:
    assert format_key(("tools", "run_command", "allow", 0, "name")) == (
        "tools.run_command.allow[0].name"
    )
    assert format_key(("peers", "a b")) == 'peers."a b"'


def test_to_toml_writes_none_as_a_comment() -> None:
    assert to_toml({"a": None, "b": 1}) == "# a = (not set)\nb = 1\n"


_scalars = (
    st.text(max_size=20)
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=8), _values, max_size=5))
def test_to_toml_output_reads_back_to_the_same_data(data: dict) -> None:
    assert tomllib.loads(to_toml(data)) == data


def test_to_toml_spells_non_finite_floats() -> None:
    back = tomllib.loads(to_toml({"a": math.inf, "b": -math.inf}))
    assert back == {"a": math.inf, "b": -math.inf}


_KEYS = st.sampled_from(
    [
        "system_prompt",
        "system_prompt_file",
        "allowed_root",
        "protected_files",
        "tools",
        "enabled",
        "read_max_bytes",
        "run_command",
        "allow",
        "name",
        "subcommands",
        "deny_args",
        "timeout_s",
        "model",
        "temperature",
        "headers",
        "node",
        "listen",
        "peers",
        "peer_id",
        "tools",
        "watch",
        "poll_interval_s",
        "*",
        "a b",
    ]
)
_profile_like = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=16,
)


@given(st.dictionaries(_KEYS, _profile_like, max_size=6))
def test_any_profile_shaped_document_gives_a_profile_or_a_profile_error(data: dict) -> None:
    text = to_toml(data)
    try:
        validate_text(text, file="p.toml")
    except ProfileError as error:
        assert error.message and "pydantic" not in error.message


@given(st.text(max_size=200))
def test_any_text_gives_a_profile_or_a_profile_error(text: str) -> None:
    for fmt in ("toml", "json"):
        try:
            validate_text(text, file="p", fmt=fmt)
        except ProfileError as error:
            assert error.file == "p"
