"""The model client: OpenAI-compatible chat completions over httpx, streamed.

The only module of gbr-node that imports httpx. It drives the pure parts:
`sse.SseDecoder` (bytes to events) and `deltas.DeltaAssembler` (chunks to
text, reasoning, tool calls). Usage, inside trio:

    async with ModelClient(settings) as client:
        async with client.stream_chat(messages, tools) as stream:
            async for event in stream:
                ...  # TextDelta / ReasoningDelta / ToolCallStarted / KeepAlive / Completion

Rules (OpenAI chat-completions; RFC 9110 section 10.2.3 for Retry-After):
- 429, 502, 503 and 504 are retried up to `max_retries` times, waiting
  `retry-after-ms`, else `Retry-After` (seconds or an HTTP date), else
  `backoff_base_s * 2**attempt`, never more than `retry_wait_cap_s`; a server
  asking for longer than the cap is not waited for. 401/403/404 and other
  errors are never retried and say which setting is probably wrong.
- A connection that drops before the answer's first byte (no status line:
  a stale keep-alive connection, issue 32) is retried once, at once.
- A 200 event stream with no event at all raises ModelError ("empty
  stream"); a stream that breaks after data arrived ends with a partial
  `Completion` (`partial=True`, `error` set) that keeps the text.
- With `stream_tools=False`, a request carrying tools is sent with
  `stream: false` and its JSON answer is turned into the same events.
- An assistant message whose `content` is null (only tool calls) is sent
  without `content`: OpenAI allows both, llama-cpp-python's server rejects
  the null with HTTP 500.
- With `tool_grammar`, a request offering tools also carries the GBNF of
  `llm.grammar` and `tool_choice: "none"` (llama.cpp takes a grammar with
  tools only then; the template still shows them), and the calls are read
  from the answer's text. The first answer of a turn (the last message is
  the person's) must be a call, and so must the one after a failed call (at
  most `grammar.MAX_FORCED_AFTER_ERRORS` in a turn); others may be text. With
  `grammar_workspace`, the grammar names only
  files and folders the project holds (`llm.grammar.Workspace`), no read or
  listing already answered in the turn, and edits only of files read in it.

The retry loop is plain code rather than tenacity/stamina: its waits come
from the failed response's headers, and it must run inside the context that
then streams the successful response.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from types import TracebackType
from typing import Any

import httpx
import trio

from gbr_node.errors import ModelError
from gbr_node.llm.deltas import DeltaAssembler, error_message
from gbr_node.llm.events import Completion, Event, KeepAlive
from gbr_node.llm.grammar import (
    Workspace,
    answered,
    must_call,
    seen_in_turn,
    tool_call_grammar,
)
from gbr_node.llm.settings import RETRYABLE_STATUSES, ClientSettings, retry_wait_s
from gbr_node.llm.sse import SseComment, SseDecoder
from gbr_node.llm.window import (
    from_llama_props,
    from_model_list,
    from_ollama_show,
    is_context_overflow,
    reported_limit,
)

_ERROR_BODY_LIMIT = 64 * 1024  # bytes of a non-2xx body read for its message
_EMPTY_STREAM_SNIPPET = 300  # bytes of a non-SSE 200 body quoted in the error
_DRAIN_S = 0.5  # seconds to wait for the end of the body after [DONE]
_PROBE_TIMEOUT_S = 2.0  # seconds for each context-size probe
# A connection that dropped before the answer's first byte (a keep-alive connection the
# server had closed): the request is sent once more. httpx's transport `retries` covers
# only failures to connect (ConnectError, ConnectTimeout), not these.
_DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


class ModelClient:
    """An HTTP connection pool to one model endpoint. Close it with `aclose()` or `async with`."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._url = settings.base_url.rstrip("/")
        headers = {"user-agent": "gbr-node"}
        if settings.api_key:
            headers["authorization"] = f"Bearer {settings.api_key}"
        headers.update(settings.headers)
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(
                settings.idle_timeout_s,
                connect=settings.connect_timeout_s,
                pool=settings.connect_timeout_s,
            ),
            limits=httpx.Limits(max_connections=settings.max_connections),
        )

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._http.aclose()

    def stream_chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ChatStream:
        """One model turn over `messages` (chat-completions message dicts) offering `tools`.

        Returns a `ChatStream`: use it as `async with ... as stream:` then
        `async for event in stream`. Raises ValueError at once when
        `messages` is empty. See `ChatStream` for errors and cancellation.
        """
        if not messages:
            raise ValueError("messages must be a non-empty list of message dicts")
        return ChatStream(self, list(messages), list(tools or []))

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> Completion:
        """Run `stream_chat` to the end and return its `Completion` (same errors)."""
        async with self.stream_chat(messages, tools) as stream:
            async for event in stream:
                if isinstance(event, Completion):
                    return event
        raise AssertionError("a chat stream always ends with a Completion")

    async def list_models(self) -> list[str]:
        """GET `{base_url}/models`: the model ids the server offers. ModelError on any failure."""
        try:
            response = await self._http.get(f"{self._url}/models")
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self.settings, self.settings.idle_timeout_s) from exc
        if not response.is_success:
            detail = _error_detail(response.text)
            raise _status_error(response.status_code, detail, self.settings, 1)
        try:
            return [str(item["id"]) for item in response.json()["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{self._url}/models did not answer a model list") from exc

    async def context_tokens(self) -> tuple[int, str] | None:
        """The context window the server reports for the configured model, and where
        it said so (GBR-CTX-01): llama.cpp `/props`, `/v1/models` (vLLM
        `max_model_len`, llama.cpp `meta.n_ctx`, `context_length`), Ollama
        `/api/show`; see `llm.window`. None when no probe answers with one;
        never raises (each probe waits at most `_PROBE_TIMEOUT_S` seconds).
        """
        root = self._url.removesuffix("/v1")
        model = self.settings.model
        probes = (
            ("GET", f"{root}/props", None, from_llama_props, "llama.cpp /props"),
            ("GET", f"{self._url}/models", None, lambda j: from_model_list(j, model), "/models"),
            ("POST", f"{root}/api/show", {"model": model}, from_ollama_show, "Ollama /api/show"),
        )
        for method, url, body, read, source in probes:
            try:
                response = await self._http.request(
                    method, url, json=body, timeout=_PROBE_TIMEOUT_S
                )
                tokens = read(response.json()) if response.is_success else None
            except (httpx.HTTPError, ValueError):
                continue
            if tokens:
                return tokens, f"{source} of the model server"
        return None

    @asynccontextmanager
    async def _post(self, body: dict[str, Any], timeout_s: float) -> AsyncIterator[httpx.Response]:
        """POST `body`, retrying as the module docstring says; yields a 2xx streamed response."""
        attempt = 0
        redialled = False
        while True:
            timeout = httpx.Timeout(timeout_s, connect=self.settings.connect_timeout_s)
            try:
                request = self._http.build_request(
                    "POST", f"{self._url}/chat/completions", json=body, timeout=timeout
                )
                response = await self._http.send(request, stream=True)
            except _DROPPED as exc:
                if redialled:
                    raise _transport_error(exc, self.settings, timeout_s) from exc
                redialled = True  # a stale keep-alive connection: once more, on a new one
                continue
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise _transport_error(exc, self.settings, timeout_s) from exc
            if response.is_success:
                break
            try:
                raw = await _read_error_body(response)
            finally:
                await response.aclose()
            detail = _error_detail(raw)
            status = response.status_code
            if is_context_overflow(status, raw):
                raise ModelError(
                    f"the request does not fit the model's context window (HTTP {status}): "
                    f"{detail}",
                    status=status,
                    context_exceeded=True,
                    context_limit=reported_limit(raw),
                )
            if status not in RETRYABLE_STATUSES or attempt >= self.settings.max_retries:
                raise _status_error(status, detail, self.settings, attempt + 1)
            wait = retry_wait_s(response.headers, attempt, self.settings)
            if wait is None:
                detail += (
                    f" (the server asks to wait longer than {self.settings.retry_wait_cap_s} s)"
                )
                raise _status_error(status, detail, self.settings, attempt + 1)
            await trio.sleep(wait)
            attempt += 1
        try:
            yield response
        finally:
            await response.aclose()


class ChatStream:
    """One model turn: an async context manager and a one-shot async iterator of events.

    Yields `TextDelta`, `ReasoningDelta`, `ToolCallStarted`, `KeepAlive`,
    then one `Completion` (see events.py for its fields).

    Raises ModelError, before any event, when the request fails: connect
    error or timeout, an HTTP error status (after the retries), a 200 stream
    with no event ("empty stream"), or no byte for `idle_timeout_s`. A
    failure after data arrived (error event, connection closed, idle
    timeout) is not raised: the final `Completion` has `partial=True` and
    `error` set, and keeps the partial text.

    Cancellation: cancelling the iteration (or leaving the `async with`
    early) closes the HTTP response at once, so the server sees the
    disconnect, and returns its connection to the pool. `completion_so_far()`
    then gives the interrupted turn (ADR-0010).
    """

    def __init__(
        self, client: ModelClient, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> None:
        self._client = client
        self._messages = messages
        self._tools = tools
        self._assembler = DeltaAssembler(text_calls=client.settings.tool_grammar and bool(tools))
        self._completion: Completion | None = None
        self._events: AsyncGenerator[Event, None] = self._run()

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._events.aclose()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    def completion_so_far(self, reason: str = "interrupted") -> Completion:
        """The final `Completion` if it was yielded, else the turn so far marked partial.

        `reason` becomes its `error`. Half-written tool calls are reported
        invalid, never runnable (ADR-0010).
        """
        return self._completion or self._assembler.result(stream_error=reason)

    async def _run(self) -> AsyncGenerator[Event, None]:
        settings = self._client.settings
        streaming = settings.stream_tools or not self._tools
        timeout_s = settings.idle_timeout_s if streaming else settings.request_timeout_s
        async with self._client._post(self._body(streaming), timeout_s) as response:
            if not streaming or "json" in response.headers.get("content-type", ""):
                events = await self._answer(response, timeout_s)
                self._completion = self._assembler.result()
                for event in [*events, self._completion]:
                    yield event
                return
            async for event in self._events_of(response, timeout_s):
                yield event
        yield self.completion_so_far()  # set by _events_of, which raises when it cannot

    def _body(self, streaming: bool) -> dict[str, Any]:
        settings = self._client.settings
        messages = [_wire_message(message) for message in self._messages]
        body: dict[str, Any] = {"model": settings.model, "messages": messages}
        if self._tools:
            body["tools"] = self._tools
            workspace: Workspace | None = None
            if settings.tool_grammar and settings.grammar_workspace is not None:
                workspace = settings.grammar_workspace()
            if workspace is not None:
                workspace = replace(
                    workspace,
                    done=answered(self._messages),
                    seen=seen_in_turn(self._messages),
                )
            grammar = settings.tool_grammar and tool_call_grammar(
                self._tools, must_call=must_call(self._messages), workspace=workspace
            )
            if grammar:
                body["grammar"] = grammar
                body["tool_choice"] = "none"
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        body["stream"] = streaming
        if streaming and settings.include_usage:
            body["stream_options"] = {"include_usage": True}
        return body

    async def _events_of(self, response: httpx.Response, timeout_s: float) -> AsyncIterator[Event]:
        """The events of an SSE body; sets `_completion` (yielded by the caller) at the end."""
        decoder = SseDecoder()
        head = bytearray()  # start of the body, quoted if it held no SSE event at all
        stream_error: str | None = None
        chunks = response.aiter_bytes()
        try:
            async for chunk in chunks:
                if len(head) < _EMPTY_STREAM_SNIPPET:
                    head += chunk[:_EMPTY_STREAM_SNIPPET]
                for event in self._decode(decoder.feed(chunk)):
                    yield event
                if self._assembler.ended:
                    break
            else:
                for event in self._decode(decoder.close()):
                    yield event
            if self._assembler.ended:
                # Read the end of the body, briefly, so the connection can be reused.
                with trio.move_on_after(_DRAIN_S):
                    async for _ in chunks:
                        pass
        except httpx.HTTPError as exc:
            if not self._assembler.got_data:
                raise _transport_error(exc, self._client.settings, timeout_s) from exc
            stream_error = str(_transport_error(exc, self._client.settings, timeout_s))
        if not self._assembler.got_data:
            raise ModelError(_empty_stream_message(bytes(head)), status=response.status_code)
        self._completion = self._assembler.result(stream_error=stream_error)

    def _decode(self, items: list[Any]) -> list[Event]:
        events: list[Event] = []
        for item in items:
            if isinstance(item, SseComment):
                events.append(KeepAlive())
            elif not self._assembler.ended:
                events += self._assembler.feed_data(item.data, item.event)
        return events

    async def _answer(self, response: httpx.Response, timeout_s: float) -> list[Event]:
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self._client.settings, timeout_s) from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise ModelError(
                f"the model server answered with invalid JSON: {raw[:200]!r}", status=200
            ) from exc
        return self._assembler.feed_message(answer)


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    """`message` as sent: an assistant message's null `content` left out (module docstring)."""
    if message.get("role") == "assistant" and "content" in message and message["content"] is None:
        return {key: value for key, value in message.items() if key != "content"}
    return message


async def _read_error_body(response: httpx.Response) -> str:
    """The text of a non-2xx response's body (at most `_ERROR_BODY_LIMIT` bytes)."""
    raw = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            raw += chunk
            if len(raw) >= _ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        pass  # a torn error body still has a status worth reporting
    return bytes(raw[:_ERROR_BODY_LIMIT]).decode("utf-8", errors="replace")


def _error_detail(text: str) -> str:
    """The message of an error body: OpenAI/Gemini JSON error shapes, else the text itself."""
    text = text.strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return error_message(parsed) or text[:500] or "(empty body)"


def _status_error(status: int, detail: str, settings: ClientSettings, attempts: int) -> ModelError:
    url = settings.base_url
    if status == 401:
        hint = "" if settings.api_key else "; no API key was sent"
        text = f"the model server at {url} refused the API key (HTTP 401{hint}): {detail}"
    elif status == 403:
        text = f"the API key may not use model {settings.model!r} at {url} (HTTP 403): {detail}"
    elif status == 404 and ("model" in detail.lower() or settings.model in detail):
        text = f"unknown model {settings.model!r} at {url} (HTTP 404): {detail}"
    elif status == 404:
        text = f"wrong base_url {url!r}: {url}/chat/completions not found (HTTP 404): {detail}"
    elif status in RETRYABLE_STATUSES:
        what = "is rate limiting" if status == 429 else "is unavailable"
        tries = f"{attempts} attempt" + ("s" if attempts != 1 else "")
        text = f"the model server at {url} {what} (HTTP {status}, {tries}): {detail}"
    else:
        text = f"the model server at {url} answered HTTP {status}: {detail}"
    return ModelError(text, status=status, retryable=status in RETRYABLE_STATUSES)


def _transport_error(
    exc: httpx.HTTPError | httpx.InvalidURL, settings: ClientSettings, read_timeout_s: float
) -> ModelError:
    url = settings.base_url
    if isinstance(exc, httpx.ConnectTimeout):
        text = f"no connection to the model server at {url} within {settings.connect_timeout_s} s"
    elif isinstance(exc, httpx.PoolTimeout):
        text = f"no free connection to {url} within {settings.connect_timeout_s} s"
    elif isinstance(exc, httpx.ReadTimeout):
        text = f"the model server at {url} sent nothing for {read_timeout_s} s"
    elif isinstance(exc, httpx.ConnectError):
        text = f"cannot connect to the model server at {url}: {exc}"
    elif isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        text = f"invalid base_url {url!r}: {exc}"
    elif isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        text = f"the model server at {url} closed the connection before the answer was complete"
    else:
        text = f"talking to the model server at {url} failed: {type(exc).__name__}: {exc}"
    retryable = isinstance(exc, httpx.TimeoutException | httpx.NetworkError)
    return ModelError(text, retryable=retryable)


def _empty_stream_message(head: bytes) -> str:
    text = "the model server sent an empty stream (HTTP 200 with no events)"
    if head.strip():
        text += f"; it began with {head.decode('utf-8', errors='replace')!r}"
    return text
