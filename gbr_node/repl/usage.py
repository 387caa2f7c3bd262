"""Token usage per turn and per session, pure: the agent's `Show` actions in, lines out.

Counts come from the server's `usage` object of each inference
(`prompt_tokens`, `completion_tokens`, as OpenAI-compatible servers send it
when asked with `stream_options.include_usage`); a server that sends none
leaves the turn's tokens unknown, never guessed. Time runs from the first
inference of a turn to its end, in seconds. Cost is priced in US dollars
per million tokens, from the profile's `[model] input_price_per_mtok` /
`output_price_per_mtok`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gbr_node.agent.machine import Show


@dataclass
class Tally:
    """Counts over some span: tokens in (prompt) and out (completion), inferences
    that reported usage, all inferences, tool calls, seconds, turns."""

    tokens_in: int = 0
    tokens_out: int = 0
    reported: int = 0
    inferences: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    turns: int = 0
    streamed: bool = False

    def add_usage(self, usage: dict[str, Any] | None) -> None:
        """Count one inference and the server's `usage` object for it (None: not reported)."""
        self.inferences += 1
        if not isinstance(usage, dict):
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) or isinstance(completion, int):
            self.reported += 1
            self.tokens_in += prompt if isinstance(prompt, int) else 0
            self.tokens_out += completion if isinstance(completion, int) else 0

    def merge(self, other: Tally) -> None:
        """Add `other`'s counts to these."""
        for name in ("tokens_in", "tokens_out", "reported", "inferences", "tool_calls", "turns"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds

    def tokens(self) -> str:
        """`1,234 tokens in · 56 out`, or "" when no inference reported usage."""
        if not self.reported:
            return ""
        partial = " (some not reported)" if self.reported < self.inferences else ""
        return f"{self.tokens_in:,} tokens in · {self.tokens_out:,} out{partial}"


@dataclass
class UsageMeter:
    """Follows the agent's `Show` actions: the running turn and the session's totals."""

    session: Tally = field(default_factory=Tally)
    turn: Tally | None = None
    _started: float = 0.0

    def observe(self, show: Show, now: float) -> str | None:
        """Account for `show` (at monotonic time `now`, seconds); at the end of a
        turn, return its summary line (else None)."""
        if show.kind == "waiting" and self.turn is None:
            self.turn, self._started = Tally(turns=1), now
        elif self.turn is None:
            return None
        if show.kind in ("text", "reasoning"):
            self.turn.streamed = True
        elif show.kind == "usage":
            self.turn.add_usage(show.data.get("usage"))
        elif show.kind == "tool_start":
            self.turn.tool_calls += 1
        elif show.kind == "turn_end":
            turn, self.turn = self.turn, None
            turn.seconds = now - self._started
            self.session.merge(turn)
            return turn_summary(turn)
        return None


def turn_summary(turn: Tally) -> str:
    """`1,234 tokens in · 56 out · 3.4 s · 2 tool calls`; "" for a turn in which
    nothing was streamed, counted or called (it failed at once: its error says it)."""
    if not (turn.streamed or turn.reported or turn.tool_calls):
        return ""
    calls = f"{turn.tool_calls} tool call{'s' if turn.tool_calls != 1 else ''}"
    parts = [turn.tokens(), f"{turn.seconds:.1f} s", calls if turn.tool_calls else ""]
    return " · ".join(p for p in parts if p)


def session_report(
    session: Tally, model: str | None, prices: tuple[float | None, float | None]
) -> str:
    """`/usage`: the session's totals and, when the profile prices `model`, the cost."""
    lines = [
        f"this session: {session.turns} turn{'s' if session.turns != 1 else ''}, "
        f"{session.inferences} model request{'s' if session.inferences != 1 else ''}, "
        f"{session.tool_calls} tool call{'s' if session.tool_calls != 1 else ''}, "
        f"{session.seconds:.1f} s",
        f"  {session.tokens() or 'tokens: the server reported none'}",
    ]
    price_in, price_out = prices
    if price_in is None and price_out is None:
        lines.append(
            "  cost: no prices in the profile ([model] input_price_per_mtok, "
            "output_price_per_mtok: US$ per million tokens)"
        )
    elif session.reported:
        cost = (session.tokens_in * (price_in or 0) + session.tokens_out * (price_out or 0)) / 1e6
        rate = f"{price_in or 0:g} in / {price_out or 0:g} out per million tokens"
        lines.append(f"  cost: {_dollars(cost)} ({model or 'the model'} at ${rate})")
    return "\n".join(lines)


def _dollars(amount: float) -> str:
    """`$0.0400`; two significant digits below a cent (`$0.000045`)."""
    return f"${amount:.4f}" if amount >= 0.01 or amount == 0 else f"${amount:.2g}"
