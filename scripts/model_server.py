"""Run the scripted OpenAI-compatible test model server on 127.0.0.1 until stopped.

    python scripts/model_server.py [--script replies.json] [--record requests.jsonl]
                                   [--port 0] [--model test-model] [--default-text TEXT]

Prints its base URL (`http://127.0.0.1:PORT/v1`) as the first line of stdout,
then answers each valid chat request with the next reply of the script (a
JSON list; forms in `tests.support.replies.reply_from_json`), and with
`--default-text` once the script is used up. Each request is appended to the
`--record` file as one JSON line. Stops on SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.model_server import ModelServer  # noqa: E402 (needs the path above)
from tests.support.replies import reply_from_json, text_reply  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, help="JSON list of scripted replies")
    parser.add_argument("--record", type=Path, help="JSONL file that receives every request")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--model", default="test-model", help="model id listed by /v1/models")
    parser.add_argument("--default-text", default="(scripted replies used up)")
    args = parser.parse_args(argv)

    replies = json.loads(args.script.read_text(encoding="utf-8")) if args.script else []
    server = ModelServer(
        model=args.model,
        default=text_reply(args.default_text),
        record_path=str(args.record) if args.record else None,
        port=args.port,
    )
    server.enqueue(*[reply_from_json(spec) for spec in replies])
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with server:
        print(server.base_url, flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
