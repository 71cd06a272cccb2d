"""``structret bench --suite semble --data-root DIR``: semble's code-search benchmark, scored as its harness does.

semble (MinishLab/semble, ``benchmarks/``) pins repositories to revisions and annotates natural-language
and symbol queries with the files or line spans that answer them. A benchmark folder holds
``repos.json`` (name, language, revision, ``benchmark_root``: the folder indexed, null for the whole
tree), ``annotations/NAME.json`` (``[{"query", "relevant", "secondary", "category"}]``, a target a path
or ``{"path", "start_line", "end_line"}``, 1-based inclusive) and ``repos/NAME/`` at the pinned revision.

Each system indexes each repository as ``structret index`` does (``index_source``) and searches every
query for 10 hits. The metric is semble's (``ndcg_at_10``): a hit matches a target when the paths match
(equal, or one ends with ``/`` + the other) and, for a target with lines, the lines overlap; a target
counts once, at its first matching hit; binary NDCG@10 over relevant + secondary targets. Means over
a repository's queries, then over repositories (macro), per language and per category (over
repositories, of each one's category mean).

A system is ``LEXICAL+DENSE`` (``bm25-project+minilm``: the index's hybrid, at its fusion), ``DENSE``
(``minilm``: vectors alone) or ``LEXICAL``
(``bm25-project``: a lexical index, no model).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, cast

from structret.api import defaults, index_source, load_index, locate
from structret.errors import DataError, SuiteError
from structret.plugin import BenchTable, get_registry

NAME = "semble"
CUTOFF = 10
LAYOUT = "repos.json, annotations/NAME.json and repos/NAME/"


@dataclass(frozen=True)
class Target:
    """What answers a query: a file, or lines of one (1-based, inclusive)."""

    path: str
    start: int | None = None
    end: int | None = None


@dataclass
class Query:
    text: str
    category: str
    targets: list[Target]


@dataclass
class Repo:
    name: str
    language: str
    root: Path  # the folder indexed
    queries: list[Query] = field(default_factory=list)


def _target(raw: Any, where: str) -> Target:
    if isinstance(raw, str):
        return Target(raw)
    if isinstance(raw, dict) and isinstance(raw.get("path"), str):
        start, end = raw.get("start_line"), raw.get("end_line")
        if not (isinstance(start, int) and isinstance(end, int) and 1 <= start <= end):
            raise DataError(f"{where}: target {raw!r} needs start_line <= end_line, whole numbers from 1.")
        return Target(raw["path"], start, end)
    raise DataError(f"{where}: a target is a path or {{'path', 'start_line', 'end_line'}}, not {raw!r}.")


def read_benchmark(root: str | os.PathLike) -> list[Repo]:
    """The repositories of a benchmark folder with their queries, in repos.json's order; SuiteError naming
    what is missing."""
    root = Path(root)
    listing = root / "repos.json"
    if not listing.is_file():
        what = "does not exist" if not root.exists() else f"holds no repos.json ({LAYOUT})"
        raise SuiteError(f"--data-root {root} {what}. Give a folder of semble's benchmark: {LAYOUT}.")
    try:
        entries = json.loads(listing.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SuiteError(f"{listing}: not JSON ({exc}).") from None
    repos = []
    for n, entry in enumerate(entries, 1):
        where = f"{listing}: entry {n}"
        if not (isinstance(entry, dict) and entry.get("name") and entry.get("language")):
            raise SuiteError(f"{where}: needs a name and a language, got {entry!r}.")
        name = entry["name"]
        folder = root / "repos" / name / (entry.get("benchmark_root") or "")
        notes = root / "annotations" / f"{name}.json"
        if not folder.is_dir():
            raise SuiteError(f"{where}: {folder} is not there; check out {name} at revision "
                             f"{entry.get('revision', '?')} into {root / 'repos' / name}.")
        if not notes.is_file():
            raise SuiteError(f"{where}: {notes} is not there: the annotations of {name}.")
        repo = Repo(name, entry["language"], folder)
        for m, raw in enumerate(json.loads(notes.read_text(encoding="utf-8")), 1):
            at = f"{notes}: query {m}"
            if not (isinstance(raw, dict) and isinstance(raw.get("query"), str)):
                raise SuiteError(f"{at}: needs a query, got {raw!r}.")
            targets = [_target(t, at) for key in ("relevant", "secondary") for t in raw.get(key) or []]
            if not targets:
                raise SuiteError(f"{at}: no relevant or secondary target.")
            repo.queries.append(Query(raw["query"], str(raw.get("category") or ""), targets))
        repos.append(repo)
    if not repos:
        raise SuiteError(f"{listing} lists no repository.")
    return repos


def same_path(a: str, b: str) -> bool:
    """semble's path match: equal, or one ends with '/' + the other (the index holds paths relative to the
    folder indexed; some annotations are relative to the repository root)."""
    a, b = a.lstrip("./"), b.lstrip("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def hits_target(hit: tuple[str, int | None, int | None], target: Target) -> bool:
    path, start, end = hit
    if not same_path(path, target.path):
        return False
    if target.start is None or target.end is None:
        return True  # a path-only target: any hit in that file
    if start is None or end is None:
        return False  # a hit without lines cannot be shown to overlap a span
    return start <= target.end and target.start <= end


def ndcg_at_10(hits: Sequence[tuple[str, int | None, int | None]], targets: Sequence[Target]) -> float:
    """Binary NDCG@10 of ranked ``hits`` (path, first line, last line): each target counts once, at the rank
    of the first hit matching it; ideal DCG is that of min(10, targets) ones."""
    found: dict[int, int] = {}
    for rank, hit in enumerate(hits[:CUTOFF], 1):
        for t, target in enumerate(targets):
            if t not in found and hits_target(hit, target):
                found[t] = rank
    dcg = sum(1 / math.log2(rank + 1) for rank in found.values())
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(CUTOFF, len(targets)) + 1))
    return dcg / ideal if ideal else 0.0


def parse_system(system: str) -> tuple[str | None, str | None, str | None]:
    """``(lexical, dense model, fusion)`` of a system name: ``LEXICAL+DENSE`` (its index's fusion), a backbone
    or run (dense alone), or a registered retriever (a lexical index: no model)."""
    registry = get_registry()
    lexical, plus, dense = system.partition("+")
    if plus:
        if not registry.has("retriever", lexical):
            raise SuiteError(f"system '{system}': '{lexical}' is not a registered retriever (structret plugins "
                             f"--kind retriever lists them).")
        return lexical, dense, None
    if registry.has("retriever", system):
        return system, None, None
    return None, system, None


@dataclass
class RepoRun:
    """One system on one repository: each query's NDCG@10, the cold index time and the query latencies."""

    ndcg: list[float]
    index_seconds: float
    query_seconds: list[float]
    units: int
    encoded: int = 0  # units encoded now (the others' vectors came from the vector cache)
    skipped: str = ""  # why nothing was indexed (then every query scores 0)


def run_repo(repo: Repo, system: str, out: Path, *, batch_size: int = 32) -> RepoRun:
    """Index ``repo`` for ``system`` into ``out`` (a new folder: a cold build) and score every query."""
    lexical, dense, fusion = parse_system(system)
    start = time.perf_counter()
    try:
        built = index_source(repo.root, out, model=dense, lexical=lexical, show_progress=False,
                             batch_size=batch_size)
    except DataError as exc:  # a repository the chunker reads nothing of: counted, every query 0
        return RepoRun([0.0] * len(repo.queries), 0.0, [], 0, skipped=str(exc))
    seconds = time.perf_counter() - start
    index = load_index(out)
    if fusion is not None:
        index.set_fusion(fusion)
    model = index.model if dense is not None else None
    scores, latencies = [], []
    for query in repo.queries:
        began = time.perf_counter()
        found = index.search(model, [query.text], k=CUTOFF) if model is not None else \
            index.search([query.text], k=CUTOFF)
        hits = cast("list[Any]", found[0])
        latencies.append(time.perf_counter() - began)
        located = [_location(hit.id, repo.root) for hit in hits]
        scores.append(ndcg_at_10([h for h in located if h is not None], query.targets))
    return RepoRun(scores, seconds, latencies, built.units, built.encoded)


def _location(doc_id: str, root: Path) -> tuple[str, int | None, int | None] | None:
    where = locate(doc_id, str(root))
    return None if where is None else (where.path, where.start, where.end)


def semble_table(root: str | os.PathLike, systems: list[str], *, batch_size: int = 32, limit: int | None = None,
                 vector_cache: bool = True, split: str = "test") -> BenchTable:
    """Every system on every repository of the benchmark at ``root``: NDCG@10 per repository, macro, per
    category; cold index time and query p50 in the notes. ``limit``: the first N queries of each repository."""
    repos = read_benchmark(root)
    if limit is not None:
        for repo in repos:
            repo.queries = repo.queries[:limit]
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    categories = sorted({q.category for r in repos for q in r.queries})
    with tempfile.TemporaryDirectory(prefix="structret-semble-") as tmp:
        for system in systems:
            values: dict[str, float] = {}
            by_category: dict[str, list[float]] = {c: [] for c in categories}
            index_times, latencies, skipped = [], [], []
            for i, repo in enumerate(repos, 1):
                print(f"[{i}/{len(repos)}] {system} on {repo.name} ({repo.language}, {len(repo.queries)} queries)",
                      file=sys.stderr)
                run = run_repo(repo, system, Path(tmp) / f"{len(rows)}-{repo.name}", batch_size=batch_size)
                values[repo.name] = statistics.fmean(run.ndcg)
                for category in categories:
                    mine = [s for s, q in zip(run.ndcg, repo.queries) if q.category == category]
                    if mine:
                        by_category[category].append(statistics.fmean(mine))
                if run.skipped:
                    skipped.append(repo.name)
                else:
                    index_times.append(f"{repo.name} {run.index_seconds:.1f} s ({run.units} units, "
                                       f"{run.encoded} encoded)")
                latencies += run.query_seconds
            values["macro"] = statistics.fmean(values[r.name] for r in repos)
            for category, each in by_category.items():
                values[f"cat:{category}"] = statistics.fmean(each) if each else math.nan
            rows.append({"label": system, "block": "", "values": values, "paper": {}, "marks": [],
                         "system": {"name": system, "skipped": skipped}})
            p50 = statistics.median(latencies) * 1000 if latencies else math.nan
            notes.append(f"{system}: index build (a new folder; vectors the vector cache holds are reused, so a "
                         f"build is cold only where all its units were encoded) " + ("; ".join(index_times) or "none")
                         + f"; query p50 {p50:.1f} ms (encoding and search, in-process)"
                         + (f"; nothing indexed in {', '.join(skipped)} (the chunker reads none of their files): 0 there" if skipped
                            else ""))
    columns = [{"key": r.name, "dataset": r.name, "metric": "NDCG@10", "kind": "measured",
                "header": f"{r.name} ({r.language})"} for r in repos]
    columns.append({"key": "macro", "dataset": "macro", "metric": "NDCG@10", "kind": "measured", "header": "macro"})
    columns += [{"key": f"cat:{c}", "dataset": c, "metric": "NDCG@10", "kind": "measured", "header": c}
                for c in categories]
    caption = (f"NDCG@10 ×100 on semble's benchmark at {root} ({len(repos)} repositories, "
               f"{sum(len(r.queries) for r in repos)} queries), scored as semble's harness scores: a hit matches a "
               f"target by path (equal or a suffix) and, for a span, overlapping lines; each target once, at its "
               f"first hit; relevant and secondary targets weigh 1. macro = mean over repositories; a category = "
               f"mean over repositories of each one's category mean.")
    return BenchTable(title="semble's code-search benchmark (NDCG@10)", caption=caption, columns=columns, rows=rows,
                      notes=notes)
