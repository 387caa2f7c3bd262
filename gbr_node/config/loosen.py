"""Which changes of a profile loosen the rules (issue 12, "Hot reload") [pure].

A reload or a switch that gives the agent or a peer more than before is
announced as such, in the same one line as the reload (`control.Node`):

    profile default reloaded: protected_files, peers; LOOSER RULES: ".env" no
    longer protected; peer bob newly trusted

`loosenings(old, new)` lists, in plain words and in profile order, every way
`new` allows more than `old`:

- a protected-file pattern removed (a replacement pattern may cover less; no
  attempt is made to prove it covers as much);
- an `allowed_root` that is not inside the old one (wider, or elsewhere);
- tools newly enabled; `allow_hardlinks` turned on;
- `run_command` programs newly allowed, a program's subcommand restriction
  dropped or widened, its `deny_args` shortened, its executable pinned to
  another path;
- commands confined less: `confine` weaker ("required" > "auto" > "off"),
  `network` turned on, `read_paths` added, `secret_paths` removed;
- folders the library reads newly named (`[library] sources` and
  `environments` added: their files become readable through the library
  tools);
- MCP servers newly mounted, one now started by another command or reached
  at another URL, or offering more of its tools (a mounted server runs
  outside the sandbox with the person's rights, GBR-MCP-01);
- peers newly trusted (a new alias, or an alias now naming another peer ID)
  and tools newly granted to a peer; a peer's `chat` raised ("off" <
  "show" < "reply": its messages now reach the person, or our agent);
- listen addresses that reach beyond this machine (not loopback) added.

Limits (timeouts, sizes), the model and the prompt are not rules of the
sandbox and are never called loosening.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gbr_node.config.profile import ALL_LOCAL_TOOLS, CommandRule, Profile, ToolsConfig

if TYPE_CHECKING:
    from gbr_node.config.changes import Snapshot

_CHAT_LEVELS = {"off": 0, "show": 1, "reply": 2}
_LOOPBACK_PREFIXES = ("/ip4/127.", "/ip6/::1/", "/dns/localhost/", "/dns4/localhost/")


def _quoted(items: Iterable[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def _enabled(tools: ToolsConfig) -> set[str]:
    return set(ALL_LOCAL_TOOLS) if tools.enabled == "*" else set(tools.enabled)


def _rule_loosenings(old: CommandRule, new: CommandRule) -> list[str]:
    found = []
    if old.subcommands is not None:
        if new.subcommands is None:
            found.append(f"{new.name} may run any subcommand")
        elif added := [s for s in new.subcommands if s not in old.subcommands]:
            found.append(f"{new.name} may also run {_quoted(added)}")
    if dropped := [d for d in old.deny_args if d not in new.deny_args]:
        found.append(f"{new.name} no longer refuses {_quoted(dropped)}")
    if old.path != new.path:
        found.append(f"{new.name} now runs {new.path or 'the one found on PATH'}")
    return found


def _command_loosenings(old: Profile, new: Profile) -> list[str]:
    before = {rule.name: rule for rule in old.tools.run_command.allow}
    found = []
    for rule in new.tools.run_command.allow:
        if rule.name not in before:
            found.append(f"run_command may now run {rule.name}")
        else:
            found += _rule_loosenings(before[rule.name], rule)
    return found


_CONFINE_STRENGTH = {"off": 0, "auto": 1, "required": 2}


def _confinement_loosenings(old: Profile, new: Profile) -> list[str]:
    before, after = old.tools.run_command, new.tools.run_command
    found = []
    if _CONFINE_STRENGTH[after.confine] < _CONFINE_STRENGTH[before.confine]:
        found.append(f'commands confined "{after.confine}" (was "{before.confine}")')
    if after.network and not before.network:
        found.append("commands may open network connections")
    if added := [p for p in after.read_paths if p not in before.read_paths]:
        found.append(f"commands may also read {_quoted(added)}")
    if removed := [p for p in before.secret_paths if p not in after.secret_paths]:
        found.append(f"{_quoted(removed)} no longer secret to commands")
    return found


def _library_loosenings(old: Profile, new: Profile) -> list[str]:
    before, after = old.library, new.library
    found = []
    if added := [s for s in after.sources if s not in before.sources]:
        found.append(f"the library also reads {_quoted(added)}")
    was = before.environments or ()
    if added := [e for e in after.environments or () if e not in was]:
        found.append(f"the library also reads the environments {_quoted(added)}")
    return found


def _mcp_loosenings(old: Profile, new: Profile) -> list[str]:
    found = []
    for name, server in new.mcp_servers.items():
        was = old.mcp_servers.get(name)
        if was is None:
            found.append(f"MCP server {name} newly mounted (it runs outside the sandbox)")
        elif (server.command, server.env, server.url) != (was.command, was.env, was.url):
            found.append(f"MCP server {name} now started or reached otherwise")
        elif was.tools != "*" and (
            server.tools == "*" or any(t not in was.tools for t in server.tools)
        ):
            found.append(f"MCP server {name} offers more of its tools")
    return found


def _peer_loosenings(old: Profile, new: Profile) -> list[str]:
    found = []
    for alias, peer in new.peers.items():
        was = old.peers.get(alias)
        if was is None or was.peer_id != peer.peer_id:
            found.append(f"peer {alias} newly trusted")
        elif peer.tools == "*" and was.tools != "*":
            found.append(f"peer {alias} may now call every tool")
        elif (
            peer.tools != "*"
            and was.tools != "*"
            and (granted := [t for t in peer.tools if t not in was.tools])
        ):
            found.append(f"peer {alias} newly granted {', '.join(granted)}")
        if was is not None and _CHAT_LEVELS[peer.chat] > _CHAT_LEVELS[was.chat]:
            found.append(f'peer {alias} chat now "{peer.chat}" (was "{was.chat}")')
    return found


def loosenings(old: Snapshot, new: Snapshot) -> tuple[str, ...]:
    """Every way `new` allows more than `old`, in plain words (empty: nothing looser)."""
    before, after = old.profile, new.profile
    found = []
    if removed := [p for p in before.protected_files if p not in after.protected_files]:
        found.append(f"{_quoted(removed)} no longer protected")
    if not new.root.is_relative_to(old.root):
        found.append(f"allowed_root is now {new.root} (was {old.root})")
    if added := sorted(_enabled(after.tools) - _enabled(before.tools)):
        found.append(f"tools newly enabled: {', '.join(added)}")
    if after.tools.allow_hardlinks and not before.tools.allow_hardlinks:
        found.append("hard-linked files may be read")
    found += _command_loosenings(before, after)
    found += _confinement_loosenings(before, after)
    found += _library_loosenings(before, after)
    found += _mcp_loosenings(before, after)
    found += _peer_loosenings(before, after)
    new_addrs = [a for a in after.node.listen if a not in before.node.listen]
    if exposed := [a for a in new_addrs if not a.startswith(_LOOPBACK_PREFIXES)]:
        found.append(f"now listening beyond this machine on {', '.join(exposed)}")
    return tuple(found)
