"""Child-process entry point of the embedded model server: llama.cpp's own server, tied.

Run as `python -m gbr_node.llm.local_server --model GGUF --port N --n-ctx N
--n-predict N --alias NAME [--chat-template FILE]`. It starts llama.cpp's native HTTP server
(OpenAI-compatible `/v1/chat/completions`, `/v1/models`, `/props`) from the
prebuilt `xllamacpp` wheel on 127.0.0.1:N, with the chat template FILE (else the GGUF's own): the
model's turn markers plus tool specs and `<tool_call>` blocks that
llama.cpp's template analysis turns into OpenAI tool calls, streamed or not.
The wheel is built for x86-64 with AVX2 and without AVX-512 or AMX, so it
runs on CPUs (and VMs) that advertise AMX but fault on it.

Parent watchdog: a daemon thread reads stdin, which the parent keeps as an
open pipe and never writes to. End-of-file means the parent closed the pipe
or died (even by SIGKILL: the kernel closes a dead process's descriptors),
and the server exits at once, so a killed node never leaves an orphan
server holding a port and the model's memory.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The child's command line (see the module docstring); exits 2 on a bad one."""
    parser = argparse.ArgumentParser(prog="gbr_node.llm.local_server")
    parser.add_argument("--model", required=True, type=Path, help="GGUF file")
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--n-ctx", required=True, type=int, help="context window, tokens")
    parser.add_argument("--n-predict", required=True, type=int, help="longest answer, tokens")
    parser.add_argument("--alias", required=True, help="model id the server lists")
    parser.add_argument(
        "--chat-template", type=Path, help="Jinja template file (default: the GGUF's own)"
    )
    return parser.parse_args(argv)


def _exit_when_parent_goes() -> None:
    """Block on stdin until end-of-file, then end the whole process."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)  # no cleanup wanted: the server holds nothing that needs it


def main(argv: list[str] | None = None) -> None:
    """Start the watchdog, then llama.cpp's server; serve until the parent goes or SIGTERM."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    threading.Thread(target=_exit_when_parent_goes, name="parent-watchdog", daemon=True).start()
    if not args.model.is_file():
        sys.exit(f"gbr-node local server: no model file {args.model}")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    params.n_ctx = args.n_ctx
    params.n_parallel = 1  # one slot holding the whole window
    params.n_predict = args.n_predict
    params.use_jinja = True
    if args.chat_template is not None:
        params.chat_template = args.chat_template.read_text(encoding="utf-8")
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.endpoint_props = True
    params.model_alias = {args.alias}
    server = xllamacpp.Server(params)
    print(f"gbr-node local server: listening on {server.listening_address}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
