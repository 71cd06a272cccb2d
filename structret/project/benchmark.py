"""A whole project as the corpus: does a search find the function a person describes? (issue 39)

CodeSearchNet-style pools hold documented functions of many projects; a user searches one
project, every function of it (tests, private helpers, undocumented code), and reads a file and
a line. So, for one project folder:

1. ``prepare_project``: every file a miner reads is copied with its functions' docstrings blanked
   by the miner's ``blank_docstrings`` (the text turned to spaces, line breaks kept: each
   function keeps its lines, so a hit's ``path:start-end`` is checkable). The queries are those
   docstrings' first paragraphs, 4 to 60 words; a text that describes more than one function is
   dropped (it has no single answer), as is a function whose docstring the blanking could not
   take out; a first paragraph that opens with the function's name (Go's convention) starts
   after it. Each query's answer is its function, named by file and last line (a doc comment
   above a function may or may not count among its lines; its last line does not move).
2. ``candidates``: the copy is indexed by ``index_source``, what ``structret index`` runs, and
   every query searched with both sides' top ``depth`` lists kept, so each fusion (dense alone is
   weight 0, lexical alone weight 1) is scored from one index: MRR@10, NDCG@10, recall@1 and @10,
   with or without two query-time structure levers measured here before any search uses them
   (a file-coherence boost and a call-graph prior, ``Candidates.ranks``).

``benchmarks/project_search.py`` runs it over the validation and test projects of the six-language
corpus and prints the tables of docs/results.md.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from structret.project.index import index_source
from structret.contracts import HasBlankDocstrings, HasSplit
from structret.errors import DataError
from structret.mining import mine
from structret.registry import get_registry
from structret.search.index import fuse_candidates, load_index
from structret.snippets import locate
from structret.project.files import scan

QUERIES = "queries.jsonl"
SUMMARY = "project.json"
MIN_WORDS, MAX_WORDS = 4, 60
CUTOFF = 10  # MRR@10, NDCG@10, recall@10


@dataclass
class PreparedProject:
    """What ``prepare_project`` wrote, and what it left out and why (counted, never silent)."""

    name: str
    source: str
    files: int = 0
    functions: int = 0  # functions the miners find in the copy: the corpus searched
    queries: int = 0
    languages: dict[str, int] = field(default_factory=dict)  # queries per language
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> queries left out
    skipped_files: dict[str, str] = field(default_factory=dict)  # file -> why it was copied unblanked or not at all

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n


def first_paragraph(docstring: str) -> str:
    """The docstring's summary: its text up to the first blank line, on one line."""
    paragraph = re.split(r"\n\s*\n", docstring.strip(), maxsplit=1)[0]
    return " ".join(paragraph.split())


def without_name(text: str, func_name: str) -> str:
    """Go's and Java's convention opens a doc comment with the function's name ("Dial connects to ..."):
    a person searching does not know the name, so the query starts after it."""
    name = func_name.rsplit(".", 1)[-1]
    first, _, rest = text.partition(" ")
    if name and first.strip("`'\"*:,") == name and rest:
        return rest
    return text


def _place(doc_id: str, root: Path) -> tuple[str, int, int] | None:
    """(path under ``root``, first line, last line) of a mined function's id, None if it names no lines there."""
    where = locate(doc_id, str(root))
    if where is None or where.start is None or where.end is None or Path(where.path).is_absolute():
        return None
    return where.path, where.start, where.end


def _mined(folder: Path, language: str, every_function: bool, tmp: Path) -> list[dict[str, Any]]:
    out = tmp / f"{language}-{int(every_function)}.jsonl"
    mine(folder, language, out, repo=folder.name, show_progress=False, every_function=every_function)
    with open(out, encoding="utf-8") as rows:
        return [json.loads(line) for line in rows if line.strip()]


