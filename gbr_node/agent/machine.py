"""The agent's state machine, pure: a message in, a list of actions out.

States and the transitions each message causes live in `_TRANSITIONS`
(STYLE.md "State machines as tables"). The machine never awaits anything: it
decides, and `agent.runtime` does the I/O (starts inferences, runs tools,
renders). An unexpected message in a state raises `UnexpectedMessage`.

ADR-0012b: every inference has its own prompt id; chunks, completions and
tool feedback of any other id are stale and become a `Stale` action, never
part of the current turn. ADR-0010: `Interrupt` / `InterruptAndSuggest` cut
the current inference, keep the partial answer marked interrupted, answer
unfinished tool calls with a synthetic result, and (with a suggestion)
prompt again at once. Tools already running are not stopped: their late
results are stale, recorded in the session marked `stale` (seen in
`/history`, never sent to the model). `/s TEXT` while idle has nothing to
cut and is a plain prompt; Ctrl-C while idle does nothing.

GBR-CTX-01: every request goes through `agent.context` (compaction, with one
line for the person); a server answer that the request did not fit gets one
compaction and one retry. Runaway turns: the same call (tool and arguments)
getting the same result `RUNAWAY_REPEATS` times (an error, or a success of a
tool that changes no file) ends the turn, with a note to the model and one
line to the person (a tiny model also loops on a search that succeeds);
within one answer, a call
repeated with the same arguments, and calls past `MAX_CALLS_PER_ANSWER`,
are answered "not run" instead of being run.

UNW-AI-01 / STD-DEV-01 (write checks): before an answer's calls that change
files a check covers run, the turn's baseline of those files is taken once
(`TakeBaseline`; the calls wait for it). Once every call has its result,
the machine goes to CHECKING (`RunCheck`) instead of prompting again. The
`CheckDone` verdicts count only errors the turn added: new errors go to the
model as a note on the changing call's result and the model is prompted
again, while that check set has retries left (`max_retries` per turn); the
person sees one status line per check (`Show("check")`). A check still
failing after its retries ends the turn and says so. `/s` and Ctrl-C during
a check cancel it (`CancelCheck`: its processes are killed).
"""

from __future__ import annotations

import enum
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gbr_node.agent.context import ContextManager
from gbr_node.agent.messages import (
    ApprovalResolved,
    CheckDone,
    CompactContext,
    DirectPrompt,
    Interrupt,
    InterruptAndSuggest,
    OracleChunk,
    OracleDone,
    OracleFailed,
    ToolExecutionFeedback,
    UpdateEnv,
    UserPrompt,
)
from gbr_node.agent.retries import CheckRetries
from gbr_node.agent.session import INTERRUPTED_MARK, Session
from gbr_node.checks.builtin import BUILTIN_MAX_RETRIES
from gbr_node.checks.plan import CheckSpec, CheckTarget, targets
from gbr_node.errors import GbrError
from gbr_node.llm.events import InvalidToolCall, ToolCall
from gbr_node.llm.grammar import seen_in_turn

DEFAULT_MAX_STEPS = 25
SMALL_MODEL_MAX_STEPS = 8  # embedded model or a window of at most 8192 tokens
RUNAWAY_REPEATS = 3
CUT_REASONS = {
    "length": "answer cut at the model's token limit (max_tokens)",
    "content_filter": "answer cut by the model server's content filter",
}
"""What the turn's end says of an answer cut short, by its `finish_reason` (GBR-TRUTH-01)."""
MAX_CALLS_PER_ANSWER = 16  # more in one answer are answered "not run" (tiny models repeat)
CHANGING_TOOLS = {"write_file": "path", "edit_file": "path", "delete_path": "path"}
MOVING_TOOLS = {"move_path": ("source", "destination")}
SUGGESTION_PREFIX = "[I interrupted your previous answer.] "


class State(enum.Enum):
    IDLE = "idle"
    STREAMING = "streaming"
    AWAITING_TOOLS = "awaiting_tools"
    CHECKING = "checking"


class UnexpectedMessage(GbrError):
    """A message arrived in a state where it has no meaning (a bug, not a user error)."""


