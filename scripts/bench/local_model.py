"""Benchmark: the embedded models through gbr-node's client: speed and memory, and the
client against bare httpx on the same server.

Run: `.venv/bin/python scripts/bench/local_model.py [--runs N] [--models a,b] [--quick]`
(needs the `[local]` extra and the models). By default (issue 32) each model of
`--models` (both catalogued defaults: qwen2.5-coder-1.5b and smollm2-135m) is started
in turn and measured through `ModelClient`: start-up seconds (server start to
`/v1/models` answering, the model loaded), first token cold (the first request after
the start: the system and user prompt evaluated from nothing) and warm (median of
`--runs` later requests whose prompt differs only in its last message), decode
tokens/s (median), and the server's resident memory (VmRSS at the end, VmHWM peak).
`--compare MODEL` runs issue 8's comparison instead: gbr-node's path costs at most 15%
over the floor, i.e. the ratios printed are at most 1.15.

- Client: the node's path. `local_model_server` starts llama.cpp's server
  (xllamacpp) on 127.0.0.1 in a child process and `ModelClient.stream_chat`
  streams the answer over HTTP/SSE.
- Floor: bare httpx reading the same server's SSE lines and parsing only
  the `content` of each delta: the server's own cost with nothing of
  gbr-node's (no SSE decoder, no delta assembler, no events).

(Issue 8 compared with llama-cpp-python in-process; issue 15 replaced that
package, which had to build llama.cpp on the user's machine, by xllamacpp's
prebuilt server, so the floor is now the same server read as cheaply as
possible.) Both sides ask at temperature 0 with the same messages, the
sides alternating run by run so that a change of machine load hits both.
Two scenarios, `--runs` runs each (default 9) after one warm-up: "new
turn" (a different question each run, its new tokens evaluated) and "same
prompt" (the server reuses the whole evaluated prompt). Measured per run:
first token, from the request to the first piece of answer text, in
milliseconds; tokens/s, the server's completion tokens after the first over
the time from the first to the last piece (the decode rate). Prints
medians, the ratios client/floor (first token) and floor/client (tokens/s),
the load average, and whether both sides gave the same text.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from gbr_node.llm.client import ModelClient
from gbr_node.llm.events import Completion, TextDelta
from gbr_node.llm.local import CATALOGUE, DEFAULT_LOCAL_MODEL, local_model_server
from gbr_node.llm.settings import ClientSettings

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TOPICS = ("the sea", "mountains", "rain", "a library", "bread", "trains", "autumn", "bees")
TARGET_RATIO = 1.15
TURN_TIMEOUT_S = 300

Messages = list[dict[str, Any]]


def new_turn(run: int) -> Messages:
    topic = TOPICS[run % len(TOPICS)]
    return [SYSTEM, {"role": "user", "content": f"Write a short paragraph about {topic}."}]


def same_prompt(run: int) -> Messages:
    return [SYSTEM, {"role": "user", "content": "Write a short paragraph about the sea."}]


SCENARIOS: dict[str, Callable[[int], Messages]] = {"new turn": new_turn, "same prompt": same_prompt}


@dataclass(frozen=True)
class Run:
    """One answer: seconds to the first text, seconds from first to last text, tokens, text."""

    first_s: float
    decode_s: float
    tokens: int
    text: str

    @property
    def rate(self) -> float:
        return (self.tokens - 1) / self.decode_s if self.decode_s > 0 else 0.0


async def client_run(client: ModelClient, messages: Messages) -> Run:
    """One answer through gbr-node's `ModelClient`."""
    pieces: list[str] = []
    tokens = 0
    with trio.fail_after(TURN_TIMEOUT_S):
        start = time.perf_counter()
        first = last = start
        async with client.stream_chat(messages) as stream:
            async for event in stream:
                if isinstance(event, TextDelta) and event.text:
                    last = time.perf_counter()
                    if not pieces:
                        first = last
                    pieces.append(event.text)
                elif isinstance(event, Completion):
                    tokens = (event.usage or {}).get("completion_tokens", 0)
    return Run(first - start, last - first, tokens, "".join(pieces))


