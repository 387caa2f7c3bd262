"""OSC 7501 program status: the node tells its terminal whether it is working,
waiting for the person's approval, or done (issue 34), pure.

The Program Status Protocol (OSC 7501, revision 0.2 of October 2026; libghostty
and Rex read it, and Claude Code, Codex, Terraform and Homebrew have emitters): a
program writes `ESC ] 7501 ; PAIRS ESC \\`, PAIRS being `key=value` joined by `:`.
`state` is required (`idle`, `working`, `done`, `blocked`, `error`, `clear`);
`kind` (`permission`, `question`, `auth`) goes with `blocked`; `app` names the
program; `msg` is one line of UTF-8 text in base64 (at most 2,048 bytes decoded).
Each report replaces the last whole; `clear` without an `id` removes every record.
A terminal that does not know the number consumes the sequence and shows nothing,
so the node reports without first querying for support (`OSC 7501 ; ? ST`);
`GBR_PROGRAM_STATUS=0` turns it off (`repl.app.open_screen`).

The node's states: `working` from the moment a turn starts until it ends,
`blocked` (kind `permission`) while an approval this session's agent asked for
waits (it outranks `working`: the agent goes on, but the person is needed),
`done` once a turn has ended, and `clear` when the session closes with a
`working` or `blocked` record standing.
"""

from __future__ import annotations

import base64

APP = "gbr-node"
MSG_MAX_BYTES = 2048
"""The protocol's bound on `msg` once decoded (bytes)."""
STATES = ("working", "blocked", "done", "clear")


def report(state: str, *, kind: str | None = None, msg: str = "") -> str:
    """The OSC 7501 sequence for `state`, e.g. `"\\x1b]7501;state=done:app=gbr-node\\x1b\\\\"`.

    Args:
        state: one of `STATES`.
        kind: with `blocked` only: `"permission"`, `"question"` or `"auth"`.
        msg: one line for the terminal to show; control characters become spaces and
            it is cut to `MSG_MAX_BYTES` (on a character boundary) before base64.

    Raises:
        ValueError: `state` is not one of `STATES`, or `kind` is given without `blocked`.
    """
    if state not in STATES:
        raise ValueError(f"state: {state!r} is not one of {', '.join(STATES)}")
    if kind is not None and state != "blocked":
        raise ValueError(f"kind: only with state 'blocked', not {state!r}")
    pairs = [f"state={state}"] + ([f"kind={kind}"] if kind else [])
    if state != "clear":
        pairs.append(f"app={APP}")
    text = "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in msg).strip()
    data = text.encode("utf-8")[:MSG_MAX_BYTES].decode("utf-8", "ignore").encode("utf-8")
    if data:
        pairs.append("msg=" + base64.b64encode(data).decode("ascii"))
    return "\x1b]7501;" + ":".join(pairs) + "\x1b\\"