@dataclass(frozen=True)
class StartInference:
    """Run `prompt` on the oracle."""

    prompt: DirectPrompt


@dataclass(frozen=True)
class CancelInference:
    """Cancel the inference `prompt_id` now (the HTTP stream is closed)."""

    prompt_id: int


@dataclass(frozen=True)
class RunTool:
    """Run one tool call; its outcome comes back as `ToolExecutionFeedback(prompt_id, ...)`."""

    prompt_id: int
    call: ToolCall
    turn: int = 0
    """The turn the call belongs to: its changes are checkpointed under it (GBR-UNDO-01)."""
    seen: frozenset[str] = frozenset()
    """The paths read or written in the turn before this answer (`tools.base.SEEN`)."""


@dataclass(frozen=True)
class TakeBaseline:
    """Before running inference `prompt_id`'s tool calls, run the checks `targets` on
    the files as they are now: turn `turn`'s baseline (errors in it never block)."""

    prompt_id: int
    turn: int
    targets: tuple[CheckTarget, ...]


@dataclass(frozen=True)
class RunCheck:
    """Run the checks `targets` and judge them against turn `turn`'s baseline; the
    verdicts come back as `CheckDone(prompt_id, ...)`."""

    prompt_id: int
    turn: int
    targets: tuple[CheckTarget, ...]


@dataclass(frozen=True)
class CancelCheck:
    """Stop the checks (baseline or after-write) of inference `prompt_id` now: their
    processes are killed."""

    prompt_id: int


@dataclass(frozen=True)
class Show:
    """Something for the person to see. `kind`: prompt (a message of the person's
    starts a turn), waiting (an inference starts), text, reasoning, usage (an
    inference ended; `data["usage"]` is the server's usage object or None),
    tool_start, tool_end, check, notice, error, queued, stale, turn_end. `turn`: for a
    turn_end, the number of the turn that ended (not compared: a label)."""

    kind: str
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    turn: int | None = field(default=None, compare=False)


Action = StartInference | CancelInference | RunTool | TakeBaseline | RunCheck | CancelCheck | Show