def prepare_project(source: str | Path, out: str | Path, *, name: str | None = None) -> PreparedProject:
    """Write ``out/src`` (the project, docstrings blanked), ``out/queries.jsonl`` and ``out/project.json``."""
    source, out = Path(source).resolve(), Path(out)
    if not source.is_dir():
        raise DataError(f"{source} is not a folder; give the root of a project's source tree.")
    registry = get_registry()
    files = scan(source)
    result = PreparedProject(name or source.name, str(source), files=len(files))
    copy = out / "src"
    blankers = {}
    for language in sorted({language for language, _, _ in files.values()}):
        miner = registry.create("miner", language)
        blankers[language] = miner.blank_docstrings if isinstance(miner, HasBlankDocstrings) else None
    for rel, (language, _, _) in sorted(files.items()):
        try:
            text = (source / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            result.skipped_files[rel] = f"not read ({type(exc).__name__})"
            continue
        blank = blankers[language]
        if blank is None:
            result.skipped_files[rel] = f"the {language} miner cannot blank docstrings"
            continue
        try:
            text = blank(text, rel)
        except Exception as exc:  # a file the parser rejects holds no mined function either: copied as it is
            result.skipped_files[rel] = f"copied unblanked ({type(exc).__name__})"
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text(text, encoding="utf-8")

    queries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="structret-project-") as tmp:
        for language in blankers:
            if blankers[language] is None:
                continue
            # the answer's function as the copy has it (every function: what index_source indexes)
            in_copy: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}  # (path, last line) -> (first, row)
            for row in _mined(copy, language, True, Path(tmp)):
                if (place := _place(row["url"], copy.resolve())) is not None:
                    in_copy[place[0], place[2]] = (place[1], row)
            result.functions += len(in_copy)
            for row in _mined(source, language, False, Path(tmp)):
                place = _place(row["url"], source)
                text = without_name(first_paragraph(row.get("docstring") or ""), row.get("func_name") or "")
                words = len(text.split())
                if place is None:
                    result.drop("no file and lines in its id")
                elif not MIN_WORDS <= words <= MAX_WORDS:
                    result.drop(f"first paragraph not {MIN_WORDS}-{MAX_WORDS} words")
                elif (place[0], place[2]) not in in_copy:
                    result.drop("function not found in the blanked copy")
                elif (in_copy[place[0], place[2]][1].get("docstring") or "").strip():
                    result.drop("docstring not blanked")
                else:
                    queries.append({"query": text, "path": place[0], "start": in_copy[place[0], place[2]][0],
                                    "end": place[2], "language": language})
    texts = Counter(q["query"].lower() for q in queries)
    kept = [q for q in queries if texts[q["query"].lower()] == 1]
    result.drop("ambiguous: the same text describes several functions", len(queries) - len(kept))
    for q in kept:
        result.languages[q["language"]] = result.languages.get(q["language"], 0) + 1
    result.queries = len(kept)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / QUERIES, "w", encoding="utf-8") as fh:
        for q in kept:
            fh.write(json.dumps(q) + "\n")
    (out / SUMMARY).write_text(json.dumps(asdict(result), indent=1) + "\n")
    return result


def read_queries(prepared: str | Path) -> list[dict[str, Any]]:
    path = Path(prepared) / QUERIES
    if not path.is_file():
        raise DataError(f"{path} does not exist; prepare the project first (prepare_project).")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


RERANK_DEPTH = 100  # the fused hits the structure levers re-order


