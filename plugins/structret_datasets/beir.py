"""BEIR-style folders: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/{split}.tsv``.

The interchange format for users' own data. Every row of the three files is counted:
corpus and query lines, and qrels lines (the TSV header excepted). A query without a
qrels row in the split is counted as skipped, since queries.jsonl holds every split's
queries.
"""

from __future__ import annotations

import os

from structret.errors import DataError
from structret.records import MAX_FIELD_CHARS, QRELS_RANKING, Dataset, Query, ReadStats, TextRecord

from structret_datasets._rows import BadRow, get_id, get_str, iter_jsonl

READER = "beir"
EXPECTED = "a folder with corpus.jsonl, queries.jsonl and qrels/{split}.tsv"
QRELS_HEADER = ["query-id", "corpus-id", "score"]


def _jsonl(folder: str, stem: str) -> str:
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    present = sorted(os.listdir(folder))
    raise DataError(
        f"{READER}: {folder} has no {stem}.jsonl (it holds: {', '.join(present) or 'nothing'}). Pass {EXPECTED}."
    )


def _qrels_file(folder: str, split: str) -> str:
    qrels_dir = os.path.join(folder, "qrels")
    path = os.path.join(qrels_dir, f"{split}.tsv")
    if os.path.isfile(path):
        return path
    splits = sorted(n[: -len(".tsv")] for n in os.listdir(qrels_dir) if n.endswith(".tsv")) if os.path.isdir(qrels_dir) else []
    if splits:
        raise DataError(
            f"{READER}: no qrels for split '{split}': {path} does not exist; the splits in {qrels_dir} are: "
            f"{', '.join(splits)}. Choose one of them."
        )
    raise DataError(f"{READER}: {qrels_dir} has no .tsv files. Pass {EXPECTED}.")


def _read_corpus(file: str, stats: ReadStats, limit: int) -> dict[str, TextRecord]:
    corpus: dict[str, TextRecord] = {}
    for _, where, row in iter_jsonl(file, stats, limit=limit):
        try:
            docid = get_id(row, "_id" if "_id" in row or "docid" not in row else "docid")
            text = get_str(row, "text", required=True)
            title = get_str(row, "title")
            if not (text.strip() or title.strip()):
                raise BadRow("empty text")
            if docid in corpus:
                raise BadRow("duplicate id")
        except BadRow as bad:
            stats.skip(where, bad.reason)
            continue
        stats.use()
        corpus[docid] = TextRecord(id=docid, text_=text, title=title)
    return corpus


def _read_queries(file: str, stats: ReadStats, limit: int) -> dict[str, Query]:
    """The well-formed queries; they are counted as used once the qrels are known."""
    queries: dict[str, Query] = {}
    for _, where, row in iter_jsonl(file, stats, limit=limit):
        try:
            qid = get_id(row, "_id")
            text = get_str(row, "text", required=True).strip()
            if not text:
                raise BadRow("empty query")
            if qid in queries:
                raise BadRow("duplicate id")
        except BadRow as bad:
            stats.skip(where, bad.reason)
            continue
        queries[qid] = Query(id=qid, text=text)
    return queries


def _read_qrels(file: str, stats: ReadStats, queries: dict, corpus: dict) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(file, "rb") as fh:
        seen_first = False
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{file}:{lineno}"
            is_first, seen_first = not seen_first, True
            try:
                try:
                    fields = raw.decode("utf-8").rstrip("\r\n").split("\t")
                except UnicodeDecodeError:
                    raise BadRow("undecodable bytes") from None
                if is_first and [f.strip().lower() for f in fields] == QRELS_HEADER:
                    continue  # the header is not a row
                if len(fields) != 3:
                    raise BadRow("not 3 tab-separated fields")
                qid, docid, score = (f.strip() for f in fields)
                try:
                    level = int(score)
                except ValueError:
                    raise BadRow("score is not an integer") from None
                if qid not in queries:
                    raise BadRow("unknown query id")
                if docid not in corpus:
                    raise BadRow("unknown corpus id")
                if docid in qrels.get(qid, {}):
                    raise BadRow("duplicate qrels row")
            except BadRow as bad:
                stats.skip(where, bad.reason)
                continue
            stats.use()
            qrels.setdefault(qid, {})[docid] = level
    return qrels


def read(path: str, *, split: str | None = None, max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """The corpus, the queries judged in ``split`` and their qrels (options: structret_datasets.options.Reader)."""
    limit = max_field_chars
    split = split or "test"
    if not os.path.isdir(path):
        what = "is a file, not a folder" if os.path.exists(path) else "does not exist"
        raise DataError(f"{READER}: {path} {what}. Pass {EXPECTED}.")
    # Find all three files before reading any, so a wrong split fails at once.
    corpus_file, queries_file, qrels_file = _jsonl(path, "corpus"), _jsonl(path, "queries"), _qrels_file(path, split)

    stats = ReadStats(source=f"{READER} {path} (split={split})")
    corpus = _read_corpus(corpus_file, stats, limit)
    candidates = _read_queries(queries_file, stats, limit)
    qrels = _read_qrels(qrels_file, stats, candidates, corpus)

    queries: dict[str, Query] = {}
    for qid, query in candidates.items():
        if qid in qrels:
            stats.use()
            queries[qid] = query
        else:
            stats.leave_out(f"no qrels in split '{split}'")
    return Dataset(name=READER, corpus=corpus, queries=queries, qrels=qrels, stats=stats, task=QRELS_RANKING)
