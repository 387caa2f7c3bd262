"""One-shot commands import only what they use (issue 35).

Each command runs as its own process (`python -m gbr_node ...`, the entry point's
`lean.install()` included); at exit it prints the modules really loaded (the
stand-ins and deferred modules of `gbr_node/lean.py` are not), and none of the
command's forbidden ones may be among them; it also says whether the garbage
collector's last passes were left out (`call` and `id`). Timings are benchmarks'
(scripts/bench/startup.py), never asserted here.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import node_env

RUNNER = """
import atexit, gc, runpy, sys

def loaded():
    kinds = ("module", "_BarePackage")  # lean's stand-ins, deferred and lazy modules are not
    return [n for n, m in list(sys.modules.items()) if type(m).__name__ in kinds]

def report():  # registered first, so it runs last
    print("LOADED", *sorted(loaded()), file=sys.stderr)
    print("COLLECTOR", gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)

atexit.register(report)
sys.argv = ["gbr-node", *sys.argv[1:]]
runpy.run_module("gbr_node", run_name="__main__")
"""

NEVER = (
    # py-libp2p's parts a Noise + Yamux + TCP host never runs, and their libraries
    "aioquic",
    "libp2p.transport.quic",
    "libp2p.transport.websocket",
    "libp2p.security.tls",
    "libp2p.security.secio.transport",
    "libp2p.kad_dht",
    "libp2p.pubsub.pubsub",
    "libp2p.rcmgr.manager",
    "trio_websocket",
    "service_identity",
    "zeroconf",
    "prometheus_client",
    # used only for a DNS address or an RSA / secp256k1 key
    "dns",
    "multiaddr.resolvers",
    "Crypto",
    "coincurve",
    "fastecdsa",
    # psutil (only to listen on a wildcard address), certificates (AutoTLS only), and
    # installed packages' metadata (pydantic's plugins, py-libp2p's version)
    "psutil",
    "cryptography.x509.base",
    "importlib.metadata",
    "email",
    # protobuf's pure-Python implementation (the installed wheel runs upb)
    "google.protobuf.internal.python_message",
    "google.protobuf.text_format",
    # the terminal, the agent and the model, for commands that draw nothing and ask none
    "prompt_toolkit",
    "rich.console",
    "pygments",
    "httpx",
    "mcp",
    "gbr_node.node",
    "gbr_node.control",
    "gbr_node.repl.app",
    "gbr_node.agent.runtime",
    "gbr_node.llm.client",
)
NO_NETWORK = ("libp2p", "multiaddr", "cryptography", "nacl", "gbr_node.p2p")
PARSER_ONLY = (
    *NO_NETWORK,
    *("trio", "pydantic", "sqlite3", "gbr_node.config", "gbr_node.approvals.log"),
)
UNREACHABLE = "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWErSjMCFT4hP9dkdmcU8JqvLQxe1g4T5F7YwSjb1nVPTJ"

# (command line, what it must not load besides NEVER)
COMMANDS = [
    (["--version"], PARSER_ONLY),
    (["--help"], PARSER_ONLY),
    (["call", "--help"], PARSER_ONLY),
    (
        ["call", UNREACHABLE, "read_file", "{}"],
        # the serving side, the cell widths only a --list draws, the profile's sections
        # other than [node] and [peers] (their models: config.profile), and a relay's book
        (
            *("gbr_node.tools", "sqlite3", "gbr_node.p2p.service", "gbr_node.rpc.toolhost"),
            *("gbr_node.rpc.server", "rich", "gbr_node.config.profile", "gbr_node.p2p.relaybook"),
        ),
    ),
    (["id"], ("gbr_node.tools.registry", "sqlite3")),
    (["tool", "read_file", '{"path": "notes.txt"}'], NO_NETWORK),
    (["env", "check"], NO_NETWORK),
    (["inbox"], (*NO_NETWORK, "gbr_node.tools.registry")),
    (["approvals", "list"], (*NO_NETWORK, "gbr_node.tools.registry")),
    (["checkpoints"], (*NO_NETWORK, "gbr_node.tools.registry")),
]


def loaded_by(project: Path, argv: list[str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run `gbr-node ARGV` in `project`; (the finished process, the modules it loaded)."""
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    env = {**node_env(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *argv],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("LOADED ")]
    assert lines, f"gbr-node {' '.join(argv)} printed no module list:\n{done.stderr}"
    return done, lines[-1].split()[1:]


def forbidden_in(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    """The names in `modules` that are one of `forbidden` or inside one of them."""
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden)]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("startup") / "project"
    folder.mkdir()
    subprocess.run([sys.executable, "-m", "gbr_node", "init"], cwd=folder, check=True, timeout=60)
    (folder / "notes.txt").write_text("hello\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(("argv", "forbidden"), COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_a_one_shot_command_imports_only_what_it_uses(
    project: Path, argv: list[str], forbidden: tuple[str, ...]
) -> None:
    done, modules = loaded_by(project, argv)
    assert done.returncode in (0, 3), done.stderr  # 3: `call` found nobody at the address
    assert forbidden_in(modules, NEVER + forbidden) == []


def test_the_check_sees_a_forbidden_module(project: Path) -> None:
    """The list is read from the process itself: `model` loads the model client."""
    _, modules = loaded_by(project, ["model"])
    assert "gbr_node.llm.client" in modules
    assert forbidden_in(["dns.resolver", "dnsx", "httpx"], ("dns", "httpx")) == [
        "dns.resolver",
        "httpx",
    ]


@pytest.mark.parametrize(
    ("argv", "frozen"),
    [(["id"], True), (["call", UNREACHABLE, "read_file", "{}"], True), (["env", "check"], False)],
)
def test_short_lived_commands_leave_the_collector_s_last_passes_out(
    project: Path, argv: list[str], frozen: bool
) -> None:
    """`call` and `id` freeze what is left at exit (`gc.freeze`), so the interpreter's
    final collections skip it; the collector is on again once the command returned.
    Other commands leave it as it is (cli._collector_paused)."""
    done, _ = loaded_by(project, argv)
    assert f"COLLECTOR True {frozen}" in done.stderr.splitlines(), done.stderr


def test_a_short_lived_command_runs_with_the_collector_off_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gbr_node import cli

    seen: list[bool] = []

    def command(args: object) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(cli, "cmd_id", command)
    monkeypatch.setattr(cli, "cmd_inbox", command)
    assert gc.isenabled()
    assert cli.main(["id"]) == 0 and cli.main(["inbox"]) == 0
    assert seen == [False, True] and gc.isenabled()
    gc.disable()  # as a caller may have it: left so
    try:
        assert cli.main(["id"]) == 0 and not gc.isenabled()
    finally:
        gc.enable()
