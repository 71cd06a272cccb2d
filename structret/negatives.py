"""ANCE-style hard negatives: each query's top-ranked documents from the model's own index,
minus its positives, written as Tevatron training lines for the ``dr`` objective."""

from __future__ import annotations

import gzip
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structret.records import CodeRecord, Dataset, ItemRecord


@dataclass
class NegativesReport:
    queries: int = 0
    written: int = 0
    no_negatives: int = 0
    positives_in_top: int = 0
    out: str = ""

    def summary(self) -> str:
        return (
            f"hard negatives: {self.queries} queries = {self.written} written + {self.no_negatives} "
            f"without any negative; a positive was in the top-k for {self.positives_in_top}; wrote {self.out}"
        )


def _passage(dataset: Dataset, doc_id: str) -> dict[str, str]:
    # Tevatron keeps the title apart; readers join "title text" back, as record.text() does
    record = dataset.corpus[doc_id]
    if isinstance(record, CodeRecord):
        return {"docid": doc_id, "title": "", "text": record.code}
    if isinstance(record, ItemRecord):
        return {"docid": doc_id, "title": record.title, "text": record.content}
    return {"docid": doc_id, "title": record.title, "text": record.text_}


def mine_negatives(backbone: Any, dataset: Dataset, out: str | os.PathLike, *, depth: int = 100,
                   keep: int = 30, seed: int = 0, batch_size: int = 32, index: str = "flat",
                   show_progress: bool = True) -> NegativesReport:
    """Rank the corpus for every judged query, drop its positives, keep ``keep`` of the top ``depth``.

    SANTA (following ANCE) samples its hard negatives at random from the top 100 of its
    own index; sampling ``keep`` of them here, seeded, keeps the file small while the
    ``dr`` objective still draws from a pool the model found hard.
    """
    from structret.registry import get_registry

    doc_ids = list(dataset.corpus)
    vectors = backbone.encode([dataset.corpus[d].text() for d in doc_ids], kind="document",
                              batch_size=batch_size, show_progress=show_progress)
    idx = get_registry().create("index", index, int(vectors.shape[1]))
    idx.add(doc_ids, vectors)
    qids = [q for q in dataset.queries if any(g > 0 for g in dataset.qrels.get(q, {}).values())]
    query_vectors = backbone.encode([dataset.queries[q].text for q in qids], kind="query",
                                    batch_size=batch_size, show_progress=show_progress)
    _, ranked = idx.search(query_vectors, depth)
    rng = random.Random(seed)
    report = NegativesReport(queries=len(qids), out=str(out))
    tmp = Path(f"{out}.tmp")
    opener = gzip.open if str(out).endswith(".gz") else open
    with opener(tmp, "wt", encoding="utf-8") as f:
        for qid, top in zip(qids, ranked):
            positives = {d for d, g in dataset.qrels[qid].items() if g > 0}
            if positives & set(top):
                report.positives_in_top += 1
            negatives = [d for d in top if d not in positives]
            if not negatives:
                report.no_negatives += 1
                continue
            chosen = rng.sample(negatives, min(keep, len(negatives)))
            f.write(json.dumps({
                "query_id": qid,
                "query": dataset.queries[qid].text,
                "positive_passages": [_passage(dataset, d) for d in sorted(positives)],
                "negative_passages": [_passage(dataset, d) for d in chosen],
            }) + "\n")
            report.written += 1
    os.replace(tmp, out)
    return report
