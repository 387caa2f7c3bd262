"""Write plain data back out as TOML, for `gbr-node env check` [pure].

`to_toml` turns the JSON-shaped dump of a profile (dicts, lists, str, int,
float, bool, None) into TOML 1.0 text that tomllib reads back to the same
values: scalars and arrays of scalars first, then `[tables]`, then
`[[arrays.of.tables]]`. None has no TOML spelling, so a key whose value is
None is written as a comment (`# base_url = (not set)`).
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gbr_node.config.profile import Profile

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def to_toml(data: dict[str, Any]) -> str:
    """Render a dict of JSON-shaped values as TOML text ending in a newline."""
    lines: list[str] = []
    _emit_table(data, (), lines, header=None)
    return "\n".join(lines).strip("\n") + "\n"


def toml_key(key: str) -> str:
    """A TOML key: bare when it can be, else a quoted basic string."""
    return key if _BARE.fullmatch(key) else _basic(key)


def toml_value(value: Any) -> str:
    """An inline TOML value (string, number, bool, array, inline table)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"no TOML spelling for {type(value).__name__}")


def _string(value: str) -> str:
    multi_line_ok = "\n" in value and "'''" not in value and not _CONTROL.search(value)
    if multi_line_ok and not value.endswith("'"):
        return "'''\n" + value + "'''"
    return _basic(value)


def _basic(value: str) -> str:
    """A TOML basic string: JSON escapes, plus DEL, which TOML also forbids raw."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _emit_table(
    data: dict[str, Any], path: tuple[str, ...], lines: list[str], header: str | None
) -> None:
    if header is not None:
        lines.extend(["", header])
    for key, value in data.items():
        if value is None:
            lines.append(f"# {toml_key(key)} = (not set)")
        elif not _is_table(value) and not _is_table_array(value):
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for key, value in data.items():
        if _is_table(value):
            sub = (*path, key)
            _emit_table(value, sub, lines, header=f"[{'.'.join(map(toml_key, sub))}]")
    for key, value in data.items():
        if _is_table_array(value):
            sub = (*path, key)
            for item in value:
                _emit_table(item, sub, lines, header=f"[[{'.'.join(map(toml_key, sub))}]]")


def summary(profile: Profile, name: str, file: str, root: str) -> list[str]:
    """One screen of what a profile puts in force (issue 34, `/env`): where it is, the
    model, the rules that matter most, one line each; `/env all` shows it whole."""
    tools = profile.tools
    enabled = "all" if tools.enabled == "*" else ", ".join(tools.enabled) or "none"
    commands = ", ".join(rule.name for rule in tools.run_command.allow) or "none"
    model = profile.model
    where = model.base_url or "not set (environment, Ollama or the embedded model)"
    peers = [
        f"{alias} (tools: {'all' if p.tools == '*' else ', '.join(p.tools) or 'none'}; "
        f"chat {p.chat})"
        for alias, p in profile.peers.items()
    ]
    checks = [*(["builtin"] if profile.builtin_checks else []), *profile.checks]
    return [
        f"profile {name} ({file})",
        f"  root        {root}",
        f"  model       {model.model or '(default)'} at {where}",
        f"  protected   {', '.join(profile.protected_files) or 'nothing'} "
        "(+ .gbr_envs, .git always)",
        f"  tools       {enabled}",
        f"  commands    {commands} (confine {tools.run_command.confine}, "
        f"network {'on' if tools.run_command.network else 'off'})",
        f"  peers       {'; '.join(peers) or 'none'}",
        f"  mcp servers {', '.join(profile.mcp_servers) or 'none'}",
        f"  checks      {', '.join(checks) or 'none'}",
        f"  listen      {', '.join(profile.node.listen) or 'nowhere (dial only)'}",
        "/env all shows the whole profile; /env use NAME switches; /env reload checks now",
    ]
