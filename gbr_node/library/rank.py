"""From a question to an FTS5 query, and from its rows to ranked hits; pure (issue 18).

`plan_query` splits the question (`words.tokenize`), spots the installed
packages it names (`httpx`, `trio.to_thread.run_sync`'s `trio`) and builds the
MATCH expression: every remaining word, OR-ed together so that bm25 ranks the
rows that match more and rarer words first; the words of a name (a code-like
token, or a query of one word) also as prefixes, so a partial name matches
(`nurs`, `model_dump`). Prose words are not expanded: it costs time and
precision, and people abbreviate names, not sentences. `rerank` then puts the rows whose name is an
identifier the question spells out (`Console.print`, `model_validate`) ahead,
and the named package's rows before all others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from gbr_node.library.hit import Hit
from gbr_node.library.words import Token, normalise, terms, tokenize

EXACT_NAME_BOOST = 3.0
EXACT_PATH_BOOST = 5.0
LAST_NAME_BOOST = 1.5
KIND_BOOST = 1.5
DROPPED_CREDIT = 0.1
CLASS_WORDS = frozenset({"class", "classes", "type", "types"})
ERROR_WORDS = frozenset({"exception", "exceptions", "error", "errors", "raise", "raises"})
MIN_PREFIX_CHARS = 3


@dataclass(frozen=True)
class Plan:
    """A question made ready to run: the MATCH `expression` (None when no word
    is left), the package keys it names (`packages`, best first), the
    identifiers it spells out (as written, `httpx.get`), and the kind of
    definition it asks for ("class", "exception" or "")."""

    expression: str | None
    packages: tuple[str, ...]
    identifiers: tuple[str, ...]
    wants: str = ""
    words: tuple[str, ...] = ()
    partial: frozenset[str] = frozenset()
    dropped: tuple[str, ...] = ()

    def without(self, dropped: Iterable[str]) -> Plan:
        """This plan with the words `dropped` left out of the expression (kept
        in `dropped`, for `rerank` to credit hits that contain them)."""
        dropped = tuple(w for w in self.words if w in set(dropped))
        kept = [w for w in self.words if w not in dropped]
        return replace(self, expression=_expression(kept, self.partial), dropped=dropped)


def _package_of(token: Token, names: Mapping[str, str]) -> tuple[str | None, Token | None]:
    """(package key named by the token, what is left of the token)."""
    text = token.text
    key = names.get(text.lower()) or names.get(normalise(text))
    if key is not None:
        return key, None
    head, dot, rest = text.partition(".")
    if dot and head.lower() in names:
        return names[head.lower()], Token(rest, True)
    return None, token


def plan_query(text: str, names: Mapping[str, str], package: str | None = None) -> Plan:
    """Plan the search of `text`.

    `names` maps every lower-case way of naming an installed package (its
    normalised distribution name, its top-level import names) to its
    normalised distribution name; `package` is an explicit hint, which
    comes first.
    """
    packages: list[str] = []
    if package:
        packages.append(names.get(package.lower()) or normalise(package))
    kept: list[Token] = []
    identifiers: list[str] = []
    tokens = tokenize(text)
    for token in tokens:
        key, rest = _package_of(token, names)
        if key is not None and key not in packages:
            packages.append(key)
        if rest is not None:
            kept.append(rest)
            if token.code:
                identifiers.append(token.text)
    said = {t.text.lower() for t in tokens if not t.code}
    wants = "exception" if said & ERROR_WORDS else "class" if said & CLASS_WORDS else ""
    words = terms(kept) or [w for p in packages for w in p.split("-")]
    partial = frozenset(w for t in kept if t.code or len(kept) == 1 for w in t.words())
    return Plan(
        _expression(words, partial),
        tuple(packages),
        tuple(identifiers),
        wants,
        tuple(words),
        partial,
    )


def _expression(words: Iterable[str], partial: frozenset[str]) -> str | None:
    parts = []
    for word in words:
        quoted = f'"{word}"'
        prefix = word in partial and len(word) >= MIN_PREFIX_CHARS
        parts.append(f"({quoted} OR {quoted}*)" if prefix else quoted)
    return " OR ".join(parts) or None


def _boost(hit: Hit, plan: Plan) -> float:
    """EXACT_PATH_BOOST when the hit is a dotted identifier of the question
    (`Console.print`), EXACT_NAME_BOOST when it is a plain one
    (`model_validate`), LAST_NAME_BOOST when its name is the last part of a
    dotted one; times KIND_BOOST when it is the kind of thing asked for."""
    best = 1.0
    qualname = hit.qualname.lower()
    name = hit.name.lower()
    for ident in plan.identifiers:
        ident = ident.lower()
        if qualname == ident or qualname.endswith("." + ident):
            best = max(best, EXACT_PATH_BOOST if "." in ident else EXACT_NAME_BOOST)
        elif "." in ident and name == ident.rpartition(".")[2]:
            best = max(best, LAST_NAME_BOOST)
    if plan.dropped:
        text = f"{hit.qualname} {hit.signature} {hit.doc}".lower()
        best *= 1.0 + DROPPED_CREDIT * sum(w in text for w in plan.dropped)
    if plan.wants and hit.kind == "class":
        is_error = any(w in f"{hit.name} {hit.bases}" for w in ("Error", "Exception", "Warning"))
        if plan.wants == "class" or is_error:
            best *= KIND_BOOST
    return best


def rerank(hits: Iterable[Hit], plan: Plan, dist_keys: Mapping[str, str], limit: int) -> list[Hit]:
    """The best `limit` hits: score x identifier boost, the named packages'
    hits first (in the order named). `dist_keys` maps a hit's distribution
    name to its key. Duplicates (one entry found twice, or one name defined by
    a package and by a stub package for it) keep their best-scored hit."""
    order = {key: n for n, key in enumerate(plan.packages)}
    scored = []
    best: dict[int, Hit] = {}
    for hit in hits:
        if hit.entry_id not in best or hit.score > best[hit.entry_id].score:
            best[hit.entry_id] = hit
    for hit in best.values():
        score = hit.score * _boost(hit, plan)
        rank = order.get(dist_keys.get(hit.dist, ""), len(order))
        scored.append((rank, -score, hit.qualname, hit, score))
    scored.sort(key=lambda item: item[:3])
    out: list[Hit] = []
    names: set[str] = set()
    for *_, hit, score in scored:
        if hit.qualname not in names:
            names.add(hit.qualname)
            out.append(replace(hit, score=score))
    return out[:limit]
