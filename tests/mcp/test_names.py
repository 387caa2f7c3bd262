"""Public tool names for MCP clients (GBR-MCP-01): MCP's rule, 64 characters, no collision."""

import random

from hypothesis import given
from hypothesis import strategies as st

from gbr_node.mcp.names import MAX_NAME_CHARS, Candidate, is_valid, offer


def local(name):
    return Candidate("local", None, name, {"description": name})


def mounted(server, tool):
    return Candidate("mcp", server, tool)


def peer(alias, tool):
    return Candidate("peer", alias, tool)


def test_valid_names_are_offered_as_they_are_in_the_order_given():
    naming = offer([peer("bob", "read_file"), local("read_file"), mounted("git", "git_status")])
    assert [o.name for o in naming.tools] == ["bob__read_file", "read_file", "git__git_status"]
    assert naming.notes == ()
    assert naming.specs()[1] == {"name": "read_file", "description": "read_file"}


RENAMES = [
    # (candidate, public name, words in the note)
    (peer("bob", "get weather"), "bob__get_weather", "characters MCP does not allow"),
    (mounted("fs", "lire/écrire"), "fs__lire__crire", "characters MCP does not allow"),
    (mounted("fs", ""), "fs__", None),
    (peer("bob", "x" * 100), None, "longer than 64"),
]


def test_bad_names_are_repaired_and_reported():
    for candidate, expected, words in RENAMES:
        naming = offer([candidate])
        (offered,) = naming.tools
        assert is_valid(offered.name), offered.name
        if expected is not None:
            assert offered.name == expected
        if words is None:
            assert naming.notes == ()
        else:
            (note,) = naming.notes
            assert words in note and repr(offered.name) in note


def test_a_long_name_keeps_its_prefix_and_gets_a_stable_hash():
    long = peer("bob", "a" * 80)
    first = offer([long]).tools[0].name
    assert len(first) == MAX_NAME_CHARS and first.startswith("bob__aaaa")
    assert offer([long]).tools[0].name == first
    other = offer([peer("bob", "a" * 79 + "b")]).tools[0].name
    assert other != first and other[:57] == first[:57]


def test_collisions_are_settled_deterministically_local_first():
    # "bob__x" is both a peer's tool and (after repair) a mounted tool's name
    clash = [peer("bob", "x"), mounted("bob", "x"), local("bob__x")]
    for _ in range(10):
        random.shuffle(clash)
        naming = offer(clash)
        by = {o.candidate: o.name for o in naming.tools}
        assert by[local("bob__x")] == "bob__x"
        assert by[mounted("bob", "x")] != "bob__x" and by[peer("bob", "x")] != "bob__x"
        assert len(set(by.values())) == 3
        assert sorted(naming.notes) == sorted(offer(sorted(clash, key=str)).notes)
        assert any("taken by the local tool 'bob__x'" in n for n in naming.notes)


def test_the_same_candidate_twice_is_offered_once():
    naming = offer([local("read_file"), local("read_file")])
    assert [o.name for o in naming.tools] == ["read_file"]


def test_find_maps_a_public_name_back_to_its_owner():
    naming = offer([peer("bob", "get weather"), local("read_file")])
    found = naming.find("bob__get_weather")
    assert found is not None and (found.candidate.owner, found.candidate.tool) == (
        "bob",
        "get weather",
    )
    assert naming.find("bob__get weather") is None


names = st.text(min_size=0, max_size=150)
kinds = st.sampled_from(["local", "mcp", "peer"])


@given(st.lists(st.tuples(kinds, st.text(max_size=40), names), max_size=30))
def test_any_set_of_tools_gets_valid_distinct_names(items):
    candidates = [Candidate(k, None if k == "local" else o, t) for k, o, t in items]
    naming = offer(candidates)
    public = [o.name for o in naming.tools]
    assert all(is_valid(name) for name in public)
    assert len(public) == len(set(public)) == len(set(candidates))
    again = offer(list(reversed(candidates)))
    assert {o.candidate: o.name for o in again.tools} == {o.candidate: o.name for o in naming.tools}
