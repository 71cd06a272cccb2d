"""Tevatron training lines: a query, its positive passages and its hard negatives, one per line
(what ``structret negatives`` writes, and what Tevatron and OpenMatch train on)::

    {"query_id": "q1", "query": "...", "positive_passages": [{"docid": "d1", "title": "", "text": "..."}],
     "negative_passages": [{"docid": "d7", "title": "", "text": "..."}]}

Read as a normal Dataset: each line's query, its passages as ``TextRecord``s (``title text``,
as written), qrels marking the positives (level 1) and ``Dataset.negatives`` listing the hard
negatives per query, in file order. Passage ids are the line's own (``QID/pos/0``,
``QID/neg/1``): a docid repeated across lines may carry other text, so nothing is merged and
training sees every text as written. A malformed line is skipped and counted (with
file:line), never fatal; so is a line whose query or one passage is longer than
``max_field_chars``.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

from structret.errors import DataError
from structret.records import MAX_FIELD_CHARS, QRELS_RANKING, Dataset, Query, ReadStats, TextRecord

READER = "tevatron"


def _passage(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
        return None
    title = given if isinstance(given := entry.get("title"), str) else ""
    text = f"{title} {entry['text']}".strip() if title.strip() else entry["text"].strip()
    return text or None


def _query_id(given: Any, lineno: int, seen: dict[str, Query]) -> str:
    # the file's id when it is usable; a line without one (or repeating one) gets its line number
    usable = isinstance(given, str | int) and not isinstance(given, bool) and str(given).strip()
    qid = str(given) if usable else f"line-{lineno}"
    while qid in seen:
        qid = f"{qid} (line {lineno})"
    return qid


def read(path: str, *, split: str | None = None, max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """Every line of a ``.jsonl`` or ``.jsonl.gz`` file; ``split`` is ignored (a file is one split).
    Options: structret_datasets.options.Reader."""
    limit = max_field_chars
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{READER}: {path} does not exist; pass a .jsonl(.gz) file of Tevatron training lines.")
    stats = ReadStats(source=f"{READER} {path}")
    queries: dict[str, Query] = {}
    corpus: dict[str, TextRecord] = {}
    qrels: dict[str, dict[str, int]] = {}
    hard: dict[str, list[str]] = {}
    opener = gzip.open if file.name.endswith(".gz") else open
    lineno = 0
    try:
        # surrogateescape: a line that is not UTF-8 is skipped below, not the whole file lost
        with opener(file, "rt", encoding="utf-8", errors="surrogateescape") as lines:
            for lineno, line in enumerate(lines, 1):
                where = f"{file.name}:{lineno}"
                if not line.strip():
                    continue
                if not line.isascii():
                    try:
                        line.encode("utf-8")
                    except UnicodeEncodeError:
                        stats.skip(where, "undecodable bytes")
                        continue
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, RecursionError):  # RecursionError: nested thousands deep
                    stats.skip(where, "not JSON")
                    continue
                if not isinstance(row, dict):
                    stats.skip(where, "not a JSON object")
                    continue
                query = row.get("query")
                if not isinstance(query, str) or not query.strip():
                    stats.skip(where, "missing or empty 'query'")
                    continue
                wrong = next((k for k in ("positive_passages", "negative_passages")
                              if not isinstance(row.get(k) or [], list)), None)
                if wrong:  # a passage list that is a string, a number, an object ...
                    stats.skip(where, f"'{wrong}' is not a list")
                    continue
                positives = [p for p in map(_passage, row.get("positive_passages") or []) if p]
                if not positives:
                    stats.skip(where, "no positive passage with text")
                    continue
                negatives = [p for p in map(_passage, row.get("negative_passages") or []) if p]
                texts = [("query", query)] + [("positive_passages", p) for p in positives] + \
                        [("negative_passages", n) for n in negatives]
                big = next(((key, len(text)) for key, text in texts if len(text) > limit), None)
                if big:
                    stats.skip(where, f"field '{big[0]}' over max_field_chars={limit}", f"{big[1]:,} chars")
                    continue
                stats.use()
                qid = _query_id(row.get("query_id"), lineno, queries)
                queries[qid] = Query(qid, query.strip())
                qrels[qid] = {}
                for kind, texts_of_kind in (("pos", positives), ("neg", negatives)):
                    for i, text in enumerate(texts_of_kind):
                        # ids of this line alone: the same text twice stays twice, as written
                        doc_id = f"{qid}/{kind}/{i}"
                        corpus[doc_id] = TextRecord(doc_id, text)
                        if kind == "pos":
                            qrels[qid][doc_id] = 1
                        else:
                            hard.setdefault(qid, []).append(doc_id)
    except (OSError, EOFError, zlib.error) as exc:  # a .gz that is not gzip, truncated or corrupt
        raise DataError(
            f"{READER}: cannot read {path} at line {lineno + 1} ({exc}); the file is truncated or corrupt. "
            f"Write it again (e.g. rerun 'structret negatives'), or cut it before that line."
        ) from None
    return Dataset(name=READER, corpus=corpus, queries=queries, qrels=qrels, stats=stats, negatives=hard,
                   task=QRELS_RANKING)  # the queries against every passage of the file