class AgentMachine:
    """The agent's decisions (ADR-0012b, ADR-0010).

    Args:
        session: the history this machine appends to.
        tools: returns the tool specs (chat-completions `tools` entries) to
            offer in the next inference; called once per inference.
        max_steps: inferences per turn before tool calls stop being run
            (`max_steps` may be changed later, e.g. on a profile reload).
        context: fits each request to the model's window (GBR-CTX-01).
        checks: returns the profile's check sets now (UNW-AI-01); none by default.
    """

    def __init__(
        self,
        session: Session,
        tools: Callable[[], list[dict[str, Any]]],
        max_steps: int = DEFAULT_MAX_STEPS,
        context: ContextManager | None = None,
        checks: Callable[[], Sequence[CheckSpec]] = tuple,
    ) -> None:
        self.session = session
        self.state = State.IDLE
        self.queued: list[UserPrompt] = []
        self.max_steps = max_steps
        self.context = context or ContextManager()
        self._tools = tools
        self._next_id = 1
        self._prompt_id: int | None = None
        self._partial: list[str] = []
        self._steps = 0
        self._calls: list[ToolCall | InvalidToolCall] = []
        self._results: dict[str, ToolExecutionFeedback] = {}
        self._raw_estimate = 0
        self._overflow_retried = False
        self._repeats: Counter[tuple[str, str, str]] = Counter()
        self._checks = checks
        self._turn = 0
        self._retries = CheckRetries()  # per check set, and the baselines, this turn
        self._held: list[tuple[ToolExecutionFeedback, ToolCall | InvalidToolCall, str]] = []
        self._cancel_checks = False  # a baseline or check of this inference may run

    @property
    def prompt_id(self) -> int | None:
        """Id of the inference the current turn is on, or None when idle."""
        return self._prompt_id

    def handle(self, msg: object) -> list[Action]:
        """Apply one inbox message; return the actions to carry out, in order.

        Raises UnexpectedMessage when `msg` has no meaning in the current state.
        """
        pid = getattr(msg, "prompt_id", None)
        if pid is not None and pid != self._prompt_id:
            return self._on_stale(msg)
        handler = _TRANSITIONS.get((self.state, type(msg))) or _ANY_STATE.get(type(msg))
        if handler is None:
            raise UnexpectedMessage(f"{type(msg).__name__} in state {self.state.value}")
        return handler(self, msg)

    def _current_prompt(self) -> int:
        """The id of the turn's inference; only called inside a turn (raises
        UnexpectedMessage otherwise: a transition reached out of its state)."""
        if self._prompt_id is None:
            raise UnexpectedMessage(f"no inference in progress in state {self.state.value}")
        return self._prompt_id

    # -- transitions -------------------------------------------------------

    def _on_prompt(self, msg: UserPrompt) -> list[Action]:
        meta: dict[str, Any] = {"decided": int(m)} if (m := _decided_id(msg.text)) else {}
        if msg.context:  # what the person typed, apart from what the node added
            meta["typed"] = msg.text
        self.session.append({"role": "user", "content": msg.content}, **meta)
        self._new_turn()
        return [Show("prompt", msg.text), *self._start()]

    def _on_approval_resolved(self, msg: ApprovalResolved) -> list[Action]:
        # The call was answered "pending" long ago: the outcome is news for the
        # model, sent like a prompt (now when idle, queued otherwise) (EVD-AI-01).
        prompt = UserPrompt(f"{APPROVAL_DECIDED.format(msg.approval_id)} {msg.text}")
        return self._on_prompt(prompt) if self.state is State.IDLE else self._on_queue(prompt)

    def _on_queue(self, msg: UserPrompt) -> list[Action]:
        self.queued.append(msg)
        return [Show("queued", msg.text, {"position": len(self.queued)})]

    def _on_compact(self, msg: CompactContext) -> list[Action]:
        prepared = self.context.prepare(self.session, self._tools(), mode="manual")
        return [Show("notice", prepared.notice or "nothing to compact")]

    def _on_chunk(self, msg: OracleChunk) -> list[Action]:
        if msg.kind == "text":
            self._partial.append(msg.text)
        return [Show(msg.kind, msg.text)]

    def _on_done(self, msg: OracleDone) -> list[Action]:
        calls = list(msg.tool_calls)
        usage = Show("usage", data={"usage": msg.usage})
        if not calls and not msg.text:
            # Nothing to keep: an assistant message with neither text nor tool
            # calls is refused by strict servers. Say so instead of going silent.
            notice = Show(
                "notice", f"(the model gave an empty answer; finish: {msg.finish_reason})"
            )
            return [usage, notice, *self._end_turn()]
        if msg.usage:
            self.context.observe(self._raw_estimate, msg.usage.get("prompt_tokens"))
        self._overflow_retried = False
        turn_seen = seen_in_turn([entry.message for entry in self.session.entries])
        message: dict[str, Any] = {"role": "assistant", "content": msg.text or None}
        if calls:
            message["tool_calls"] = [_wire_call(c) for c in calls]
        self.session.append(message, finish_reason=msg.finish_reason, usage=msg.usage)
        if not calls:
            cut = CUT_REASONS.get(msg.finish_reason or "")
            return [usage, *self._end_turn(cut=cut)]
        self.state = State.AWAITING_TOOLS
        self._calls, self._results = calls, {}
        actions: list[Action] = [usage]
        baseline: list[CheckTarget] = []
        seen: set[tuple[str, str]] = set()
        for position, call in enumerate(calls):
            key = (call.name, _arguments_key(call))
            repeated = key in seen
            seen.add(key)
            if isinstance(call, InvalidToolCall) or repeated or position >= MAX_CALLS_PER_ANSWER:
                if isinstance(call, InvalidToolCall):
                    why = call.reason
                elif repeated:
                    why = "the same call (tool and arguments) comes earlier in this answer"
                else:
                    why = f"at most {MAX_CALLS_PER_ANSWER} tool calls are run per answer"
                feedback = ToolExecutionFeedback(
                    msg.prompt_id, call.id, call.name, error=f"not run: {why}"
                )
                self._results[call.id] = feedback
                if not repeated and position < MAX_CALLS_PER_ANSWER:
                    actions.append(Show("tool_end", call.name, {"feedback": feedback}))
            elif self._steps >= self.max_steps:
                reason = f"not run: the step limit of {self.max_steps} was reached"
                self._results[call.id] = ToolExecutionFeedback(
                    msg.prompt_id, call.id, call.name, error=reason
                )
            else:
                actions.append(Show("tool_start", call.name, {"call": call}))
                actions.append(RunTool(self._current_prompt(), call, self._turn, turn_seen))
                baseline += self._retries.needs_baseline(self._checks(), _paths_of(call))
        if baseline:
            self._cancel_checks = True
            actions.insert(0, TakeBaseline(self._current_prompt(), self._turn, tuple(baseline)))
        if self._steps >= self.max_steps:
            actions.append(Show("notice", f"stopped: {self.max_steps} steps in this turn"))
        return actions + self._maybe_continue()

    def _on_failed(self, msg: OracleFailed) -> list[Action]:
        if msg.context_exceeded and not msg.partial:
            if not self._overflow_retried:
                # One compaction and one retry (GBR-CTX-01); the retry is no new step.
                self._overflow_retried = True
                self.context.server_overflow(msg.context_limit)
                self._steps -= 1
                return self._start(mode="overflow")
            hint = (
                f"the conversation does not fit the model's context window even after "
                f"compacting ({self.context.window.tokens} tokens, from "
                f"{self.context.window.source}): /clear starts afresh; [model] "
                "context_tokens in the profile sets the size if the server's is smaller"
            )
            self._overflow_retried = False
            return [Show("error", hint)] + self._end_turn()
        if msg.partial:
            note = f"{msg.partial}\n\n[answer cut: {msg.error}]"
            self.session.append({"role": "assistant", "content": note}, error=msg.error)
        return [Show("usage", data={"usage": None}), Show("error", msg.error), *self._end_turn()]

    def _on_feedback(self, msg: ToolExecutionFeedback) -> list[Action]:
        if msg.call_id not in {c.id for c in self._calls} or msg.call_id in self._results:
            return self._on_stale(msg)
        self._results[msg.call_id] = msg
        return [Show("tool_end", msg.tool, {"feedback": msg})] + self._maybe_continue()

    def _on_stale(self, msg: object) -> list[Action]:
        if isinstance(msg, ToolExecutionFeedback):
            self.session.append(
                _tool_message(msg.call_id, msg.as_text()),
                stale=True,
                tool=msg.tool,
                peer=msg.peer,
                elapsed_s=msg.elapsed_s,
            )
        return [Show("stale", _describe_stale(msg), {"message": msg})]

    def _on_idle_suggestion(self, msg: InterruptAndSuggest) -> list[Action]:
        return self._on_prompt(UserPrompt(msg.text))

    def _on_idle_interrupt(self, msg: Interrupt) -> list[Action]:
        return []

    def _on_interrupt(self, msg: Interrupt | InterruptAndSuggest) -> list[Action]:
        actions: list[Action] = []
        if self._cancel_checks:
            actions.append(CancelCheck(self._current_prompt()))
        if self.state is State.CHECKING:
            for feedback, call, note in self._held:
                self._append_result(feedback, call, note)
            actions.append(Show("check", "check stopped (interrupted)"))
        elif self.state is State.STREAMING and self._prompt_id is not None:
            actions.append(CancelInference(self._prompt_id))
            partial = "".join(self._partial)
            if partial:
                content = f"{partial}\n\n{INTERRUPTED_MARK}"
                self.session.append({"role": "assistant", "content": content}, interrupted=True)
        elif self.state is State.AWAITING_TOOLS:
            for call in self._calls:
                if call.id in self._results:
                    self._append_result(self._results[call.id])
                else:
                    self.session.append(
                        _tool_message(call.id, "error: not awaited: the user interrupted the turn"),
                        interrupted=True,
                    )
        self._reset()
        if isinstance(msg, InterruptAndSuggest):
            ending = self._turn_end("interrupted; suggestion sent")
            self.session.append({"role": "user", "content": SUGGESTION_PREFIX + msg.text})
            self._new_turn()
            return actions + [ending, *self._start()]
        if self.queued:
            dropped = len(self.queued)
            actions.append(
                Show("notice", f"dropped {dropped} queued message(s)", {"dropped": dropped})
            )
            self.queued.clear()
        return actions + [self._turn_end("interrupted")]

    def _on_update_env(self, msg: UpdateEnv) -> list[Action]:
        self.session.replace_system(msg.system_prompt)
        return []

    # -- helpers -----------------------------------------------------------

    def _start(self, mode: str = "auto") -> list[Action]:
        self._cancel_checks = False
        prepared = self.context.prepare(self.session, self._tools(), mode)
        self._raw_estimate = prepared.raw
        self._prompt_id = self._next_id
        self._next_id += 1
        self._partial = []
        self._steps += 1
        self.state = State.STREAMING
        prompt = DirectPrompt(self._prompt_id, prepared.messages, prepared.tools)
        notice = [Show("notice", prepared.notice)] if prepared.notice else []
        return [*notice, StartInference(prompt)]

    def _maybe_continue(self) -> list[Action]:
        if len(self._results) < len(self._calls):
            return []
        runaway = None
        held = []
        changed: list[str] = []
        for call in self._calls:
            feedback = self._results[call.id]
            repeats = _count_repeat(self._repeats, call, feedback)
            note = ""
            if repeats >= RUNAWAY_REPEATS:
                runaway = (call.name, feedback.failed)
                note = _runaway_note(repeats, feedback.failed)
            held.append((feedback, call, note))
            changed += _changed_paths(call, feedback)
        parsed, exhausted = self._judge_parses(held) if runaway is None else ([], False)
        if exhausted:
            for feedback, call, note in held:
                spent = _PARSE_EXHAUSTED if _parse_breakage(feedback) else ""
                self._append_result(feedback, call, note + spent)
            return [*parsed, *self._end_turn()]
        wanted = targets(self._checks(), changed) if runaway is None else ()
        if wanted:
            self.state = State.CHECKING
            self._held = held
            self._cancel_checks = True
            return [*parsed, RunCheck(self._current_prompt(), self._turn, wanted)]
        for feedback, call, note in held:
            self._append_result(feedback, call, note)
        if runaway is not None:
            name, failed = runaway
            did = "failed" if failed else "was called"
            same = "error" if failed else "result"
            stop = f"stopped: {name} {did} {RUNAWAY_REPEATS} times with the same arguments"
            return [Show("notice", f"{stop} and {same}"), *self._end_turn()]
        return [*parsed, *self._next_step()]

    def _judge_parses(
        self, held: Sequence[tuple[ToolExecutionFeedback, ToolCall | InvalidToolCall, str]]
    ) -> tuple[list[Action], bool]:
        """The built-in parse check of this answer's writes (`CheckRetries.judge_parses`)."""
        broken = [p for f, _, _ in held if (p := _parse_breakage(f)) is not None]
        said, exhausted = self._retries.judge_parses(broken)
        return [Show("check", line) for line in said], exhausted

    def _on_check_done(self, msg: CheckDone) -> list[Action]:
        said, notes, exhausted_all = self._retries.judge_verdicts(msg.verdicts, self._checks())
        lines: list[Action] = [Show("check", line) for line in said]
        held, self._held = self._held, []
        self._cancel_checks = False
        last = max(
            (n for n, (f, c, _) in enumerate(held) if _changed_paths(c, f)), default=len(held) - 1
        )
        for position, (feedback, call, note) in enumerate(held):
            extra = "".join(f"\n{n}" for n in notes) if position == last else ""
            self._append_result(feedback, call, note + extra)
        if exhausted_all:
            return [*lines, *self._end_turn()]
        return [*lines, *self._next_step()]

    def _next_step(self) -> list[Action]:
        if self._steps >= self.max_steps:
            return self._end_turn()
        self._calls, self._results = [], {}
        return self._start()

    def _new_turn(self) -> None:
        self._steps = 0
        self._repeats.clear()
        self._turn += 1
        self._retries.clear()

    def _append_result(
        self,
        feedback: ToolExecutionFeedback,
        call: ToolCall | InvalidToolCall | None = None,
        note: str = "",
    ) -> None:
        meta = _result_meta(feedback, call)
        self.session.append(_tool_message(feedback.call_id, feedback.as_text() + note), **meta)

    def _turn_end(self, text: str = "", cut: str | None = None) -> Show:
        """The turn's last line (GBR-TRUTH-01), with its number (the runtime adds
        `data["changed"]`, the files it changed, from the checkpoints); `data["cut"]`
        says why the last answer was cut short, when it was."""
        return Show("turn_end", text, {"cut": cut} if cut else {}, turn=self._turn)

    def _end_turn(self, cut: str | None = None) -> list[Action]:
        ending = self._turn_end(cut=cut)
        self._reset()
        actions: list[Action] = [ending]
        if self.queued:
            actions += self._on_prompt(self.queued.pop(0))
        return actions

    def _reset(self) -> None:
        self.state = State.IDLE
        self._prompt_id = None
        self._partial = []
        self._calls, self._results = [], {}
        self._held = []
        self._cancel_checks = False


