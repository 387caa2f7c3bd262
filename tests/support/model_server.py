"""A real OpenAI-compatible model server on 127.0.0.1 that answers from a script.

Runs stdlib `ThreadingHTTPServer` (HTTP/1.1, keep-alive, chunked SSE with a
flush per chunk) in a background thread; `scripts/model_server.py` runs it
as its own process. It serves `POST /v1/chat/completions` and
`GET /v1/models`, and:

- validates every chat request with `chat_rules.chat_request_problem` and
  answers 400 in the OpenAI shape when it breaks a rule (the scripted reply
  is not consumed);
- answers each valid request with the next scripted reply: an `Answer`
  (text and/or tool calls; streamed or not, as the request asks), an
  `SseReply` (exact chunks, raw bytes, `Delay`s, `Drop`), an `ErrorReply`
  (status, body, headers) or a `JsonReply`; with the queue empty it uses
  `default`, else answers 500;
- records every request (`requests`) and every client that disconnected
  before its reply was complete (`disconnects`, with a monotonic time);
- with `context_tokens=N`, acts out a server with an N-token window, as
  llama.cpp does: `GET /props` reports `n_ctx`, a request whose prompt
  (counted by `count_prompt_tokens`) plus its `max_tokens` does not fit is
  answered 400 `context_length_exceeded` (the reply is not consumed), and
  answers report the real `usage.prompt_tokens`.

    with ModelServer() as server:
        server.enqueue(text_reply("Hello there"), tool_call_reply("read_file", {"path": "a"}))
        ... ClientSettings(base_url=server.base_url, model="test-model") ...
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import regex

from tests.support.chat_rules import chat_request_problem
from tests.support.replies import (
    Answer,
    Delay,
    Drop,
    ErrorReply,
    Hangup,
    JsonReply,
    Reply,
    SseReply,
    sse_bytes,
)

_TOKEN = regex.compile(r" ?\p{L}+| ?\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")


def count_prompt_tokens(body: Any) -> int:
    """Tokens of a chat request as this server counts them: GPT-2's pre-tokenizer pieces (a
    word, up to 3 digits or a run of punctuation with its leading space) as a stand-in for
    BPE, over every message's content and tool calls and the tool specs' JSON, plus 5 per
    message for the template."""
    texts = []
    messages = body.get("messages") or []
    for message in messages:
        content = message.get("content")
        texts.append(content if isinstance(content, str) else json.dumps(content or ""))
        texts.append(json.dumps(message.get("tool_calls") or ""))
    texts.append(json.dumps(body.get("tools") or ""))
    return 5 * len(messages) + sum(len(_TOKEN.findall(text)) for text in texts)


def context_exceeded_body(prompt_tokens: int, n_ctx: int) -> dict[str, Any]:
    """The 400 body for a request over the window: OpenAI's wording and code, llama.cpp's
    extra fields."""
    message = (
        f"This model's maximum context length is {n_ctx} tokens. However, your messages "
        f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
    )
    error: dict[str, Any] = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
    }
    error.update(code="context_length_exceeded", n_prompt_tokens=prompt_tokens, n_ctx=n_ctx)
    return {"error": error}


@dataclass(frozen=True)
class RecordedRequest:
    """One request: lower-case `headers`, JSON `body` (None if unreadable), `problem` found.

    `client_port` is the client's TCP port (one per connection); `at` is `time.monotonic()`.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    problem: str | None
    client_port: int
    at: float


@dataclass(frozen=True)
class Disconnect:
    """The client of chat request number `request` (0-based, counting only
    `POST .../chat/completions`, not the node's `GET /props` or `/v1/models` probes)
    left after `chunks_sent` writes, at `at`.

    `chunks_sent` counts the non-pause items of the `SseReply` written before
    the disconnect was seen; `at` is `time.monotonic()`.
    """

    request: int
    chunks_sent: int
    at: float


