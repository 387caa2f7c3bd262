"""How library hits read, pure: one line per hit for people and models, the
context block added before the first inference, and its status line (issue 18).

    class httpx.Timeout(timeout=..., *, connect=None, ...)  httpx/_config.py:72  httpx==0.28.1
        Timeout configuration.
"""

from __future__ import annotations

from collections.abc import Sequence

from gbr_node.library.hit import Hit

MAX_LINE_SIGNATURE = 160
CHARS_PER_TOKEN = 4
"""A rough token count for budgets: English text and code run 3-4 characters a token."""


def hit_line(hit: Hit) -> str:
    """`kind qualname(signature)  file:line  dist==version` on one line."""
    signature = hit.signature
    if len(signature) > MAX_LINE_SIGNATURE:
        signature = signature[: MAX_LINE_SIGNATURE - 1] + "…"
    bases = f" [bases: {hit.bases}]" if hit.bases else ""
    kind = "" if hit.kind in ("function", "method") else f"{hit.kind} "
    return f"{kind}{hit.qualname}{signature}{bases}  {hit.file}:{hit.line}  {hit.dist_version}"


def hit_text(hit: Hit) -> str:
    """`hit_line`, and the docstring's first paragraph indented below it when there is one."""
    return hit_line(hit) + (f"\n    {hit.doc}" if hit.doc else "")


def hits_text(hits: Sequence[Hit]) -> str:
    """Hits one after the other (`hit_text`), or a line saying there are none."""
    return "\n".join(hit_text(h) for h in hits) if hits else "no matching definitions"


def miss_line(name: str, where: str) -> str:
    """The first line of an answer for a name nothing defines (issue 33):
    `no definition named fetch_json in httpx==0.28.1`."""
    return f"no definition named {name} in {where}"


def answer_text(hits: Sequence[Hit], misses: Sequence[tuple[str, str]] = ()) -> str:
    """`hits_text`, after one `miss_line` per `(name, where)` of `misses`; then
    the hits are the nearest names, each marked as not matching."""
    if not misses:
        return hits_text(hits)
    lines = [miss_line(name, where) for name, where in misses]
    if not hits:
        return "\n".join([*lines, "no close names either"])
    wanted = ", ".join(name for name, _ in misses)
    lines.append(f"nearest names (none of them is {wanted}):")
    lines += [hit_line(h) + "  (not matching)" + (f"\n    {h.doc}" if h.doc else "") for h in hits]
    return "\n".join(lines)


def where(hits: Sequence[Hit]) -> str:
    """`httpx==0.28.1`, or `httpx==0.28.1, trio==0.35.0` for hits from several."""
    return ", ".join(dict.fromkeys(h.dist_version for h in hits))


def status_line(hits: Sequence[Hit]) -> str:
    """The one line shown when hits are added to a request: `library: 5 hits in httpx==0.28.1`."""
    noun = "hit" if len(hits) == 1 else "hits"
    return f"library: {len(hits)} {noun} in {where(hits)}"


LOOKUP_HEAD = "[Library lookup by gbr-node for the message below:"
LOOKUP_TAIL = "[End of library lookup.]"


def context_block(hits: Sequence[Hit], max_tokens: int) -> tuple[str, list[Hit]]:
    """The text put before the person's message, at most `max_tokens` (estimated
    at CHARS_PER_TOKEN characters a token), and the hits that fit in it.
    Returns ("", []) when not even one hit fits."""
    head = (
        f"{LOOKUP_HEAD} definitions found in the "
        "installed source (file:line, dist==version). Trust them over memory; "
        "read_library shows a definition's code.]"
    )
    tail = LOOKUP_TAIL
    budget = max_tokens * CHARS_PER_TOKEN - len(head) - len(tail) - 2
    kept: list[Hit] = []
    lines: list[str] = []
    for hit in hits:
        text = hit_text(hit)
        if len(text) + 1 > budget:
            break
        budget -= len(text) + 1
        kept.append(hit)
        lines.append(text)
    if not kept:
        return "", []
    return "\n".join([head, *lines, tail]), kept
