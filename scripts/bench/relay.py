"""Benchmark: a peer behind a NAT reached directly, through a relay, and upgraded by DCUtR.

Usage (as root: it makes network namespaces): python scripts/bench/relay.py [--runs N] [--quick]

The netns lab of tests/support/netns.py (issue 23): A and B each behind their own
port-preserving NAT, R on the public network between the routers. R runs
`gbr-node serve --relay`, B `gbr-node serve` with a reservation on R and its router's
address announced; a driver (this script with `--driver`) runs in A's namespace with
its own libp2p host and times, over N runs each (default 50):

  connect direct     dial + TCP + Noise + Yamux to B through a port forward that
                     this script opens on B's router for this phase only
  connect relayed    the same through R (a circuit), R's connection cold too
  call direct        `tools/call read_file` of a 1 KiB file, new stream per call
  call relayed       the same over the circuit
  call upgraded      the same after DCUtR upgraded the circuit to a direct
                     connection (hole punching through both NATs, no forward)

and the CPU time R spent per relayed call (utime + stime of its process over the
relayed calls, divided by their number). Targets (issue 23): relayed call median
<= 2.5x direct; connect via relay <= 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
from _table import print_timings  # type: ignore[import-not-found]  # noqa: E402

FORWARD = """\
table ip gbr_forward {{
  chain pre {{
    type nat hook prerouting priority dstnat;
    iifname "wan" tcp dport {port} dnat to {target}:{port}
  }}
}}
"""
"""A port forward on B's router for the direct phase (its table is deleted after it)."""


# -- the driver, in A's namespace ----------------------------------------------------------


async def _drive(args: argparse.Namespace) -> None:
    import trio

    from gbr_node.p2p.host import open_host
    from gbr_node.p2p.identity import load_or_create_identity
    from gbr_node.p2p.service import call_tool
    from gbr_node.rpc.limits import Limits

    keypair = load_or_create_identity(Path(args.key))
    limits = Limits()
    read = {"path": "one_kib.txt"}
    out: dict[str, list[float]] = {}

    async def timed(label: str, op, before=None) -> None:
        samples = []
        for _ in range(args.runs):
            if before is not None:
                await before()
            start = time.perf_counter()
            await op()
            samples.append((time.perf_counter() - start) * 1000)
        out[label] = samples

    async with open_host(
        keypair,
        [f"/ip4/{args.a_ip}/tcp/4500"],
        is_trusted=lambda peer: peer == args.b_id,
    ) as host:

        async def cold() -> None:  # no connection to B or R: the next connect dials
            await host.disconnect(args.b_id)
            await host.disconnect(args.r_id)

        async def call(target: str) -> None:
            result = await call_tool(host, target, "read_file", read, limits=limits)
            assert not result.get("isError"), result

        with trio.fail_after(600):
            direct = f"/ip4/{args.b_wan}/tcp/4400/p2p/{args.b_id}"
            await call(direct)
            await timed("connect direct", lambda: host.connect(direct), cold)
            await timed("call direct", lambda: call(direct))
            print("phase direct done", flush=True)
            input()  # the parent removes the port forward
            await host.disconnect(args.b_id)
            await timed("connect relayed", lambda: host.connect(args.circuit), cold)
            await call(args.circuit)
            print("cpu before", flush=True)
            input()  # the parent reads R's CPU time
            await timed("call relayed", lambda: call(args.circuit))
            print("cpu after", flush=True)
            input()
            await host.disconnect(args.b_id)
            host.enable_hole_punching(lambda: [f"/ip4/{args.a_wan}/tcp/4500"])
            await host.connect(args.circuit)
            deadline = trio.current_time() + 60
            while "direct" not in host.connection_types(args.b_id):
                assert trio.current_time() < deadline, "DCUtR did not upgrade the connection"
                await trio.sleep(0.1)
            await timed("call upgraded", lambda: call(args.b_id))
    print("samples " + json.dumps(out), flush=True)


