"""Property: no generated path string ever resolves outside the root (UBQ-DEV-01, UNW-DEV-01).

A real root holds symlinks pointing in and out (absolute, relative, dangling,
to "/", to "..", a loop); hypothesis builds path strings from those names,
separators, dot names, Windows spellings and arbitrary text, for each flavour.
"""

from __future__ import annotations

import os
import pathlib
import posixpath

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gbr_node.errors import SecurityViolation
from gbr_node.sandbox import MACOS, POSIX, WINDOWS, PathPolicy, Sandbox


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[str, str]:
    """(real root, real outside folder) with links in and out of the root."""
    base = tmp_path_factory.mktemp("world")
    root, outside = base / "root", base / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("")
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret")
    links = {
        "in_abs": root / "src",
        "in_rel": pathlib.Path("src/pkg"),
        "out_abs": outside,
        "out_rel": pathlib.Path("../outside"),
        "up": pathlib.Path(".."),
        "slash": pathlib.Path("/"),
        "dangling_out": outside / "missing",
        "loop": pathlib.Path("loop"),
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    (root / "src" / "pkg" / "back").symlink_to("../../..")
    return str(root.resolve()), str(outside.resolve())


COMMON = st.sampled_from(
    [
        "src", "pkg", "mod.py", "in_abs", "in_rel", "out_abs", "out_rel", "up", "slash",
        "dangling_out", "loop", "back", "outside", "root", "secret.txt", "deep",
        "..", "..", ".", "", "SRC",
    ]
)  # fmt: skip
RARE = st.sampled_from(
    [
        "...",
        "~",
        "C:",
        "\\\\?\\C:",
        "nul.txt",
        "PROGRA~1",
        "a\x00",
        "x:stream",
        "cafe\u0301",
        "\ud800",
    ]
)
NAMES = st.one_of(COMMON, COMMON, COMMON, COMMON, RARE, st.text(max_size=4))
SEPARATORS = st.sampled_from(["/", "\\", "//", "/./"])


@st.composite
def path_strings(draw, root: str, outside: str) -> str:
    names = draw(st.lists(NAMES, max_size=8))
    separator = draw(SEPARATORS)
    body = separator.join(names)
    prefix = draw(st.sampled_from(["", "", "/", root + "/", outside + "/", root, "C:\\", "\\\\"]))
    return prefix + body


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


@pytest.mark.parametrize("flavour", [POSIX, MACOS, WINDOWS], ids=lambda f: f.name)
@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_no_path_string_resolves_outside_the_root(world, flavour, data):
    root, outside = world
    sandbox = Sandbox(root, flavour=flavour)
    path = data.draw(path_strings(root, outside))
    try:
        resolved = sandbox.resolve(path)
    except SecurityViolation as exc:
        assert exc.subject == path
        event(f"refused: {exc.reason}")
        return
    event("accepted through a link" if "_" in path or "back" in path else "accepted")
    assert resolved.path.is_absolute()
    assert _inside(root, str(resolved.path))
    assert _inside(root, os.path.realpath(resolved.path))
    assert str(resolved.path) == os.path.realpath(resolved.path)
    expected_relative = "." if str(resolved.path) == root else str(resolved.path)[len(root) + 1 :]
    assert resolved.relative == expected_relative


@pytest.mark.parametrize(
    ("flavour", "root"),
    [(POSIX, "/srv/app"), (MACOS, "/Users/me/proj"), (WINDOWS, "C:\\work\\proj")],
    ids=["posix", "macos", "windows"],
)
@settings(max_examples=400, deadline=None)
@given(text=st.text())
def test_lexical_names_are_plain_and_stay_below_the_root(flavour, root, text):
    try:
        names = PathPolicy(root, flavour).relative_parts(text)
    except SecurityViolation as exc:
        assert exc.subject == text
        return
    for name in names:
        assert name not in ("", ".", "..")
        assert "/" not in name and "\x00" not in name
        if flavour is WINDOWS:
            assert "\\" not in name and ":" not in name
    joined = posixpath.normpath(posixpath.join("/root", *names))
    assert joined == "/root" or joined.startswith("/root/")
