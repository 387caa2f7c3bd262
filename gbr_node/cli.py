"""Command line: argv → settings → the command. The only importer of `node.py`.

Heavy packages (libp2p, httpx, pydantic models) are imported inside the
command that needs them, so `gbr-node --help` answers at once.

Exit statuses: 0 ok, 1 the thing asked for failed (tool error, invalid
profile), 2 usage error, 3 a peer was unreachable or refused the call.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gbr_node.config.loader import LoadedProfile
    from gbr_node.oneshot import NodeSettings
    from gbr_node.tools.registry import Registry, ToolResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def _project_dir(args: argparse.Namespace) -> Path:
    """The project folder, spelled as the person reached it (absolute; a symlinked
    folder keeps its name, so paths spelled with it stay inside the root)."""
    from gbr_node.config.loader import find_project_dir

    if args.project:
        return Path(os.path.abspath(args.project))
    return find_project_dir(logical_cwd())


def logical_cwd() -> Path:
    """The working folder as the shell spells it: `$PWD` when it names the same folder
    as `os.getcwd()` (which has every symlink resolved), else `os.getcwd()`."""
    physical = Path.cwd()
    spelled = os.environ.get("PWD", "")
    try:
        if os.path.isabs(spelled) and os.path.samefile(spelled, physical):
            return Path(os.path.normpath(spelled))
    except OSError:
        pass
    return physical


def _env_name(args: argparse.Namespace) -> str:
    return args.env or os.environ.get("GBR_ENV") or "default"


def _load(args: argparse.Namespace) -> LoadedProfile:
    from gbr_node.config.loader import load_profile

    return load_profile(_project_dir(args), _env_name(args))


ARGS_HELP = "JSON object of arguments; - reads it from stdin, @FILE from a file"


def _json_object(text: str, what: str) -> dict[str, Any] | None:
    """`text` parsed as a JSON object, or None after printing what is wrong.

    `-` reads the JSON from stdin and `@FILE` from FILE: a command line holds
    at most ~128 KiB in one argument (Linux MAX_ARG_STRLEN), a file content more.
    """
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"gbr-node: cannot read {what} from {text[1:]}: {exc}", file=sys.stderr)
            return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"gbr-node: {what} is not valid JSON: {exc}", file=sys.stderr)
        return None
    if not isinstance(value, dict):
        print(f"gbr-node: {what} must be a JSON object", file=sys.stderr)
        return None
    return value


def cmd_init(args: argparse.Namespace) -> int:
    """Write `.gbr_envs/default.toml` (the packaged template, and the `[checks]` that
    fit the project files found here, `checks.detect`) unless it exists."""
    import shutil

    from gbr_node.checks.detect import LANGUAGES, checks_block
    from gbr_node.config.loader import default_template, state_folder

    project = Path(args.project or Path.cwd()).resolve()
    state_folder(project)
    target_dir = project / ".gbr_envs"
    target = target_dir / "default.toml"
    markers = [lang.marker for lang in LANGUAGES if (project / lang.marker).is_file()]
    if target.exists():
        if args.checks:
            return _add_checks(target, markers)
        print(f"{target} already exists; left unchanged (--checks adds the write checks)")
        return EXIT_OK
    checks = checks_block(markers, shutil.which)
    target_dir.mkdir(parents=True, exist_ok=True)
    target.write_text(default_template() + checks, "utf-8")
    print(f"created {target}")
    if checks:
        print(f"  with write checks for: {', '.join(markers)}")
    return EXIT_OK


def _add_checks(target: Path, markers: list[str]) -> int:
    """`gbr-node init --checks` on an existing profile: append the `[checks]` tables
    detected here that it lacks, validated first as any profile edit (a result that
    does not load is not written), written atomically; prints the diff (issue 34)."""
    import difflib
    import shutil

    from gbr_node.checks.detect import checks_block
    from gbr_node.config.validate import validate_text
    from gbr_node.errors import ProfileError

    before = target.read_text("utf-8")
    try:
        present = validate_text(before, file=str(target)).checks
    except ProfileError as exc:
        print(f"gbr-node: the profile does not load, nothing added:\n{exc}", file=sys.stderr)
        return EXIT_FAILED
    block = checks_block(markers, shutil.which, skip=present)
    if not block:
        print(f"no write checks to add to {target} (none detected here, or all there)")
        return EXIT_OK
    after = before.rstrip("\n") + "\n" + block
    try:
        validate_text(after, file=str(target))
    except ProfileError as exc:
        print(
            f"gbr-node: the checks would break the profile; nothing written:\n{exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    temp = target.with_name(f".{target.name}.gbr-new")
    temp.write_text(after, "utf-8")
    os.replace(temp, target)
    diff = difflib.unified_diff(
        before.splitlines(), after.splitlines(), str(target), str(target), lineterm=""
    )
    print("\n".join(diff))
    return EXIT_OK


def cmd_env(args: argparse.Namespace) -> int:
    """`env check [NAME]`, `env schema`, `env list`."""
    from gbr_node.config import loader

    if args.env_command == "schema":
        print(json.dumps(loader.profile_json_schema(), indent=2))
        return EXIT_OK
    if args.env_command == "list":
        for name in loader.list_profiles(_project_dir(args)):
            print(name)
        return EXIT_OK
    name = args.name or _env_name(args)
    loaded = loader.load_profile(_project_dir(args), name)
    print(loader.render_effective(loaded))
    print(_confinement_lines(loaded.profile.tools.run_command.confine))
    print(_checks_lines(loaded))
    print(f"# profile {name!r} is valid ({loaded.file})", file=sys.stderr)
    return EXIT_OK


def _confinement_lines(mode: str) -> str:
    """Comment lines for `env check`: the confinement commands get (GBR-CONF-01) and
    the kernel's Landlock ABI."""
    from gbr_node.confine import in_force, support

    found = support()
    return f"# confinement: {in_force(mode, found)}\n# kernel Landlock ABI: {found.abi}"