# -- the parent: lab, R and B, the driver ---------------------------------------------------


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="5 runs of each")
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    for name in ("key", "a-ip", "a-wan", "b-wan", "b-id", "r-id", "circuit"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        import trio

        trio.run(_drive, args)
        return
    runs = 5 if args.quick else args.runs
    from tests.e2e.p2p_helpers import Identity, ServeProcess
    from tests.netns.relays import peer, wait_reachable, write_profile
    from tests.support.netns import home_networks

    with tempfile.TemporaryDirectory() as folder, home_networks() as lab:
        tmp = Path(folder)
        ids = {role: Identity(tmp / f"{role}.key") for role in ("a", "b", "r")}
        write_profile(tmp / "r", peers=peer("a", ids["a"].peer_id) + peer("b", ids["b"].peer_id))
        r = ServeProcess(
            tmp / "r",
            tmp / "home-r",
            ids["r"],
            f"/ip4/{lab.addr['r']}/tcp/4300",
            lab.argv("r", []),
            ["--relay"],
        )
        b_wan = lab.addr["router_b"]
        write_profile(
            tmp / "b",
            node=f'relays = ["{r.addr}"]\nannounce = ["/ip4/{b_wan}/tcp/4400"]',
            peers=peer("a", ids["a"].peer_id, tools='["read_file"]'),
        )
        (tmp / "b" / "one_kib.txt").write_text("x" * 1023 + "\n")
        b = ServeProcess(
            tmp / "b", tmp / "home-b", ids["b"], f"/ip4/{lab.addr['b']}/tcp/4400", lab.argv("b", [])
        )
        try:
            wait_reachable(b, r.addr)
            forward = FORWARD.format(port=4400, target=lab.addr["b"])
            added = lab.run("router_b", ["nft", "-f", "-"], stdin=forward)
            assert added.returncode == 0, added.stderr
            driver = lab.popen(
                "a",
                [
                    sys.executable,
                    __file__,
                    "--driver",
                    "--runs",
                    str(runs),
                    "--key",
                    str(ids["a"].path),
                    "--a-ip",
                    lab.addr["a"],
                    "--a-wan",
                    lab.addr["router_a"],
                    "--b-wan",
                    b_wan,
                    "--b-id",
                    ids["b"].peer_id,
                    "--r-id",
                    ids["r"].peer_id,
                    "--circuit",
                    f"{r.addr}/p2p-circuit/p2p/{ids['b'].peer_id}",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=str(ROOT),
            )
            assert driver.stdin is not None and driver.stdout is not None
            cpu: list[float] = []
            samples: dict[str, list[float]] = {}
            for line in driver.stdout:
                if line.startswith("phase direct done"):
                    lab.run("router_b", ["nft", "delete table ip gbr_forward"])
                elif line.startswith("cpu"):
                    cpu.append(_cpu_s(r.proc.pid))  # `ip netns exec` execs: R's own PID
                elif line.startswith("samples "):
                    samples = json.loads(line.removeprefix("samples "))
                    break
                else:
                    continue
                if not line.startswith("samples"):
                    driver.stdin.write("\n")
                    driver.stdin.flush()
            driver.wait(timeout=60)
            assert samples, f"the driver failed (exit {driver.returncode})"
        finally:
            b.kill()
            r.kill()
    direct, relayed = (statistics.median(samples[f"call {k}"]) for k in ("direct", "relayed"))
    upgraded = statistics.median(samples["call upgraded"])
    print_timings(
        f"netns lab (two NATs, R between), {runs} runs, read_file 1 KiB",
        [
            ("connect (dial+Noise+Yamux) direct", samples["connect direct"], ""),
            ("connect via relay, cold", samples["connect relayed"], "<= 100 ms"),
            ("call direct", samples["call direct"], ""),
            ("call relayed", samples["call relayed"], f"{relayed / direct:.2f}x direct (<= 2.5x)"),
            ("call upgraded (DCUtR)", samples["call upgraded"], f"{upgraded / direct:.2f}x direct"),
        ],
    )
    per_call_ms = (cpu[1] - cpu[0]) / runs * 1000
    print(f"relay CPU per relayed call: {per_call_ms:.2f} ms (R's utime+stime / {runs} calls)")


if __name__ == "__main__":
    main()
