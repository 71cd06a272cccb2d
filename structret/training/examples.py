"""Training examples: a query and its positive (and hard negative) passages, as texts."""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structret.errors import DataError
from structret.linearization import TextFormat
from structret.records import ItemRecord, ReadStats

TEVATRON = "tevatron"


@dataclass
class Example:
    """One training pair. Alternatives are drawn per epoch with a seeded RNG: SANTA's
    product query is one random bullet point, Tevatron lines may list several positives."""

    queries: list[str]
    positives: list[str]
    negatives: list[str] = field(default_factory=list)
    record: Any = None  # the positive's Record, so MEP knows what kind of text it masks


def _passage(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
        return None
    title = entry.get("title") if isinstance(entry.get("title"), str) else ""
    text = f"{title} {entry['text']}".strip() if title.strip() else entry["text"].strip()
    return text or None


def read_training_pairs(path: str, max_field_chars: int | None = None) -> tuple[list[Example], ReadStats]:
    """Tevatron training lines (``.jsonl`` or ``.jsonl.gz``), one query per line::

        {"query_id": "q1", "query": "...", "positive_passages": [{"docid": "d1", "title": "", "text": "..."}],
         "negative_passages": [{"docid": "d7", "title": "", "text": "..."}]}

    A malformed line is skipped and counted (with file:line), never fatal; so is a line whose
    query or one passage is longer than ``max_field_chars`` (default: the readers' MAX_FIELD_CHARS).
    """
    from structret.records import MAX_FIELD_CHARS

    limit = max_field_chars or MAX_FIELD_CHARS
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{TEVATRON}: {path} does not exist; pass a .jsonl(.gz) file of Tevatron training lines.")
    stats = ReadStats(source=f"{TEVATRON} {path}")
    examples: list[Example] = []
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
                examples.append(Example([query.strip()], positives, negatives))
    except (OSError, EOFError, zlib.error) as exc:  # a .gz that is not gzip, truncated or corrupt
        raise DataError(
            f"{TEVATRON}: cannot read {path} at line {lineno + 1} ({exc}); the file is truncated or corrupt. "
            f"Write it again (e.g. rerun 'structret negatives'), or cut it before that line."
        ) from None
    return examples, stats


def examples_from_dataset(dataset: Any, text_format: TextFormat | None = None) -> list[Example]:
    """Aligned pairs (code search: docstring -> code), else judged queries (a query -> its
    relevant documents), else products with bullet points (SANTA's pretraining: a random
    bullet point -> the product's title and description). Texts are what ``text_format``
    makes of the records, exactly what retrieval will encode."""
    fmt = text_format or TextFormat()
    if dataset.pairs:
        return [
            Example([fmt.query(dataset.queries[q])], [fmt.document(dataset.corpus[d])], record=dataset.corpus[d])
            for q, d in dataset.pairs
        ]
    judged = [q for q in dataset.queries if dataset.qrels.get(q)]
    if judged:
        # judged queries (ESCI, BEIR): each query -> its relevant documents, and for graded
        # labels only the top one (ESCI's Exact: SANTA's fine-tuning positives)
        threshold = max(dataset.labels) if dataset.labels else 1
        examples = []
        for q in judged:
            positives = [d for d, level in dataset.qrels[q].items() if level >= threshold and d in dataset.corpus]
            if not positives:
                dataset.stats.leave_out("query without a relevant document to train on")
                continue
            examples.append(Example([fmt.query(dataset.queries[q])], [fmt.document(dataset.corpus[d]) for d in positives],
                                    record=dataset.corpus[positives[0]]))
        return examples
    items = [r for r in dataset.corpus.values() if isinstance(r, ItemRecord)]
    examples = [Example(list(r.bullets), [fmt.document(r)], record=r) for r in items if r.bullets]
    if items:
        dataset.stats.leave_out("item without bullet points (no aligned text to train on)", len(items) - len(examples))
        return examples
    raise DataError(
        f"{dataset.name}: this dataset has no aligned (text, document) pairs to train on. Train on "
        f"code-search data (codesearchnet, adv), products with bullet points (esci), or write "
        f"Tevatron training lines and pass --data {TEVATRON}:train.jsonl."
    )


def load_examples(spec: str, split: str | None = None, text_format: TextFormat | None = None,
                  options: dict[str, Any] | None = None) -> tuple[list[Example], ReadStats]:
    """``tevatron:PATH`` (texts as written) or any registered ``FORMAT:PATH``."""
    from structret.data import load_dataset, require

    if spec.startswith(f"{TEVATRON}:"):
        return read_training_pairs(spec[len(TEVATRON) + 1:])
    dataset = load_dataset(spec, split=split, options=options)
    require(dataset, "documents", "queries", spec=spec, split=split)
    return examples_from_dataset(dataset, text_format), dataset.stats
