"""Settings of the model client and its retry rule. Pure (no I/O).

`ClientSettings` says how to reach one OpenAI-compatible endpoint;
`retry_wait_s` says how long to wait before retrying a 429/502/503/504
(RFC 9110 section 10.2.3 for Retry-After; `retry-after-ms` as OpenAI and
Azure send it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from gbr_node.config.profile import ModelConfig
from gbr_node.llm.grammar import Workspace

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one OpenAI-compatible endpoint. Times in seconds.

    `api_key` is the key itself (the caller reads it from the environment
    variable the profile names), or None to send no Authorization header.
    `headers` are extra request headers (they may override the defaults).
    `idle_timeout_s` is the longest wait between two received bytes of a
    streamed answer (SSE keep-alive comments reset it); `request_timeout_s`
    the same for non-streamed answers, which only arrive when complete.
    `tool_grammar`: constrain each answer that offers tools with a GBNF grammar
    (`llm.grammar`; llama.cpp's server only) and read the calls from its text:
    the node sets it for the embedded model, never a profile.
    `grammar_workspace`: with `tool_grammar`, called before each such request
    for what the project holds (`llm.grammar.Workspace`, or None when the
    paths stay free), so calls name files that exist.
    Raises ValueError naming the field when a value is out of range.
    """

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    stream_tools: bool = True
    include_usage: bool = True
    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 60.0
    request_timeout_s: float = 300.0
    max_retries: int = 2
    backoff_base_s: float = 0.5
    retry_wait_cap_s: float = 30.0
    max_connections: int = 8
    tool_grammar: bool = False
    grammar_workspace: Callable[[], Workspace | None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty model name")
        for name in (
            "connect_timeout_s",
            "idle_timeout_s",
            "request_timeout_s",
            "retry_wait_cap_s",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if self.max_retries < 0 or self.backoff_base_s < 0 or self.max_connections < 1:
            raise ValueError("max_retries and backoff_base_s must be >= 0, max_connections >= 1")

    @classmethod
    def from_model_config(cls, config: ModelConfig, *, api_key: str | None) -> ClientSettings:
        """Settings from a profile's `[model]` table; ValueError names a missing base_url/model."""
        if not config.base_url or not config.model:
            missing = "base_url" if not config.base_url else "model"
            raise ValueError(f"[model] {missing} is not set")
        return cls(
            base_url=config.base_url,
            model=config.model,
            api_key=api_key,
            temperature=config.temperature,
            headers=dict(config.headers),
            stream_tools=config.stream_tools,
        )


def retry_wait_s(
    headers: Mapping[str, str], attempt: int, settings: ClientSettings, now: datetime | None = None
) -> float | None:
    """Seconds to wait before retry number `attempt + 1`, or None when the server asks too long.

    Order: `retry-after-ms` (milliseconds, OpenAI/Azure), `Retry-After`
    (seconds or an HTTP date, RFC 9110), else exponential backoff capped at
    `retry_wait_cap_s`. `headers` keys are matched case-insensitively.
    """
    lower = {key.lower(): value for key, value in headers.items()}
    asked: float | None = None
    try:
        if "retry-after-ms" in lower:
            asked = float(lower["retry-after-ms"]) / 1000
        elif "retry-after" in lower:
            value = lower["retry-after"].strip()
            try:
                asked = float(value)
            except ValueError:
                when = parsedate_to_datetime(value)
                asked = (when - (now or datetime.now(timezone.utc))).total_seconds()
    except (ValueError, TypeError):
        asked = None  # unreadable header: fall back to backoff
    if asked is None:
        return min(settings.retry_wait_cap_s, settings.backoff_base_s * 2.0**attempt)
    asked = max(0.0, asked)
    return asked if asked <= settings.retry_wait_cap_s else None
