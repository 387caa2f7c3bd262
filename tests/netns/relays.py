"""A relayed world for the tests of issue 23: real `gbr-node` processes in the netns lab.

R (`gbr-node serve --relay`) sits on the public network; B (`gbr-node serve`) is behind
its home NAT and keeps a reservation on R (`[node] relays`); A, behind its own NAT,
reaches B only through R (its profile's `[peers.b] addrs` is B's circuit address).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.p2p_helpers import Identity, ServeProcess, gbr_call
from tests.support.netns import Lab, home_networks

B_FILE = "the answer is on b, behind its NAT\n"
NAMESPACE = {"a": "a", "b": "b", "r": "r", "c": "a"}
"""Where each node runs: C is a second node in A's home network."""


@dataclass
class World:
    """The lab, the three identities and projects, and the running R and B."""

    lab: Lab
    tmp: Path
    ids: dict[str, Identity]
    r: ServeProcess
    b: ServeProcess
    r_listen: str
    extra_processes: list[ServeProcess] = field(default_factory=list)

    def project(self, role: str) -> Path:
        return self.tmp / role

    @property
    def circuit(self) -> str:
        """B's full circuit multiaddr through R."""
        return f"{self.r.addr}/p2p-circuit/p2p/{self.ids['b'].peer_id}"

    def call(self, role: str, target: str, *args: str, timeout_s: float = 60):
        """`gbr-node call TARGET ARGS` as `role` (its identity and project), in its namespace."""
        return gbr_call(
            self.project(role),
            self.tmp / f"home-{role}",
            self.ids[role],
            target,
            *args,
            timeout_s=timeout_s,
            wrap=self.lab.argv(NAMESPACE[role], []),
        )

    def restart_r(self) -> ServeProcess:
        """Start R again with the same identity, on the same address and port."""
        self.r = _serve(self, "r", self.r_listen, relay=True)
        return self.r


def write_profile(project: Path, *, peers: str = "", node: str = "", extra: str = "") -> None:
    """`.gbr_envs/default.toml` with `[node]` lines `node`, then `peers` and `extra` tables."""
    folder = project / ".gbr_envs"
    folder.mkdir(parents=True, exist_ok=True)
    text = (
        'system_prompt = "A node of the relay tests."\nprotected_files = ["pyproject.toml"]\n'
        f"[node]\n{node}\n{peers}\n{extra}\n"
    )
    (folder / "default.toml").write_text(text, encoding="utf-8")


def peer(
    alias: str, peer_id: str, *, addrs: Sequence[str] = (), tools: str = "[]", chat: str = "off"
) -> str:
    """A `[peers.ALIAS]` table."""
    listed = ", ".join(f'"{a}"' for a in addrs)
    return (
        f'[peers.{alias}]\npeer_id = "{peer_id}"\naddrs = [{listed}]\ntools = {tools}\n'
        f'chat = "{chat}"\n'
    )


def _serve(world: World, role: str, listen: str, *, relay: bool = False) -> ServeProcess:
    wrap = [*world.lab.argv(role, [])]
    process = ServeProcess(
        world.project(role),
        world.tmp / f"home-{role}",
        world.ids[role],
        listen,
        wrap,
        ["--relay"] if relay else [],
    )
    world.extra_processes.append(process)
    return process


@contextlib.contextmanager
def relayed_world(
    tmp: Path,
    *,
    nat: str = "port-preserving",
    r_trusts: Sequence[str] = ("a", "b"),
    b_trusts_a: bool = True,
    b_node: str = "",
    relay_node: str = "",
) -> Iterator[World]:
    """R, B (reserved on R) and A's project (not started: tests call or run it).

    B grants A `read_file` and `run_command` (sleep) and shows A's messages when
    `b_trusts_a`; R relays for the roles in `r_trusts` (`relay_for = "trusted"`).
    """
    ids = {role: Identity(tmp / f"{role}.key") for role in ("a", "b", "r", "c")}
    with home_networks(nat) as lab:
        r_listen = f"/ip4/{lab.addr['r']}/tcp/4300"
        write_profile(
            tmp / "r",
            node=relay_node,
            peers="".join(peer(role, ids[role].peer_id) for role in r_trusts),
        )
        world = World(lab, tmp, ids, r=None, b=None, r_listen=r_listen)  # type: ignore[arg-type]
        try:
            world.r = _serve(world, "r", r_listen, relay=True)
            b_peers = (
                peer("a", ids["a"].peer_id, tools='["read_file", "run_command"]', chat="show")
                if b_trusts_a
                else ""
            )
            write_profile(
                tmp / "b",
                node=f'relays = ["{world.r.addr}"]\n{b_node}',
                peers=b_peers,
                extra='[tools.run_command]\nallow = ["sleep"]\n',
            )
            (tmp / "b" / "hello.txt").write_text(B_FILE, encoding="utf-8")
            world.b = _serve(world, "b", f"/ip4/{lab.addr['b']}/tcp/4400")
            write_profile(
                tmp / "a",
                peers=peer("b", ids["b"].peer_id, addrs=[f"{world.r.addr}/p2p-circuit"]),
            )
            write_profile(
                tmp / "c",
                peers=peer("b", ids["b"].peer_id, addrs=[f"{world.r.addr}/p2p-circuit"]),
            )
            yield world
        finally:
            for process in world.extra_processes:
                process.kill()


def wait_reachable(
    serve: ServeProcess, relay_addr: str, times: int = 1, timeout_s: float = 30
) -> None:
    """Wait until `serve` has said `times` times that it is reachable through `relay_addr`."""
    pattern = rf"reachable through relay: .*{re.escape(relay_addr)}/p2p-circuit"
    serve.wait_count(pattern, times, timeout_s)