def _checks_lines(loaded: LoadedProfile) -> str:
    """Comment lines for `env check`: the write checks in force, with their programs as
    found on PATH now (UBQ-DEV-02, UNW-AI-01)."""
    from gbr_node.config.loader import build_sandbox
    from gbr_node.tools.checkrunner import CheckRunner

    if not loaded.profile.checks:
        return "# checks: none ([checks] is empty)"
    runner = CheckRunner.of_profile(loaded.profile, build_sandbox(loaded))
    return "# checks in force:\n" + "\n".join(f"#{line}" for line in runner.describe())


_PLAIN_ARGUMENT = {"search_library": "query", "read_library": "name_or_path"}
"""Tools whose one required argument may be given as plain text, not JSON."""


def cmd_tool(args: argparse.Namespace) -> int:
    """Run one local tool under the active profile and print its MCP result; with
    `--list`, list every tool the local agent has instead (`_list_tools`)."""
    if args.list:
        return _list_tools(_load(args))
    if args.name is None:
        print("gbr-node: tool needs NAME (or --list)", file=sys.stderr)
        return EXIT_USAGE
    text = args.arguments.strip()
    plain = _PLAIN_ARGUMENT.get(args.name)
    if plain is not None and text and text[0] not in "{-@":
        arguments: dict[str, Any] | None = {plain: args.arguments}  # `tool search_library 'WORDS'`
    else:
        arguments = _json_object(args.arguments, "JSON-ARGS")
    if arguments is None:
        return EXIT_USAGE
    loaded = _load(args)
    if args.name.split("__", 1)[0] in loaded.profile.mcp_servers and "__" in args.name:
        return _run_mounted(loaded, args.name, arguments, as_json=args.json)
    with _local_registry(loaded) as registry:
        return _run_tool(registry, args.name, arguments, as_json=args.json)


@contextlib.contextmanager
def _local_registry(loaded: LoadedProfile) -> Iterator[Registry]:
    """The local agent's own tools under `loaded`'s profile, as `run` builds them: file
    and command tools, library tools, approval_status; the approval log and the
    checkpoint store stay open while the context lasts."""
    from gbr_node.approvals import ApprovalLog, default_path
    from gbr_node.approvals.desk import ApprovalDesk
    from gbr_node.checkpoints.store import CheckpointStore
    from gbr_node.checkpoints.store import default_path as checkpoints_path
    from gbr_node.config.loader import build_sandbox, state_folder
    from gbr_node.library.lookup import open_library
    from gbr_node.tools.checkrunner import CheckRunner
    from gbr_node.tools.registry import build_registry

    sandbox = build_sandbox(loaded)
    state_folder(loaded.project_dir)
    store = CheckpointStore(checkpoints_path(loaded.project_dir), loaded.root)
    library = open_library(loaded.project_dir, loaded.profile.library, loaded.root)
    with ApprovalLog(default_path(loaded.project_dir)) as approvals, contextlib.closing(store):
        # A protected write asked from here waits in the log like any other (EVD-AI-01).
        desk = ApprovalDesk(approvals, lambda: sandbox)
        yield build_registry(
            loaded.profile.tools,
            sandbox,
            on_approval=desk.on_approval,
            extra=desk.status_tools(loaded.profile.tools),
            library=library,
            checks=CheckRunner.of_profile(loaded.profile, sandbox)
            if loaded.profile.checks
            else None,
            verify=loaded.profile.builtin_checks,
            checkpoints=store,  # its changes are the command's to undo (GBR-UNDO-01)
        )