@dataclass
class Candidates:
    """Both sides' top lists for every query of one project, from one index: any fusion is scored from them,
    with or without the query-time structure levers (``ranks``)."""

    project: str
    answers: list[tuple[str, int]]  # (path, last line) per query
    dense: list[tuple[list[str], Any]]  # per query: (ids, scores)
    lexical: list[tuple[list[str], Any]]
    where: dict[str, tuple[str, int]]  # doc id -> (path, last line): a unit ending where the function ends
    units: int = 0  # what the index holds: every unit (definitions and the code between them)
    prior: dict[str, float] = field(default_factory=dict)  # doc id -> call-graph prior in [0, 1]
    # the lexical side per field, unweighted: field -> [queries, documents] scores, documents in
    # ``lexical_ids``' order (``candidates(fields=...)``), so any field weights are scored without a refit
    fields: dict[str, Any] = field(default_factory=dict)
    lexical_ids: list[str] = field(default_factory=list)
    depth: int = 1000

    def weighted(self, weights: dict[str, float]) -> list[tuple[list[str], Any]]:
        """Each query's lexical top ``depth`` under field ``weights`` (from ``fields``)."""
        import numpy as np

        missing = [f for f, w in weights.items() if w and f not in self.fields]
        if missing:
            raise DataError(f"no scores of the fields {missing}: pass them to candidates(fields=...)")
        rows = sum(w * self.fields[f] for f, w in weights.items() if w)
        k = min(self.depth, rows.shape[1])
        top = np.argpartition(-rows, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(rows, top, axis=1), axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
        return [([self.lexical_ids[p] for p in row], scores)
                for row, scores in zip(top, np.take_along_axis(rows, top, axis=1))]

    def ranks(self, fusion: Any, *, coherence: float = 0.0, prior: float = 0.0,
              weights: dict[str, float] | None = None) -> list[int | None]:
        """The answer's rank (1-based) under ``fusion`` within the top CUTOFF, None beyond; the lexical side
        the index's, or with field ``weights`` its fields re-weighted (``weighted``).

        ``coherence`` and ``prior`` re-order the fused top RERANK_DEPTH, their scores first mapped onto
        [0, 1] within the query (so the strengths mean the same for every fusion method): a hit gains
        ``coherence`` times the best score among the other hits of its file (semble's file coherence:
        a file that answers the query lends weight to its functions), and ``prior`` times its
        call-graph prior (``call_graph_prior``)."""
        ranks: list[int | None] = []
        lexical_lists = self.lexical if weights is None else self.weighted(weights)
        fused = fuse_candidates(zip(lexical_lists, self.dense), fusion, RERANK_DEPTH if coherence or prior else CUTOFF)
        for answer, hits in zip(self.answers, fused):
            order = [h.doc for h in hits]
            if coherence or prior:
                order = self._rerank(order, [h.score for h in hits], coherence, prior)
            found = next((n for n, doc in enumerate(order[:CUTOFF], 1) if self.where.get(doc) == answer), None)
            ranks.append(found)
        return ranks

    def _rerank(self, docs: list[str], scores: list[float], coherence: float, prior: float) -> list[str]:
        finite = [x for x in scores if math.isfinite(x)]
        if not finite:
            return docs
        low, high = min(finite), max(finite)
        norm = [(x - low) / (high - low) if math.isfinite(x) and high > low else 0.0 for x in scores]
        best: dict[str, list[float]] = {}  # file -> its two best scores (a hit's own is not its support)
        for doc, x in zip(docs, norm):
            top = best.setdefault(self.where.get(doc, (doc, 0))[0], [0.0, 0.0])
            if x > top[0]:
                top[0], top[1] = x, top[0]
            elif x > top[1]:
                top[1] = x
        boosted = []
        for doc, x in zip(docs, norm):
            top = best[self.where.get(doc, (doc, 0))[0]]
            support = top[1] if x >= top[0] else top[0]
            boosted.append(x + coherence * support + prior * self.prior.get(doc, 0.0))
        return [doc for _, doc in sorted(zip(boosted, docs), key=lambda pair: -pair[0])]


def call_graph_prior(texts: Mapping[str, str], split: Callable[[str], dict[str, str]]) -> dict[str, float]:
    """Each function's in-degree in the project's call graph, saturated onto [0, 1]: log(1 + callers) /
    log(1 + most callers). ``split(text)`` gives a function's ``name`` and the names it ``calls`` (space
    separated; bm25-fields' ``split_fields`` does). A call is resolved by name within the project (no
    import resolution), so a name defined in several places gives each of them the callers."""
    fields = {doc: split(text) for doc, text in texts.items()}
    defined: dict[str, list[str]] = {}
    for doc, f in fields.items():
        if f["name"]:
            defined.setdefault(f["name"], []).append(doc)
    callers: dict[str, int] = {}
    for doc, f in fields.items():
        for name in set(f["calls"].split()):
            for callee in defined.get(name, ()):
                if callee != doc:
                    callers[callee] = callers.get(callee, 0) + 1
    most = max(callers.values(), default=0)
    return {doc: math.log1p(n) / math.log1p(most) for doc, n in callers.items()} if most else {}


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """MRR@10, NDCG@10 (one relevant function), recall@1 and @10 of the answers' ranks."""
    n = len(ranks)
    if n == 0:
        raise DataError("no queries to score")
    found = [r for r in ranks if r is not None and r <= CUTOFF]
    return {"MRR@10": sum(1 / r for r in found) / n, "NDCG@10": sum(1 / math.log2(r + 1) for r in found) / n,
            "R@1": sum(r == 1 for r in found) / n, "R@10": len(found) / n}


def candidates(prepared: str | Path, index_dir: str | Path, *, model: Any, lexical: str, depth: int = 1000,
               show_progress: bool = False, fields: Sequence[str] = ()) -> Candidates:
    """Index ``prepared/src`` with ``index_source`` (``model``, ``lexical``) into ``index_dir`` and keep each
    query's dense and lexical top ``depth``; the call-graph prior too (``call_graph_prior``) when the
    lexical retriever reads a function's fields (its ``split``: bm25-fields does). ``fields``: field
    names of a retriever with ``field_scores`` (bm25-fields), each scored alone on the index's readings
    of the functions, so ``ranks(weights=...)`` tries field weights without indexing again."""
    prepared = Path(prepared)
    queries = read_queries(prepared)
    copy = (prepared / "src").resolve()
    built = index_source(copy, index_dir, model=model, lexical=lexical, show_progress=show_progress)
    index = load_index(index_dir)
    if not isinstance(model, str):
        index.use(model)
    if index.lexical is None:
        raise DataError("scoring fusions needs an index with a lexical side; pass lexical=")
    where = {doc_id: (place[0], place[2]) for doc_id in index.lexical_ids
             if (place := _place(doc_id, copy)) is not None}
    split = index.lexical.retriever.split if isinstance(index.lexical.retriever, HasSplit) else None
    texts = [q["query"] for q in queries]
    vectors = index.model.encode_query(texts)
    lists = index.candidates(vectors, texts, depth)
    per_field = {}
    if fields:
        options = {k: v for k, v in (index.meta["lexical"].get("options") or {}).items() if k != "weights"}
        probe = get_registry().create("retriever", index.meta["lexical"]["retriever"],
                                      weights=",".join(f"{f}:1" for f in fields), **options)
        readings = index.load_readings() or {}
        probe.fit([readings.get(i, (index.texts or {}).get(i, "")) for i in index.lexical_ids])
        per_field = probe.field_scores(texts)
    return Candidates(prepared.name, [(q["path"], q["end"]) for q in queries],
                      [dense for _, dense in lists], [lexical for lexical, _ in lists],
                      where, built.units, call_graph_prior(index.texts or {}, split) if split else {},
                      per_field, list(index.lexical_ids), depth)
