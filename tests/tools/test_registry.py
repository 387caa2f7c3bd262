"""The registry: specs, argument validation and how tool errors become results."""

from __future__ import annotations

import threading

import pytest

from gbr_node.config.profile import ALL_LOCAL_TOOLS
from gbr_node.errors import InvalidArguments, SecurityViolation, UnknownTool
from gbr_node.tools import Registry, ToolResult
from gbr_node.tools.base import Params, Tool
from gbr_node.tools.files import QUICK_READ_MAX_BYTES
from tests.tools.helpers import text_of


def test_all_tools_enabled_by_default_in_profile_order(make_registry):
    registry = make_registry()  # no library index given: no library tools (tests/library)
    library = ("search_library", "read_library")
    assert registry.names() == [name for name in ALL_LOCAL_TOOLS if name not in library]


def test_only_enabled_tools_exist_and_others_are_unknown(make_registry):
    registry = make_registry(enabled=["read_file", "list_dir"])
    assert registry.names() == ["read_file", "list_dir"]
    with pytest.raises(UnknownTool, match="write_file"):
        registry.call("write_file", {"path": "a", "content": "x"})


def test_specs_are_mcp_tool_items_with_the_params_json_schema(make_registry):
    registry = make_registry()
    (spec,) = registry.specs(["edit_file"])
    assert set(spec) == {"name", "description", "inputSchema"}
    schema = spec["inputSchema"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"path", "old_string", "new_string"}
    assert "replace_all" in schema["properties"]


def test_specs_skip_names_the_registry_lacks(make_registry):
    registry = make_registry(enabled=["read_file"])
    assert [s["name"] for s in registry.specs(["read_file", "run_command"])] == ["read_file"]


def test_optional_params_have_no_null_type_in_the_schema(make_registry):
    (spec,) = make_registry().specs(["search_text"])
    assert spec["inputSchema"]["properties"]["glob"]["type"] == "string"
    assert spec["inputSchema"]["required"] == ["pattern"]


def test_missing_and_wrong_fields_are_named_without_pydantic_links(make_registry):
    registry = make_registry()
    with pytest.raises(InvalidArguments) as caught:
        registry.call("read_file", {"offset": "many", "extra": 1})
    message = str(caught.value)
    assert "path: Field required" in message
    assert "offset:" in message
    assert "extra:" in message
    assert "pydantic.dev" not in message


def test_arguments_that_are_not_an_object_are_invalid(make_registry):
    with pytest.raises(InvalidArguments, match="JSON object"):
        make_registry().call("list_dir", ["."])


def test_tool_error_becomes_an_error_result_with_its_message(make_registry):
    result = make_registry().call("read_file", {"path": "missing.txt"})
    assert result.is_error
    assert "no such file: missing.txt" in text_of(result)


def test_security_violation_propagates_to_the_caller(make_registry):
    with pytest.raises(SecurityViolation):
        make_registry().call("read_file", {"path": "../outside/secret.txt"})


def test_approval_required_gives_a_pending_result_not_an_error(make_registry, root):
    result = make_registry(protected=("config.toml",)).call(
        "write_file", {"path": "config.toml", "content": "x"}
    )
    assert not result.is_error
    assert result.structured == {
        "status": "approval_required",
        "tool": "write_file",
        "path": "config.toml",
    }
    assert "approve" in text_of(result)
    assert not (root / "config.toml").exists()


def test_approval_handler_is_pluggable_and_sees_the_proposed_content(make_registry):
    seen = []

    def on_approval(exc):
        seen.append((exc.tool, exc.path, exc.content))
        return ToolResult.text("queued as #1", structured={"status": "pending", "id": 1})

    registry = make_registry(protected=("config.toml",), on_approval=on_approval)
    result = registry.call("write_file", {"path": "config.toml", "content": "new"})
    assert result.structured == {"status": "pending", "id": 1}
    assert seen == [("write_file", "config.toml", "new")]


def test_to_mcp_has_content_is_error_and_structured_content():
    result = ToolResult.text("done", is_error=True, structured={"k": 1})
    assert result.to_mcp() == {
        "content": [{"type": "text", "text": "done"}],
        "isError": True,
        "structuredContent": {"k": 1},
    }
    assert "structuredContent" not in ToolResult.text("x").to_mcp()


def test_missing_arguments_count_as_an_empty_object(make_registry, root):
    (root / "a.txt").write_text("")
    assert "a.txt (0 bytes)" in text_of(make_registry().call("list_dir", None))


async def test_run_keeps_quick_tools_on_the_event_loop_and_hands_others_to_a_thread(root):
    seen: dict[str, int] = {}

    def where(name: str):
        def handler(_params: Params) -> ToolResult:
            seen[name] = threading.get_ident()
            return ToolResult.text(name)

        return handler

    registry = Registry(
        [
            Tool("quick_one", "q", Params, where("quick_one"), quick=True),
            Tool("slow_one", "s", Params, where("slow_one")),
        ]
    )
    assert text_of(await registry.run("quick_one", {})) == "quick_one"
    assert text_of(await registry.run("slow_one", {})) == "slow_one"

    assert seen["quick_one"] == threading.get_ident()
    assert seen["slow_one"] != threading.get_ident()
    with pytest.raises(UnknownTool):
        await registry.run("absent", {})


def test_read_file_is_quick_only_while_its_read_is_small(make_registry):
    assert make_registry()._tools["read_file"].quick
    assert not make_registry(read_max_bytes=QUICK_READ_MAX_BYTES + 1)._tools["read_file"].quick
    assert not make_registry()._tools["write_file"].quick  # fsync
