"""CoIR tasks (CoIR-team/coir, the ``CoIR-Retrieval`` datasets) saved in BEIR's layout.

A task folder holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv``, as CoIR's
data is published: corpus and query rows ``{"_id", "title", "text", "partition", "language",
"meta_information"}`` (only ``_id``, ``text`` and ``title`` are read: a document is
``title + " " + text``, as CoIR's BEIR loader joins them), qrels ``query-id<TAB>corpus-id<TAB>score``
under a header line. Rows are read, checked and counted by the ``beir`` reader (a bad row is
skipped with its ``file:line``); a task left with no document or no judged query is an error
naming the first skipped rows, since it could only score zero.

The task it declares, ``coir-ranking``, is evaluated as CoIR's ``COIR.run`` does it
(``structret.evaluation.protocols.CoirRanking``): the whole corpus ranked for each query,
a document whose id equals the query's ignored (BEIR's ``ignore_identical_ids``), pytrec_eval's
``ndcg_cut.10`` per query, averaged over the queries.
"""

from __future__ import annotations

from structret.errors import DataError
from structret.records import COIR_RANKING, MAX_FIELD_CHARS, Dataset

from structret_datasets import beir

READER = "coir"


def read(path: str, *, split: str | None = None, max_field_chars: int = MAX_FIELD_CHARS) -> Dataset:
    """A CoIR task folder (options: structret_datasets.options.Reader); split default ``test``."""
    dataset = beir.read(path, split=split, max_field_chars=max_field_chars)
    stats = dataset.stats
    stats.source = stats.source.replace(beir.READER, READER, 1)
    for what, present in (("document", dataset.corpus), ("judged query", dataset.queries)):
        if not present:
            first = "; ".join(stats.examples) or "no rows at all"
            raise DataError(f"{READER}: {path} gives no usable {what} ({stats.summary()}). First problems: {first}. "
                            f"A CoIR task folder holds {beir.EXPECTED}, rows as CoIR publishes them.")
    dataset.name = READER
    dataset.task = COIR_RANKING
    return dataset
