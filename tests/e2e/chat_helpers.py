"""Two (or more) real `gbr-node run` nodes that chat: each its own project, HOME, identity,
scripted model server and pseudo-terminal (issue 19)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.e2e.conftest import node_env, spawn_node
from tests.e2e.p2p_helpers import Identity
from tests.e2e.terminal import Terminal
from tests.support.model_server import ModelServer

START_TIMEOUT_S = 90
"""A node's start is slow on a loaded shared machine (imports alone take seconds)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (bound to port 0, then released), for a node that
    must come back at the same address after a restart."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChatNode:
    """One node of a chat test: `tmp/NAME/` holds its project, HOME and key file.

    `peers` maps alias -> (ChatNode, chat mode, extra TOML lines) of the peers it
    trusts; `port` fixes its listen port (else a free one, announced in its banner).
    """

    def __init__(self, tmp: Path, name: str, port: int | None = None) -> None:
        self.name = name
        self.dir = tmp / name
        self.project = self.dir / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.home = self.dir / "home"
        self.home.mkdir(exist_ok=True)
        self.identity = Identity(self.dir / "identity.key")
        self.peer_id = self.identity.peer_id
        self.port = port or free_port()
        self.addr = f"/ip4/127.0.0.1/tcp/{self.port}"
        self.model = ModelServer(model="test-model").start()
        self.term: Terminal | None = None

    def write_profile(
        self,
        peers: Mapping[str, tuple[ChatNode, str, str]],
        extra: str = "",
        system_prompt: str | None = None,
    ) -> None:
        """`.gbr_envs/default.toml`: the model server, our port, the trusted peers."""
        prompt = system_prompt or f"You are the test agent of {self.name}."
        lines = [
            f"system_prompt = {prompt!r}".replace("'", '"'),
            'protected_files = ["pyproject.toml"]',
            extra,
        ]
        for alias, (node, mode, more) in peers.items():
            lines += [
                f"[peers.{alias}]",
                f'peer_id = "{node.peer_id}"',
                f'addrs = ["{node.addr}"]',
                f'chat = "{mode}"',
                more,
            ]
        lines += [
            "[model]",
            f'base_url = "{self.model.base_url}"',
            'model = "test-model"',
            'api_key_env = "GBR_TEST_KEY"',
            "[node]",
            f'listen = ["{self.addr}"]',
        ]
        folder = self.project / ".gbr_envs"
        folder.mkdir(exist_ok=True)
        (folder / "default.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def start(self) -> Terminal:
        """`gbr-node run` in a pty; returns its terminal once the banner shows."""
        child = spawn_node(self.project, "run", home=self.home, identity=self.identity.path)
        self.term = Terminal(child, timeout_s=30)
        self.term.expect("/help for commands", START_TIMEOUT_S)
        self.term.expect(r"idle · |● waiting for approval", START_TIMEOUT_S)
        return self.term

    def kill(self) -> None:
        """SIGKILL the node (a crash: nothing is flushed or closed)."""
        if self.term is not None and self.term.child.isalive():
            self.term.child.kill(9)
            self.term.child.wait()

    def stop(self) -> None:
        """End the node and its model server."""
        if self.term is not None and self.term.child.isalive():
            self.term.child.terminate(force=True)
        self.model.stop()

    def gbr(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `python -m gbr_node ARGS` in this node's project to completion."""
        return subprocess.run(
            [sys.executable, "-m", "gbr_node", *args],
            cwd=self.project,
            env=node_env(self.home),
            capture_output=True,
            text=True,
            timeout=60,
        )