async def raw_run(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Run:
    """One answer read with bare httpx from the same server: the server's cost, no gbr-node."""
    pieces: list[str] = []
    tokens = 0
    with trio.fail_after(TURN_TIMEOUT_S):
        start = time.perf_counter()
        first = last = start
        async with http.stream("POST", url, json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"].get("completion_tokens", 0)
                for choice in chunk.get("choices") or ():
                    text = choice.get("delta", {}).get("content")
                    if text:
                        last = time.perf_counter()
                        if not pieces:
                            first = last
                        pieces.append(text)
    return Run(first - start, last - first, tokens, "".join(pieces))


async def measure(runs: int, name: str) -> dict[str, dict[str, list[Run]]]:
    """Per scenario, the client's and bare httpx's runs (warm-ups left out)."""
    results: dict[str, dict[str, list[Run]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        async with local_model_server(Path(folder) / "server.log", name) as local:
            settings = ClientSettings(
                base_url=local.base_url, model=local.model, temperature=0.0, max_retries=0
            )
            url = f"{local.base_url}/chat/completions"
            async with ModelClient(settings) as client, httpx.AsyncClient(timeout=60) as http:
                for scenario, messages_of in SCENARIOS.items():
                    results[scenario] = {"client": [], "floor": []}
                    for i in range(runs + 1):  # run 0 is the warm-up
                        body = {
                            "model": local.model,
                            "messages": messages_of(i),
                            "stream": True,
                            "stream_options": {"include_usage": True},
                            "temperature": 0.0,
                        }
                        ours = await client_run(client, messages_of(i))
                        floor = await raw_run(http, url, body)
                        if i:
                            results[scenario]["client"].append(ours)
                            results[scenario]["floor"].append(floor)
    return results


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process `pid`, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


@dataclass(frozen=True)
class Profile:
    """One model's figures: seconds to start, cold first token (s), warm first tokens (s),
    decode rates (tokens/s), memory (MiB)."""

    start_s: float
    cold: Run
    warm: list[Run]
    rss_mib: float
    peak_mib: float


async def profile(name: str, runs: int) -> Profile:
    """Start model `name`, measure a cold request then `runs` warm ones, stop it."""
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        async with local_model_server(Path(folder) / "server.log", name) as local:
            start_s = time.perf_counter() - started
            settings = ClientSettings(
                base_url=local.base_url, model=local.model, temperature=0.0, max_retries=0
            )
            async with ModelClient(settings) as client:
                cold = await client_run(client, new_turn(0))
                warm = [await client_run(client, new_turn(i)) for i in range(1, runs + 1)]
            rss, peak = memory_mib(local.pid)
    return Profile(start_s, cold, warm, rss, peak)


async def profile_all(names: list[str], runs: int) -> dict[str, Profile]:
    return {name: await profile(name, runs) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="measured runs (9)")
    parser.add_argument(
        "--models",
        help="comma-separated models to profile (default: both defaults; with --quick, "
        "smollm2-135m, a smoke run that loads in a second)",
    )
    parser.add_argument(
        "--compare", choices=list(CATALOGUE), help="issue 8's client-versus-floor run instead"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 run per scenario")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    if args.models is None:
        args.models = "smollm2-135m" if args.quick else f"{DEFAULT_LOCAL_MODEL},smollm2-135m"
    before = os.getloadavg()
    if args.compare is None:
        names = [name for name in args.models.split(",") if name]
        profiles = trio.run(profile_all, names, args.runs)
        print(f"temperature 0; warm figures are medians of {args.runs} runs")
        print(f"load average before {before}, after {os.getloadavg()}")
        head = ["model", "start s", "first token cold s", "first token warm s", "tokens/s"]
        head += ["RSS MiB", "peak RSS MiB"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for name, found in profiles.items():
            warm_first = statistics.median(run.first_s for run in found.warm)
            rate = statistics.median(run.rate for run in [found.cold, *found.warm])
            cells = [CATALOGUE[name].alias, f"{found.start_s:.1f}", f"{found.cold.first_s:.2f}"]
            cells += [f"{warm_first:.2f}", f"{rate:.1f}", f"{found.rss_mib:.0f}"]
            cells.append(f"{found.peak_mib:.0f}")
            print("| " + " | ".join(cells) + " |")
        return
    args.model = args.compare
    results = trio.run(measure, args.runs, args.model)
    print(f"{CATALOGUE[args.model].alias}, temperature 0, median of {args.runs} runs per side")
    print(f"load average before {before}, after {os.getloadavg()}")
    print(f"{'':40}{'first token ms':>15}{'tokens/s':>10}")
    for scenario, sides in results.items():
        same = all(a.text == b.text for a, b in zip(sides["client"], sides["floor"], strict=True))
        answer = statistics.median(run.tokens for run in sides["floor"])
        print(f"{scenario} (answers ~{answer:.0f} tokens; same text: {'yes' if same else 'NO'})")
        figures = {}
        for side, label in (("client", "gbr-node client (HTTP/SSE)"), ("floor", "bare httpx")):
            first_ms = statistics.median(run.first_s * 1000 for run in sides[side])
            rate = statistics.median(run.rate for run in sides[side])
            figures[side] = (first_ms, rate)
            print(f"  {label:38}{first_ms:>15.1f}{rate:>10.1f}")
        (client_first, client_rate), (floor_first, floor_rate) = figures["client"], figures["floor"]
        first_ratio, rate_ratio = client_first / floor_first, floor_rate / client_rate
        verdict = "ok" if max(first_ratio, rate_ratio) <= TARGET_RATIO else "over target"
        label = "  ratio client/floor (target <= 1.15)"
        print(f"{label:40}{first_ratio:>15.2f}{rate_ratio:>10.2f}  {verdict}")


if __name__ == "__main__":
    main()
