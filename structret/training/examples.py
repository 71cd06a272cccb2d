"""Training examples: a query and its positive (and hard negative) passages, as texts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structret.datasets import load_dataset
from structret.errors import DataError
from structret.linearization import TextFormat
from structret.records import ItemRecord, ReadStats


@dataclass
class Example:
    """One training pair. Alternatives are drawn per epoch with a seeded RNG: SANTA's
    product query is one random bullet point, a judged query may have several positives."""

    queries: list[str]
    positives: list[str]
    negatives: list[str] = field(default_factory=list)
    record: Any = None  # the positive's Record, so MEP knows what kind of text it masks


def examples_from_dataset(dataset: Any, text_format: TextFormat | None = None) -> list[Example]:
    """Aligned pairs (code search: docstring -> code), else judged queries (a query -> its
    relevant documents), else products with bullet points (SANTA's pretraining: a random
    bullet point -> the product's title and description). Texts are what ``text_format``
    makes of the records, exactly what retrieval will encode. A query's hard negatives
    (``Dataset.negatives``: Tevatron lines) come with it, in the reader's order."""
    fmt = text_format or TextFormat()
    hard = dataset.negatives

    def negatives(q: str) -> list[str]:
        return [fmt.document(dataset.corpus[d]) for d in hard.get(q, ()) if d in dataset.corpus]

    if dataset.pairs:
        return [
            Example([fmt.query(dataset.queries[q])], [fmt.document(dataset.corpus[d])], negatives(q),
                    record=dataset.corpus[d])
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
                                    negatives(q), record=dataset.corpus[positives[0]]))
        return examples
    items = [r for r in dataset.corpus.values() if isinstance(r, ItemRecord)]
    examples = [Example(list(r.bullets), [fmt.document(r)], record=r) for r in items if r.bullets]
    if items:
        dataset.stats.leave_out("item without bullet points (no aligned text to train on)", len(items) - len(examples))
        return examples
    raise DataError(
        f"{dataset.name}: this dataset has no aligned (text, document) pairs to train on. Train on "
        f"code-search data (codesearchnet, adv), products with bullet points (esci), or write "
        f"training lines with hard negatives (structret negatives) and pass --data tevatron:train.jsonl."
    )


def load_examples(spec: str, split: str | None = None, text_format: TextFormat | None = None,
                  options: dict[str, Any] | None = None) -> tuple[list[Example], ReadStats]:
    """The examples of any registered ``FORMAT:PATH``, and how its reader counted the rows."""
    dataset = load_dataset(spec, split, need=("documents", "queries"), **(options or {}))
    return examples_from_dataset(dataset, text_format), dataset.stats
