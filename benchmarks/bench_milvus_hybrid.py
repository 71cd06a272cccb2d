"""How far a hybrid index on Milvus ranks from structret's own hybrid over the same vectors and texts.

The six-language corpus' validation split (docs/results.md, "Multi-language code data": 1,800
functions, 1,800 queries, one pool), MiniLM's vectors (encoded once, kept in STRUCTRET_CACHE),
built twice with ``structret.build_index``: ``flat`` with structret's lexical side (BM25 in
numpy) and ``milvus`` (Milvus Lite) holding the lexical side itself (each of the retriever's fields
in a BM25 Function's sparse field of its own, searched with ``hybrid_search`` and summed with the
retriever's weights); both fused by structret.search.fusion. For each lexical retriever and fusion: MRR@100 of both, the share of
queries whose top 10 are the same ids in the same order, and the mean overlap of the two top-10
sets. ``lexical alone`` (fusion weight 1) and ``dense alone`` (weight 0) separate the two sides'
share of the difference. ::

    python benchmarks/bench_milvus_hybrid.py --data 'codesearchnet:/work/data/code/ablation/*.jsonl.gz'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def mrr(hits, relevant: dict[str, int], depth: int = 100) -> float:
    for rank, hit in enumerate(hits[:depth], 1):
        if relevant.get(hit.id, 0) > 0:
            return 1.0 / rank
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="codesearchnet:/work/data/code/ablation/*.jsonl.gz")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--lexical", nargs="+", default=["bm25-fields", "bm25"])
    parser.add_argument("--fusions", nargs="+", default=["zscore:0.4", "rrf:0.5", "zscore:1", "zscore:0"],
                        help="zscore:0.4 is the fusion tuned for bm25-fields+minilm on this split (zero-shot.json)")
    parser.add_argument("--out", help="write the table as JSON here too")
    args = parser.parse_args()

    import numpy as np

    import structret
    from structret.artifacts import cache_dir
    from structret.datasets import load_dataset
    from structret.search.build import build_index, lexical_reader
    from structret.vector_cache import VectorCache, cache_key

    dataset = load_dataset(args.data, args.split)
    model = structret.load_model(args.model)
    ids = list(dataset.corpus)
    docs = [model.text(r, "document") for r in dataset.corpus.values()]
    qids = [q for q in dataset.queries if dataset.qrels.get(q)]
    queries = [model.text(dataset.queries[q], "query") for q in qids]
    fingerprint = model.backbone.fingerprint()
    vectors = {}
    for kind, texts in (("document", docs), ("query", queries)):
        cache = VectorCache(cache_dir(), cache_key(fingerprint, kind, model.text_format.name or ""))
        vectors[kind] = cache.encode(texts, lambda batch, kind=kind: model.backbone.encode(
            batch, kind=kind, batch_size=32, show_progress=True))
        print(f"{kind}: {cache.summary()}", file=sys.stderr)

    rows = []
    for lexical in args.lexical:
        reader = lexical_reader(lexical)
        readings = [reader(r) for r in dataset.corpus.values()] if reader is not None else None
        for fusion in args.fusions:
            hits, built = {}, {}
            for kind in ("flat", "milvus"):
                started = time.perf_counter()
                index = build_index(None, vectors["document"], ids=ids, texts=docs, readings=readings, kind=kind,
                                    lexical=lexical, fusion=fusion, show_progress=False)
                built[kind] = time.perf_counter() - started
                started = time.perf_counter()
                hits[kind] = index.search_vectors(vectors["query"], 100, texts=queries)
                built[kind + " search"] = time.perf_counter() - started
                close = getattr(index.index, "close", None)
                if close is not None:
                    close()
            scores = {kind: float(np.mean([mrr(h, dataset.qrels[q]) for q, h in zip(qids, hits[kind])]))
                      for kind in hits}
            same = np.mean([[h.id for h in a[:10]] == [h.id for h in b[:10]]
                            for a, b in zip(hits["flat"], hits["milvus"])])
            overlap = np.mean([len({h.id for h in a[:10]} & {h.id for h in b[:10]}) / 10
                               for a, b in zip(hits["flat"], hits["milvus"])])
            row = {"lexical": lexical, "fusion": fusion, "mrr100_structret": scores["flat"],
                   "mrr100_milvus": scores["milvus"], "same_top10": float(same), "top10_overlap": float(overlap),
                   "seconds": {k: round(v, 2) for k, v in built.items()}}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)

    print(f"{args.split} split of {args.data}: {len(ids)} functions, {len(qids)} queries; model {args.model}; "
          f"Milvus Lite against structret's flat hybrid over the same vectors and texts")
    print(f"{'lexical':12} {'fusion':11} {'MRR@100 structret':>18} {'MRR@100 milvus':>15} {'same top 10':>12} "
          f"{'top-10 overlap':>15}")
    for row in rows:
        print(f"{row['lexical']:12} {row['fusion']:11} {100 * row['mrr100_structret']:18.2f} "
              f"{100 * row['mrr100_milvus']:15.2f} {100 * row['same_top10']:11.1f}% {100 * row['top10_overlap']:14.1f}%")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"data": args.data, "split": args.split, "model": args.model, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