LIBRARY_TOOLS = ("search_library", "read_library")


def _list_tools(loaded: LoadedProfile) -> int:
    """`gbr-node tool --list` (issue 34): every tool the local agent has under the active
    profile, grouped (local file and command tools, library tools, each mounted MCP
    server's `NAME__TOOL` tools), names aligned, then the tools `[tools] enabled` does not
    grant. Mounted servers are started for it, waited for at most MOUNT_WAIT_S seconds
    in all, and stopped; one that does not come up is listed with its reason."""
    import shutil

    from gbr_node.config.profile import ALL_LOCAL_TOOLS

    with _local_registry(loaded) as registry:
        specs = registry.specs()
    local = [s for s in specs if s["name"] not in LIBRARY_TOOLS]
    groups: list[tuple[str, list[dict[str, Any]]]] = [
        ("local file and command tools", local),
        ("library tools", [s for s in specs if s["name"] in LIBRARY_TOOLS]),
    ]
    notes = []
    if loaded.profile.mcp_servers:
        for server, tools, reason in _mounted_tools(loaded):
            if reason:
                notes.append(f"mounted MCP server {server}: not running ({reason})")
            else:
                groups.append((f"mounted MCP server {server}", tools))
    off = [name for name in ALL_LOCAL_TOOLS if not loaded.profile.tools.is_enabled(name)]
    if off:
        notes.append(f"not granted by the profile's [tools] enabled: {', '.join(off)}")
    print("\n".join(tool_groups_lines(groups, notes, shutil.get_terminal_size().columns)))
    return 0


def tool_groups_lines(
    groups: list[tuple[str, list[dict[str, Any]]]], notes: list[str], width: int
) -> list[str]:
    """`groups` as `TITLE:` then one `  NAME  first line of its description` per tool,
    every name padded to the longest of all groups, each line cut to `width` cells;
    an empty group is left out; `notes` follow, one line each (`textcells.one_line`)."""
    from gbr_node.textcells import cut, one_line

    names = [spec["name"] for _, specs in groups for spec in specs]
    pad = max((len(name) for name in names), default=0)
    lines = []
    for title, specs in groups:
        if not specs:
            continue
        lines.append(f"{title}:")
        for spec in specs:
            first = one_line((spec.get("description") or "").strip().split("\n", 1)[0])
            lines.append(cut(f"  {spec['name']:<{pad}}  {first}".rstrip(), width))
    return lines + [cut(one_line(note), width) for note in notes]


def _mounted_tools(loaded: LoadedProfile) -> list[tuple[str, list[dict[str, Any]], str]]:
    """(server name, its tools' specs named `NAME__TOOL`, "" or why it is not up) for each
    of the profile's mounted MCP servers, started and stopped here."""
    import trio

    from gbr_node.mcp.mounts import Mounts

    async def listed() -> list[tuple[str, list[dict[str, Any]], str]]:
        mounts = Mounts(notice=lambda text: None)
        mounts.apply(loaded.profile.mcp_servers, loaded.root)
        async with trio.open_nursery() as nursery:
            await nursery.start(mounts.run)
            with trio.move_on_after(MOUNT_WAIT_S):
                while any(s.state == "starting" for s in mounts.servers.values()):
                    await trio.sleep(0.05)
            specs = mounts.specs()
            out = []
            for name, server in mounts.servers.items():
                own = [s for s in specs if s["name"].split("__", 1)[0] == name]
                out.append((name, own, "" if server.state == "up" else server.reason))
            nursery.cancel_scope.cancel()
        return out

    return trio.run(listed)


def cmd_undo(args: argparse.Namespace) -> int:
    """`gbr-node undo`: GBR-UNDO-01, while a node runs or not (SQLite WAL)."""
    from gbr_node.checkpoints.store import CheckpointStore, default_path, take_back
    from gbr_node.config.loader import build_sandbox

    loaded = _load(args)
    store = CheckpointStore(default_path(loaded.project_dir), loaded.root)
    try:
        lines = take_back(
            store, build_sandbox(loaded), group=args.turn, peer=args.peer, force=args.force
        )
    finally:
        store.close()
    print("\n".join(lines) if lines else "nothing to change: the files are as before")
    return 0


