"""The library lookup end to end (issue 18, STD-AI-01): `gbr-node run` in a real
pseudo-terminal against the scripted model server, with a project whose
`[library]` environment is a site-packages folder holding a copy of the real,
installed httpx."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import write_profile
from tests.support.replies import text_reply, tool_call_reply
from tests.support.said import said


def _httpx_copy(site: Path) -> str:
    """Copy the installed httpx (package and dist-info) into `site`; its version."""
    package = Path(httpx.__file__).parent
    dist_info = next(package.parent.glob("httpx-*.dist-info"))
    shutil.copytree(package, site / "httpx", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(dist_info, site / dist_info.name)
    return dist_info.name[len("httpx-") : -len(".dist-info")]


@pytest.fixture
def library_project(project, model_server) -> tuple[Path, str]:
    version = _httpx_copy(project / "site")
    write_profile(project, model_server.base_url, extra='[library]\nenvironments = ["site"]\n')
    return project, version


def _user_message(body: dict) -> str:
    content = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return said(content)  # without the project's files, which come first


def test_a_question_naming_httpx_gets_the_lookup_in_the_first_request(
    library_project, run_node, model_server
):
    _, version = library_project
    model_server.enqueue(text_reply("Use httpx.Timeout."))
    term = run_node()
    # issue 33: the lookup runs when a name is written as code, here a dotted name
    term.sendline("how do I set a timeout on an httpx.Client?")
    term.expect_new(rf"library: \d+ hits? in httpx=={re.escape(version)}")
    term.expect_new("Use httpx.Timeout.")
    (first,) = model_server.chat_bodies
    sent = _user_message(first)
    assert sent.startswith("[Library lookup")
    assert sent.endswith("how do I set a timeout on an httpx.Client?")
    assert re.search(rf"class httpx\.Timeout\(.*  httpx/_config\.py:\d+  httpx=={version}\n", sent)
    assert len(sent) <= 1500 * 4 + 200  # the context_tokens bound (4 characters a token)
    assert "search_library" in first["messages"][0]["content"]  # the system prompt's note


def test_a_message_naming_no_library_goes_as_typed(library_project, run_node, model_server):
    model_server.enqueue(text_reply("Hello."))
    term = run_node()
    term.sendline("hello there, how are you?")
    term.expect_new("Hello.")
    assert _user_message(model_server.chat_bodies[0]) == "hello there, how are you?"
    assert "library:" not in term.text()


def test_the_models_search_library_call_returns_hits_with_versions(
    library_project, run_node, model_server
):
    _, version = library_project
    model_server.enqueue(
        tool_call_reply("search_library", {"query": "read timeout", "limit": 5}),
        tool_call_reply("read_library", {"name_or_path": "httpx.Timeout", "lines": 20}),
        text_reply("Found it."),
    )
    term = run_node()
    term.sendline("look up the read timeout setting")
    term.expect_new(r"✓ search_library query=.*read timeout.* \d+ ms")
    term.expect_new(r"✓ read_library name_or_path=httpx.Timeout")
    term.expect_new("Found it.")
    second, third = model_server.chat_bodies[1:3]
    found = second["messages"][-1]
    assert found["role"] == "tool"
    lines = [line for line in found["content"].splitlines() if not line.startswith("    ")]
    assert lines and all(line.endswith(f"httpx=={version}") for line in lines), lines
    assert any(re.search(r"httpx/_\w+\.py:\d+", line) for line in lines)
    source = third["messages"][-1]["content"]
    assert source.startswith("# httpx.Timeout  httpx/_config.py:")
    assert "class Timeout" in source
    assert {"search_library", "read_library"} <= {t["function"]["name"] for t in second["tools"]}


def test_lib_searches_by_hand(library_project, run_node, project):
    _, version = library_project
    term = run_node()
    term.sendline("/lib HTTPStatusError")
    term.expect_new(rf"class httpx\.HTTPStatusError.*httpx/_exceptions\.py:\d+  httpx=={version}")
    assert (project / ".gbr" / "library.db").is_file()
    term.sendline("/lib")
    term.expect_new("/lib needs QUERY")


def test_read_library_reads_nothing_outside_the_index(library_project, run_node, model_server):
    (library_project[0] / "secret.txt").write_text("top secret", encoding="utf-8")
    model_server.enqueue(
        tool_call_reply("read_library", {"name_or_path": "../secret.txt"}),
        tool_call_reply("read_library", {"name_or_path": "/etc/passwd"}),
        text_reply("ok"),
    )
    term = run_node()
    term.sendline("read them")
    term.expect_new("ok")
    for body in model_server.chat_bodies[1:3]:
        result = body["messages"][-1]["content"]
        assert "is not a file of the library index" in result, result
        assert "top secret" not in result and "root:" not in result
    json.dumps(model_server.chat_bodies)  # every request was well-formed JSON