def _count_repeat(
    repeats: Counter[tuple[str, str, str]],
    call: ToolCall | InvalidToolCall,
    feedback: ToolExecutionFeedback,
) -> int:
    """How many times this turn (`repeats`, counted here) the same tool and arguments
    got this same result: any error, or a success of a tool that changes no file (a
    change repeated is the write checks' to judge)."""
    changed = not feedback.failed or _parse_breakage(feedback) is not None
    if changed and call.name in CHANGING_TOOLS:
        return 0
    key = (call.name, _arguments_key(call), feedback.as_text())
    repeats[key] += 1
    return repeats[key]


def _runaway_note(repeats: int, failed: bool) -> str:
    """The note on a call's result that ended the turn as a runaway."""
    if failed:
        return (
            f"\n[stopped: this same call failed {repeats} times with the same error, "
            "so the turn was ended. Do not repeat it; change the arguments or tell "
            "the person what went wrong.]"
        )
    return (
        f"\n[stopped: this same call gave this same result {repeats} times, "
        "so the turn was ended. Do not repeat it; answer from the result.]"
    )


def _result_meta(
    feedback: ToolExecutionFeedback, call: ToolCall | InvalidToolCall | None
) -> dict[str, Any]:
    """The session entry's meta of a tool result: the tool, peer and time; the approval
    it waits for, or the path it changed."""
    meta: dict[str, Any] = {
        "tool": feedback.tool,
        "peer": feedback.peer,
        "elapsed_s": feedback.elapsed_s,
    }
    result = feedback.result or {}
    structured = result.get("structuredContent") or {}
    if structured.get("status") == "pending_approval":
        meta.update(approval_id=structured.get("approval_id"), path=structured.get("path"))
    elif isinstance(call, ToolCall) and _changed_paths(call, feedback):
        key = CHANGING_TOOLS.get(call.name)
        if call.name == "move_path":
            meta["changed"] = f"{call.arguments.get('source')} -> "
            meta["changed"] += str(call.arguments.get("destination"))
        elif key and isinstance(call.arguments.get(key), str):
            meta["changed"] = call.arguments[key]
    return meta