def cmd_checkpoints(args: argparse.Namespace) -> int:
    """`gbr-node checkpoints`: the recent groups, newest first (GBR-UNDO-01)."""
    from gbr_node.checkpoints.store import CheckpointStore, default_path

    loaded = _load(args)
    store = CheckpointStore(default_path(loaded.project_dir), loaded.root)
    try:
        groups = store.groups()
    finally:
        store.close()
    print("\n".join(g.line() for g in groups) if groups else "no checkpoints yet")
    return 0


def _run_tool(registry: Registry, name: str, arguments: dict[str, Any], *, as_json: bool) -> int:
    from gbr_node.sandbox.caller import CALLER, CLI

    CALLER.set((CLI, None))  # approvals show it as asked by the command line
    return _print_result(lambda: registry.call(name, arguments), as_json=as_json)


MOUNT_WAIT_S = 30.0
"""How long `gbr-node tool NAME__TOOL` waits for its MCP server to start, seconds."""


def _run_mounted(
    loaded: LoadedProfile, name: str, arguments: dict[str, Any], *, as_json: bool
) -> int:
    """`gbr-node tool NAME__TOOL`: start the mounted MCP server NAME of the profile (as
    `run` and `serve` do), call its tool, print the result, stop it (issue 34)."""
    import trio

    from gbr_node.errors import GbrError
    from gbr_node.mcp.mounts import Mounts

    async def call() -> ToolResult:
        mounts = Mounts(notice=lambda text: print(text, file=sys.stderr))
        mounts.apply(loaded.profile.mcp_servers, loaded.root)
        outcome: ToolResult | GbrError
        async with trio.open_nursery() as nursery:
            await nursery.start(mounts.run)
            server = mounts.servers[name.split("__", 1)[0]]
            with trio.move_on_after(MOUNT_WAIT_S):
                while not mounts.has(name) and server.tools == ():
                    await trio.sleep(0.05)
            try:
                outcome = await mounts.call(name, arguments)
            except GbrError as exc:  # raised outside the nursery, not as a group
                outcome = exc
            nursery.cancel_scope.cancel()
        if isinstance(outcome, GbrError):
            raise outcome
        return outcome

    return _print_result(lambda: trio.run(call), as_json=as_json)