class ModelServer:
    """The scripted server; `with ModelServer() as server:` starts and stops it.

    `model` is the id `/v1/models` lists; `default` answers when the queue is
    empty; `record_path`, when set, gets one JSON line per request; `port`
    0 picks a free port; `context_tokens` sets a window to enforce (None: none).
    """

    def __init__(
        self,
        *,
        model: str = "test-model",
        default: Reply | None = None,
        record_path: str | None = None,
        port: int = 0,
        context_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.context_tokens = context_tokens
        self.overflows = 0  # requests answered 400 context_length_exceeded
        self.default = default
        self._record_path = record_path
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._disconnects: list[Disconnect] = []
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._http = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._http.daemon_threads = True
        self._http.block_on_close = False
        self._http.owner = self  # type: ignore[attr-defined]  # the handler finds its server here
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, what a client's base_url should be."""
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def start(self) -> ModelServer:
        """Serve in a background thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end pauses early and close every open connection."""
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            for sock in self._connections:
                _shutdown(sock)
        self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def enqueue(self, *replies: Reply) -> None:
        """Add replies to the script, answered in order, one per valid chat request."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far (chat and models, valid or not), in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_bodies(self) -> list[Any]:
        """The JSON bodies of the chat requests received so far."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def disconnects(self) -> list[Disconnect]:
        """Clients that left before their reply was complete, in order."""
        with self._lock:
            return list(self._disconnects)

    @property
    def replies_left(self) -> int:
        with self._lock:
            return len(self._queue)

    def _record(self, request: RecordedRequest) -> int:
        """Keep `request`; returns its number among the chat requests (-1 for others)."""
        with self._lock:
            self._requests.append(request)
            if self._record_path:
                with open(self._record_path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(asdict(request)) + "\n")
            chat = [r for r in self._requests if r.path.endswith("/chat/completions")]
            return len(chat) - 1 if request.path.endswith("/chat/completions") else -1

    def _next_reply(self) -> Reply | None:
        with self._lock:
            return self._queue.popleft() if self._queue else self.default


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Each SSE chunk leaves at once (no Nagle delay), as from a real streaming server.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._owner._lock:
            self._owner._connections.add(self.connection)

    def finish(self) -> None:
        with self._owner._lock:
            self._owner._connections.discard(self.connection)
        super().finish()

    @property
    def _owner(self) -> ModelServer:
        return self.server.owner  # type: ignore[attr-defined]  # set by ModelServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        """Quiet: the recorded requests are the log."""

    def do_GET(self) -> None:
        self._record(None, None)
        n_ctx = self._owner.context_tokens
        if self.path.rstrip("/") == "/props" and n_ctx:
            self._send_json(200, {"default_generation_settings": {"n_ctx": n_ctx}})
        elif self.path.rstrip("/").endswith("/models"):
            data = [{"id": self._owner.model, "object": "model", "owned_by": "gbr-tests"}]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, _error(f"no route {self.path}", "not_found"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not self.path.endswith("/chat/completions"):
            self._record(body, None)
            self._send_json(404, _error(f"no route {self.path}", "not_found"))
            return
        problem = chat_request_problem(body)
        number = self._record(body, problem)
        if problem:
            self._send_json(400, _error(problem, "invalid_request_error"))
            return
        prompt_tokens = count_prompt_tokens(body)
        n_ctx = self._owner.context_tokens
        if n_ctx and prompt_tokens + int(body.get("max_tokens") or 0) > n_ctx:
            with self._owner._lock:
                self._owner.overflows += 1
            self._send_json(400, context_exceeded_body(prompt_tokens, n_ctx))
            return
        reply = self._owner._next_reply()
        if isinstance(reply, Answer):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            tokens = prompt_tokens if n_ctx else None
            reply = reply.render(stream=bool(body.get("stream")), usage=usage, prompt_tokens=tokens)
        if reply is None:
            self._send_json(500, _error("test model server: no scripted reply left", "server"))
        elif isinstance(reply, ErrorReply):
            is_text = isinstance(reply.body, str)
            data = reply.body.encode() if is_text else json.dumps(reply.body).encode()
            kind = "text/plain" if is_text else "application/json"
            self._send(reply.status, data, {"content-type": kind, **reply.headers})
        elif isinstance(reply, JsonReply):
            self._send_json(200, reply.body)
        elif isinstance(reply, Hangup):
            self.close_connection = True
            _shutdown(self.connection)
        else:
            self._stream(number, reply)

    def _stream(self, number: int, reply: SseReply) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        items = [*reply.items, b"data: [DONE]\n\n"] if reply.done else list(reply.items)
        written = 0
        for item in items:
            if isinstance(item, Drop):
                self.close_connection = True
                _shutdown(self.connection)
                return
            if isinstance(item, Delay):
                alive = self._pause(item.seconds)
            elif alive := self._write_chunk(sse_bytes(item)):
                written += 1
                alive = not self._client_gone(0)
            if not alive:
                self._disconnected(number, written)
                return
        if not self._write_chunk(b""):
            self._disconnected(number, written)

    def _write_chunk(self, data: bytes) -> bool:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except OSError:
            return False
        return True

    def _pause(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._owner._stopping.is_set() or self._client_gone(min(left, 0.05)):
                return False
        return True

    def _client_gone(self, timeout_s: float) -> bool:
        readable, _, _ = select.select([self.connection], [], [], timeout_s)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _disconnected(self, number: int, sent: int) -> None:
        self.close_connection = True
        with self._owner._lock:
            self._owner._disconnects.append(Disconnect(number, sent, time.monotonic()))

    def _record(self, body: Any, problem: str | None) -> int:
        headers = {key.lower(): value for key, value in self.headers.items()}
        port = self.client_address[1]
        request = RecordedRequest(
            self.command, self.path, headers, body, problem, port, time.monotonic()
        )
        return self._owner._record(request)

    def _send_json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), {"content-type": "application/json"})

    def _send(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other side
        sock.shutdown(socket.SHUT_RDWR)
