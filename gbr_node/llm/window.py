"""The model's context window, pure: what servers report and how they say it is full.

GBR-CTX-01. The node learns the window from, in order: the profile's
`[model] context_tokens`; the server's own report, read from the JSON of
- llama.cpp's `GET /props` (`default_generation_settings.n_ctx`, or `n_ctx`),
- `GET /v1/models`: vLLM's `max_model_len`, llama.cpp's `meta.n_ctx`, the
  `context_length` / `context_window` fields of OpenRouter, LM Studio and
  others (for the configured model id, else the only model listed),
- Ollama's `POST /api/show`: a `num_ctx` in its `parameters`, else Ollama's
  own default (`OLLAMA_DEFAULT_NUM_CTX`), never the model's trained length,
  which Ollama does not allocate unless told to;
else `DEFAULT_CONTEXT_TOKENS`, a conservative size, never "unlimited".

`is_context_overflow` recognises a server's answer that the request did not
fit (OpenAI and vLLM `context_length_exceeded` / "maximum context length",
llama.cpp `exceed_context_size_error`, Gemini's "input token count ...
exceeds", Anthropic-style "prompt is too long"); `reported_limit` reads the
limit such an answer states, when it states one.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

DEFAULT_CONTEXT_TOKENS = 8192
"""Used when neither the profile nor the server says: small enough for most local servers."""
OLLAMA_DEFAULT_NUM_CTX = 4096
"""What Ollama allocates for a model whose Modelfile sets no num_ctx."""

_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|exceed_context_size"
    r"|exceeds? the (available )?context|context (window|length|size) (is )?(exceeded|full)"
    r"|prompt is too long|input is too long|too many (input )?tokens"
    r"|input token count .* exceeds|reduce the length of the messages",
    re.IGNORECASE | re.DOTALL,
)
_LIMIT = re.compile(
    r"(?:maximum context length is|context (?:length|size|window) (?:is|of)"
    r"|n_ctx\"?:?\s*)\s*(\d{3,7})",
    re.IGNORECASE,
)


def is_context_overflow(status: int | None, body: str) -> bool:
    """True when an error answer (`status`, raw `body` text) says the request did not fit."""
    return status in (400, 413, 422, 500) and bool(_OVERFLOW.search(body))


def reported_limit(body: str) -> int | None:
    """The context size (tokens) an overflow answer states, e.g. "maximum context length
    is 4096 tokens" or llama.cpp's `"n_ctx": 4096`; None when it states none."""
    match = _LIMIT.search(body)
    return int(match.group(1)) if match else None


def from_llama_props(props: Any) -> int | None:
    """n_ctx from llama.cpp's `/props` JSON, or None."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    for source in (settings, props):
        if isinstance(source, dict) and _positive(source.get("n_ctx")):
            return int(source["n_ctx"])
    return None


def from_model_list(listing: Any, model: str) -> int | None:
    """The context size a `/v1/models` JSON gives for `model` (or its only entry), or None."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    entries = [item for item in data if isinstance(item, dict)]
    chosen = [item for item in entries if item.get("id") == model] or (
        entries if len(entries) == 1 else []
    )
    for item in chosen:
        meta: dict[str, Any] = item["meta"] if isinstance(item.get("meta"), dict) else {}
        for value in (
            item.get("max_model_len"),
            meta.get("n_ctx"),
            item.get("context_length"),
            item.get("context_window"),
            item.get("max_context_length"),
        ):
            if _positive(value):
                return int(value)
    return None


def from_ollama_show(show: Any) -> int | None:
    """The num_ctx Ollama runs a model with, from its `/api/show` JSON; None if not Ollama's.

    `parameters` is Ollama's Modelfile text (`num_ctx 8192` lines); without a
    num_ctx there Ollama uses its default, not the trained length in `model_info`.
    """
    if not isinstance(show, dict) or "model_info" not in show:
        return None
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(show.get("parameters") or ""), re.MULTILINE)
    return int(match.group(1)) if match else OLLAMA_DEFAULT_NUM_CTX


def _positive(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