def _paths_of(call: ToolCall | InvalidToolCall) -> list[str]:
    """The root-relative paths a local changing call names (its arguments as given)."""
    if not isinstance(call, ToolCall):
        return []
    keys = MOVING_TOOLS.get(call.name) or (
        (CHANGING_TOOLS[call.name],) if call.name in CHANGING_TOOLS else ()
    )
    found = [call.arguments.get(key) for key in keys]
    return [path.removeprefix("./") for path in found if isinstance(path, str)]


def _parse_breakage(feedback: ToolExecutionFeedback) -> dict[str, Any] | None:
    """The `structured["parse"]` of a local write's result that left a file unparsable
    (`checks.builtin.Breakage.summary`), else None."""
    result = feedback.result or {}
    parse = (result.get("structuredContent") or {}).get("parse")
    if feedback.peer is None and isinstance(parse, dict) and parse.get("status") == "broken":
        return parse
    return None


_PARSE_EXHAUSTED = (
    f"\n[the file still does not parse after {BUILTIN_MAX_RETRIES} retries: the turn was "
    "stopped. Do not try again unasked; tell the person what is wrong.]"
)


def _changed_paths(call: ToolCall | InvalidToolCall, feedback: ToolExecutionFeedback) -> list[str]:
    """The paths a local changing call changed: none when it failed (except a write that
    left its file unparsable: it was written) or waits for approval."""
    result = feedback.result or {}
    if feedback.peer is not None or feedback.error:
        return []
    if result.get("isError") and _parse_breakage(feedback) is None:
        return []
    if (result.get("structuredContent") or {}).get("status") in (
        "pending_approval",
        "approval_required",
    ):
        return []
    return _paths_of(call)