def _print_result(call: Callable[[], ToolResult], *, as_json: bool) -> int:
    """Run `call` and print its MCP result (text, or `--json`); errors as one line."""
    from gbr_node.errors import GbrError, InvalidArguments, SecurityViolation, UnknownTool

    try:
        result = call()
    except (UnknownTool, InvalidArguments) as exc:
        print(f"gbr-node: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SecurityViolation as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except GbrError as exc:  # an approval refused for the log's bounds, ...
        print(f"not done: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return EXIT_FAILED
    if as_json:
        print(json.dumps(result.to_mcp(), indent=2))
    else:
        for item in result.content:
            print(item.get("text", ""))
        if result.structured:
            print(json.dumps(result.structured), file=sys.stderr)
    return EXIT_FAILED if result.is_error else EXIT_OK


def _settings(args: argparse.Namespace) -> NodeSettings:
    from gbr_node.oneshot import NodeSettings
    from gbr_node.sandbox.sandbox import register_node_file

    if args.identity:
        register_node_file(args.identity)  # no tool may read or delete it (GBR-PRIV-01)
    listen = getattr(args, "listen", None)
    return NodeSettings(
        project_dir=_project_dir(args),
        env=_env_name(args),
        identity=Path(args.identity) if args.identity else None,
        listen=tuple(listen) if listen else None,
        resume=getattr(args, "resume", False),
        base_url=getattr(args, "base_url", None),
        model=getattr(args, "model", None),
    )


def cmd_run(args: argparse.Namespace) -> int:
    """Start the node with its REPL: `gbr-node run`."""
    import trio

    from gbr_node import node

    return trio.run(node.run_interactive, _settings(args))


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve this node's tools to trusted peers: `gbr-node serve`."""
    import trio

    from gbr_node import node

    return trio.run(functools.partial(node.serve, _settings(args), relay=args.relay))


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the node's and its peers' tools to an MCP client on stdio: `gbr-node mcp`."""
    import trio

    from gbr_node import node

    if args.max_result_tokens < 1:
        print("gbr-node: --max-result-tokens must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    return trio.run(node.mcp_stdio, _settings(args), args.max_result_tokens)


def cmd_call(args: argparse.Namespace) -> int:
    """Call one tool on a peer: `gbr-node call TARGET TOOL [JSON-ARGS]` or `--list`."""
    import trio

    from gbr_node import oneshot

    if not args.list and not args.tool:
        print("gbr-node: call needs TOOL (or --list)", file=sys.stderr)
        return EXIT_USAGE
    arguments = _json_object(args.arguments, "JSON-ARGS")
    if arguments is None:
        return EXIT_USAGE
    tool = None if args.list else args.tool
    return trio.run(oneshot.call_once, _settings(args), args.target, tool, arguments)


def cmd_send(args: argparse.Namespace) -> int:
    """Send a message to a trusted peer's agent: `gbr-node send ALIAS TEXT [--thread ID]`."""
    import trio

    from gbr_node import node

    text = " ".join(args.text)
    return trio.run(node.send_once, _settings(args), args.peer, text, args.thread)


def cmd_model(args: argparse.Namespace) -> int:
    """Print which model `gbr-node run` would use and why: `gbr-node model`."""
    import trio

    from gbr_node import node

    return trio.run(node.describe_model, _settings(args))


def cmd_approvals(args: argparse.Namespace) -> int:
    """List and decide approvals: `gbr-node approvals list | show N | approve N | ...`."""
    from gbr_node.approvals import cli as approvals_cli

    return approvals_cli.run(args)


def cmd_inbox(args: argparse.Namespace) -> int:
    """Show the messages other agents sent: `gbr-node inbox [ALIAS] [--thread ID] [--clear]`."""
    from gbr_node.chat import cli as inbox_cli

    return inbox_cli.main(_project_dir(args), args, sys.stdout)


def cmd_id(args: argparse.Namespace) -> int:
    """Print this node's peer ID and multiaddrs: `gbr-node id`."""
    from gbr_node import oneshot

    return oneshot.identity(_settings(args))


GLOBAL_OPTIONS = (
    ("--project", "DIR", "project folder (default: nearest with .gbr_envs/)"),
    ("--env", "NAME", "profile .gbr_envs/NAME.toml (default: $GBR_ENV or default)"),
    ("--identity", "PATH", "Ed25519 key file (default: ~/.config/gbr-node/identity.key)"),
)

COMMANDS = {
    "run": (
        "Start the node and talk to its agent in this terminal: answers stream, tools run in "
        "the sandbox, peers' tools are offered as ALIAS__TOOL. /help inside lists the commands.",
        ["gbr-node run", "gbr-node run --resume", "gbr-node run --env reviewer --model gpt-4o"],
    ),
    "serve": (
        "Serve this node's tools to the trusted peers of the active profile, without an agent; "
        "prints one line per call (peer, tool, outcome, milliseconds). --relay also relays "
        "(circuit relay v2) for the profile's trusted peers; [node] relays keeps a reservation "
        "on relays so peers reach this node from other networks (docs/guide/peers.md).",
        [
            "gbr-node serve",
            "gbr-node serve --listen /ip4/0.0.0.0/tcp/4001",
            "gbr-node serve --relay --listen /ip4/0.0.0.0/tcp/4001",
        ],
    ),
    "call": (
        "Call one tool on a peer and print its result (exit 0 ok, 1 tool error or refused, "
        "2 usage, 3 unreachable or unauthorized).",
        [
            'gbr-node call alice read_file \'{"path": "notes.txt"}\'',
            "gbr-node call alice --list",
            "gbr-node call /ip4/192.0.2.10/tcp/4001/p2p/12D3KooW... write_file @args.json",
            "gbr-node call /ip4/203.0.113.7/tcp/4001/p2p/RELAY/p2p-circuit/p2p/12D3KooW... --list",
        ],
    ),
    "send": (
        "Send a message to a trusted peer's agent (EVD-AI-02), through the same durable outbox "
        "as /msg: waits up to 15 s for the peer's answer (delivered, or refused with its "
        "reason); a message not yet delivered stays queued, and the next `gbr-node run` or "
        "`serve` of this project delivers it. Exit 0 delivered or queued, 1 refused or "
        "expired, 2 usage.",
        [
            "gbr-node send bob 'the build is green, you can deploy'",
            "gbr-node send bob --thread 3f2a9c 'and the logs are in logs/'",
        ],
    ),
    "mcp": (
        "Started by an MCP client (Claude Code, Claude Desktop, Cursor, ...): serves the active "
        "profile's tools, mounted MCP servers' NAME__TOOL and trusted peers' ALIAS__TOOL over "
        "MCP on stdio. In the client's mcpServers: "
        '{"gbr": {"command": "gbr-node", "args": ["--project", "/path/to/project", "mcp"]}}',
        ["gbr-node --project /path/to/project mcp", "gbr-node mcp --max-result-tokens 8000"],
    ),
    "undo": (
        "Take back the files the agent's last turn changed (or checkpoint ID, or a peer's "
        "last call), one line per path; stops and names the paths changed since unless "
        "--force. Works while a node runs. An undo is itself a checkpoint: undo it to redo.",
        ["gbr-node undo", "gbr-node undo --peer bob", "gbr-node undo --turn 12 --force"],
    ),
    "checkpoints": (
        "List the recent checkpoints (turns of the agent, peers' calls, commands, undos), "
        "newest first, with the files each changed (.gbr/checkpoints.db).",
        ["gbr-node checkpoints"],
    ),
    "id": (
        "Print this node's peer ID and the multiaddrs peers can dial it at: [node] announce "
        "(else the listen addresses), then one RELAY/p2p-circuit address per [node] relays.",
        ["gbr-node id", "gbr-node id --identity ./other.key"],
    ),
    "model": (
        "Say which model `gbr-node run` would use and why: profile [model], environment "
        "variables, flags, a local Ollama, or the embedded model.",
        ["gbr-node model", "OPENAI_MODEL=gpt-4o-mini gbr-node model"],
    ),
    "init": (
        "Write a commented .gbr_envs/default.toml in this folder (or --project DIR) unless it "
        "exists, with the write checks that fit the project files found here; --checks adds "
        "those checks to an existing profile, printing the diff.",
        ["mkdir -p ~/gbr-demo && cd ~/gbr-demo && gbr-node init", "gbr-node init --checks"],
    ),
    "env": (
        "Validate, list or describe the environment profiles of this project.",
        ["gbr-node env check", "gbr-node env check reviewer", "gbr-node env list"],
    ),
    "tool": (
        "Run one of this node's tools under the active profile's sandbox and print its result; "
        "a protected write waits for approval as in `run`.",
        [
            'gbr-node tool list_dir \'{"path": "."}\'',
            'gbr-node tool read_file \'{"path": ".gbr_envs/default.toml", "limit": 5}\'',
            'echo \'{"pattern": "TODO"}\' | gbr-node tool search_text -',
            "gbr-node tool search_library 'httpx timeout'  (plain text: the query)",
            "gbr-node tool read_library httpx.Timeout",
        ],
    ),
}


ENV_ACTIONS = (
    (
        "check",
        "validate a profile and print its effective values",
        "Validate a profile and print every effective value (defaults filled in); "
        "exit 1 with the file, line and key of what is wrong.",
        ["gbr-node env check", "gbr-node env check reviewer"],
    ),
    (
        "schema",
        "print the profile JSON Schema (for editors)",
        "Print the JSON Schema of a profile, for editors that validate TOML.",
        ["gbr-node env schema > profile.schema.json"],
    ),
    (
        "list",
        "list the profiles of this project",
        "List the profiles in this project's .gbr_envs/.",
        ["gbr-node env list"],
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every `gbr-node` command. The global options are also
    accepted after the command (`gbr-node env check --env reviewer`)."""
    parser = argparse.ArgumentParser(
        prog="gbr-node",
        description="Peer-to-peer AI agent node: libp2p (Noise + Yamux), sandboxed tools, "
        "any OpenAI-compatible model.",
        epilog="`gbr-node COMMAND --help` describes a command, with examples.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    for flag, metavar, text in GLOBAL_OPTIONS:
        parser.add_argument(flag, metavar=metavar, help=text)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _command(sub, "run", "start the node and talk to its agent in this terminal")
    p.add_argument("--resume", action="store_true", help="continue the last session")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (overrides profile and env)")
    p.add_argument("--model", help="model name (overrides profile and env)")
    _listen_flag(p)
    p.set_defaults(func=cmd_run)

    p = _command(sub, "serve", "serve this node's tools to trusted peers (headless)")
    _listen_flag(p)
    p.add_argument(
        "--relay",
        action="store_true",
        help="also be a relay (circuit relay v2) for other peers, as [node] relay = true",
    )
    p.set_defaults(func=cmd_serve)

    p = _command(
        sub, "mcp", "serve this node's and its peers' tools to an MCP client on stdin/stdout"
    )
    from gbr_node.mcp.results import DEFAULT_MAX_RESULT_TOKENS

    p.add_argument(
        "--max-result-tokens",
        type=int,
        default=DEFAULT_MAX_RESULT_TOKENS,
        metavar="N",
        help="cut a tool result at about N tokens (4 characters each), saying how to page "
        "(default: 20000)",
    )
    p.set_defaults(func=cmd_mcp)

    p = _command(sub, "call", "call one tool on a peer and print the result")
    p.add_argument("target", metavar="PEER", help="/p2p/ multiaddr, peer ID, or [peers] alias")
    p.add_argument("tool", nargs="?", help="tool name")
    p.add_argument("arguments", nargs="?", default="{}", metavar="JSON-ARGS", help=ARGS_HELP)
    p.add_argument("--list", action="store_true", help="list the tools the peer grants us")
    p.set_defaults(func=cmd_call, short_lived=True)

    p = _command(sub, "send", "send a message to a trusted peer's agent")
    p.add_argument("peer", metavar="PEER", help="[peers] alias or peer ID")
    p.add_argument("text", nargs="+", metavar="TEXT", help="the message")
    p.add_argument("--thread", metavar="ID", help="continue this thread (gbr-node inbox shows ids)")
    p.set_defaults(func=cmd_send)

    p = _command(sub, "id", "print this node's peer ID and multiaddrs")
    p.set_defaults(func=cmd_id, short_lived=True)

    p = _command(sub, "model", "show which model `run` would use, and why")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (overrides profile and env)")
    p.add_argument("--model", help="model name (overrides profile and env)")
    p.set_defaults(func=cmd_model)

    p = _command(sub, "undo", "take back the agent's last turn, a turn, or a peer's call")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--turn", type=int, metavar="ID", help="a checkpoint id (gbr-node checkpoints)"
    )
    which.add_argument("--peer", metavar="ALIAS", help="the last call of this peer")
    p.add_argument("--force", action="store_true", help="overwrite paths changed since")
    p.set_defaults(func=cmd_undo)

    p = _command(sub, "checkpoints", "list the recent turns and peers' calls and their files")
    p.set_defaults(func=cmd_checkpoints)

    from gbr_node.approvals.parser import add_parser as add_approvals_parser
    from gbr_node.chat.cli import add_parser as add_inbox_parser

    add_approvals_parser(sub).set_defaults(func=cmd_approvals)
    add_inbox_parser(sub).set_defaults(func=cmd_inbox)

    p = _command(sub, "init", "create .gbr_envs/default.toml here if absent")
    p.add_argument(
        "--checks",
        action="store_true",
        help="add the write checks detected here to an existing profile (prints the diff)",
    )
    p.set_defaults(func=cmd_init)

    p = _command(sub, "env", "validate or describe environment profiles")
    env_sub = p.add_subparsers(dest="env_command", metavar="ACTION", required=True)
    for name, summary, description, examples in ENV_ACTIONS:
        action = env_sub.add_parser(
            name,
            help=summary,
            description=description,
            epilog=_examples(examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "check":
            action.add_argument("name", nargs="?", help="profile name (default: the active one)")
    p.set_defaults(func=cmd_env)

    p = _command(sub, "tool", "run one local tool under the active profile", add_help=False)
    p.add_argument("-h", "--help", action=_ToolHelp, help="show this help, with every tool")
    p.add_argument("name", nargs="?", help="tool name, e.g. read_file")
    p.add_argument("arguments", nargs="?", default="{}", metavar="JSON-ARGS", help=ARGS_HELP)
    p.add_argument("--json", action="store_true", help="print the raw MCP result")
    p.add_argument(
        "--list",
        action="store_true",
        help="list every tool the local agent has: local, library, mounted MCP (NAME__TOOL)",
    )
    p.set_defaults(func=cmd_tool)
    _add_global_options(parser)
    return parser


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, **kwargs: Any
) -> argparse.ArgumentParser:
    description, examples = COMMANDS[name]
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=_examples(examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )


def _examples(lines: list[str]) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """Accept the global options after every (sub)command too; there a value given
    wins over one given before the command, and an absent one leaves it alone."""
    for action in parser._actions:  # argparse keeps subcommands only there
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                group = child.add_argument_group("global options (also before the command)")
                for flag, metavar, text in GLOBAL_OPTIONS:
                    group.add_argument(flag, metavar=metavar, help=text, default=argparse.SUPPRESS)
                _add_global_options(child)


class _ToolHelp(argparse.Action):
    """`gbr-node tool --help`: the usual help, then every tool with its arguments."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: Any = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parser.print_help()
        print(f"\n{tool_listing()}")
        parser.exit()


def tool_listing() -> str:
    """Every tool `gbr-node tool` can run with the default profile, with its arguments
    (`name?` is optional); the active profile's `[tools] enabled` may turn some off."""
    from gbr_node.approvals.desk import ApprovalDesk
    from gbr_node.config.profile import ToolsConfig
    from gbr_node.sandbox import Sandbox
    from gbr_node.tools.registry import build_registry

    sandbox = Sandbox(Path.cwd())
    desk = ApprovalDesk(None, lambda: sandbox)  # type: ignore[arg-type]  # only its spec is read
    registry = build_registry(ToolsConfig(), sandbox, extra=[desk.status_tool()])
    lines = ["tools (the active profile's [tools] enabled may turn some off):"]
    for spec in registry.specs():
        schema = spec.get("inputSchema") or {}
        required = set(schema.get("required", []))
        names = [n if n in required else f"{n}?" for n in schema.get("properties", {})]
        summary = (spec.get("description") or "").strip().split(". ")[0].rstrip(".") + "."
        lines.append(f"  {spec['name']:<16} {summary}")
        lines.append(f"  {'':<16} arguments: {', '.join(names) or 'none'}")
    return "\n".join(lines)


def _listen_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--listen",
        metavar="MULTIADDR",
        action="append",
        help="listen multiaddr, e.g. /ip4/127.0.0.1/tcp/4001 (repeatable; default: profile)",
    )


def _version() -> str:
    from gbr_node import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `gbr-node` console script; returns the exit status."""
    from gbr_node import lean

    lean.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    from gbr_node.errors import GbrError

    try:
        if getattr(args, "short_lived", False):
            with _collector_paused():
                return int(args.func(args))
        return int(args.func(args))
    except GbrError as exc:
        print(f"gbr-node: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader left (`gbr-node id | head -1`): stop quietly, as other tools do;
        # stdout goes to devnull so the interpreter's final flush cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except BaseException as exc:
        # trio raises a Ctrl-C that lands inside a nursery wrapped in an exception group
        split = getattr(exc, "subgroup", None)
        if split is not None and split(KeyboardInterrupt) is not None:
            return 130
        if not isinstance(exc, Exception):
            raise
        return _internal_error(exc)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Run a short-lived command (`call`, `id`: `short_lived` in the parser) without
    Python's cyclic garbage collector, and skip its last passes at exit.

    Its passes walk every object the command's ~700 modules made, again and
    again while they load and once more at interpreter exit, and find next to
    nothing to free: those objects live as long as the process. On 2 busy cores
    that was ~35 ms of `gbr-node call`'s ~380 ms while loading and ~60 ms at
    exit (issue 35, scripts/bench/startup.py). Such a command makes one dial,
    one request and one response (at most `[node] max_message_bytes`) and
    stops, so the cycles it leaves while the collector is off are few and small.

    The collector is as it was again when the command returns (in-process tests
    call `main` many times), with what the command made in its oldest generation,
    as if it had lived through the collections it skipped: `gc.freeze()` and
    `gc.unfreeze()` move it there in one step ("back into the oldest
    generation", the gc docs say), where the next collection, the young
    generation's, would have walked all of it at once (~20 ms). At exit,
    `gc.freeze()` moves what is left into the permanent generation, which "all
    the future collections" ignore, the interpreter's final ones too (the docs
    name speeding up collection as one of its uses); objects are still freed by
    reference counting, and files and streams are closed by their owners before.
    """
    import atexit
    import gc

    enabled = gc.isenabled()
    gc.disable()
    atexit.unregister(gc.freeze)  # once, however many commands run in this process
    atexit.register(gc.freeze)
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _internal_error(exc: Exception) -> int:
    """Report a defect in one line naming its innermost exception; the traceback goes
    to the log file when one is set up (`run`: .gbr/node.log), else to stderr.

    Both go to the process's own stderr (`sys.__stderr__`), not `sys.stderr`: a
    REPL input that did not end within `repl.app.STOP_TIMEOUT_S` of the stop (a
    busy machine) still has its line sink there, whose lines go above a prompt
    that is closing, and the report was lost (CI, test_cli_messages)."""
    import logging
    import traceback

    err = sys.__stderr__ or sys.stderr

    leaf: BaseException = exc
    while getattr(leaf, "exceptions", None):  # an exception group (trio's nurseries)
        leaf = leaf.exceptions[0]  # type: ignore[attr-defined]
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    if files:
        logging.getLogger("gbr_node").error("the node stopped on a defect", exc_info=exc)
        where = f"the traceback is in {files[0].baseFilename}"
    else:
        traceback.print_exception(exc, file=err)
        where = "the traceback is above"
    print(
        f"gbr-node: stopped on an internal error: {type(leaf).__name__}: {leaf} "
        f"(a defect; {where})",
        file=err,
        flush=True,
    )
    return EXIT_FAILED