def _wire_call(call: ToolCall | InvalidToolCall) -> dict[str, Any]:
    if isinstance(call, ToolCall):
        return call.to_message()
    # An invalid call keeps its place in history with empty arguments, so the
    # request stays valid; its tool message tells the model what was wrong.
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": "{}"},
    }


APPROVAL_DECIDED = "[approval #{} decided]"


def _arguments_key(call: ToolCall | InvalidToolCall) -> str:
    """A call's arguments in one canonical text (key order does not matter)."""
    if isinstance(call, ToolCall):
        return json.dumps(call.arguments, sort_keys=True)
    return call.raw_arguments


def _decided_id(text: str) -> str | None:
    """The approval number of an `[approval #N decided]` message, else None."""
    head, sep, _ = text.partition(" decided]")
    number = head.removeprefix("[approval #")
    return number if sep and head.startswith("[approval #") and number.isdigit() else None


def _tool_message(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _describe_stale(msg: object) -> str:
    if isinstance(msg, ToolExecutionFeedback):
        outcome = "error" if msg.failed else "ok"
        where = "in /history, not sent to the model"
        return f"late result of an interrupted turn: {msg.tool} {outcome} ({where})"
    return f"late {type(msg).__name__} of an interrupted turn (ignored)"


_TRANSITIONS: dict[tuple[State, type], Callable[[AgentMachine, Any], list[Action]]] = {
    (State.IDLE, UserPrompt): AgentMachine._on_prompt,
    (State.IDLE, ApprovalResolved): AgentMachine._on_approval_resolved,
    (State.STREAMING, ApprovalResolved): AgentMachine._on_approval_resolved,
    (State.AWAITING_TOOLS, ApprovalResolved): AgentMachine._on_approval_resolved,
    (State.STREAMING, UserPrompt): AgentMachine._on_queue,
    (State.AWAITING_TOOLS, UserPrompt): AgentMachine._on_queue,
    (State.STREAMING, OracleChunk): AgentMachine._on_chunk,
    (State.STREAMING, OracleDone): AgentMachine._on_done,
    (State.STREAMING, OracleFailed): AgentMachine._on_failed,
    (State.AWAITING_TOOLS, ToolExecutionFeedback): AgentMachine._on_feedback,
    (State.CHECKING, CheckDone): AgentMachine._on_check_done,
    (State.CHECKING, ToolExecutionFeedback): AgentMachine._on_feedback,
    (State.CHECKING, UserPrompt): AgentMachine._on_queue,
    (State.CHECKING, ApprovalResolved): AgentMachine._on_approval_resolved,
    (State.IDLE, InterruptAndSuggest): AgentMachine._on_idle_suggestion,
    (State.IDLE, Interrupt): AgentMachine._on_idle_interrupt,
}
_ANY_STATE: dict[type, Callable[[AgentMachine, Any], list[Action]]] = {
    Interrupt: AgentMachine._on_interrupt,
    InterruptAndSuggest: AgentMachine._on_interrupt,
    UpdateEnv: AgentMachine._on_update_env,
    CompactContext: AgentMachine._on_compact,
}
