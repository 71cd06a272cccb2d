"""100k real MiniLM vectors for the ANN benchmarks: Debian's package descriptions as passages.

Documents: every paragraph of every long description in Debian's catalog (both halves: a
corpus to rank against may hold the reserved half, see RESERVED-SOURCES.md), as passage
retrieval splits documents, first ``--docs`` of them in catalog order, each prefixed with its
package name. Queries: the synopses of packages of the open half only, encoded as queries.
Vectors come from the backbone (default ``minilm``, 384-d, unit length)::

    apt-get update -o Acquire::Languages=en      # the long descriptions (Translation-en)
    python benchmarks/data/real_vectors.py --out /work/data/real-vectors/debian-minilm.npz

Writes one ``.npz``: ``doc_ids``, ``docs`` float32 [n, dim], ``query_ids``, ``queries``
float32 [q, dim], ``model``. Takes ~10-20 min of 2 CPU cores; re-running with the same output
path does nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np


def passages(dataset, limit: int) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for name, item in dataset.corpus.items():
        for number, paragraph in enumerate(p.strip() for p in item.content.split("\n\n")):
            if len(paragraph) >= 20:  # "." lines and stubs say nothing
                ids.append(f"{name}#{number}")
                texts.append(f"{name}: {paragraph}")
    if len(ids) < limit:
        sys.exit(f"only {len(ids):,} passages in the catalog (asked for {limit:,}); "
                 "did `apt-get update -o Acquire::Languages=en` run?")
    return ids[:limit], texts[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", default="/var/lib/apt/lists")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.out.exists():
        print(f"{args.out} exists; nothing to do")
        return
    import structret

    both = structret.load_dataset(f"debian-packages:{args.catalog}", half="both")
    open_half = structret.load_dataset(f"debian-packages:{args.catalog}")
    doc_ids, doc_texts = passages(both, args.docs)
    names = sorted(open_half.queries)
    random.Random(0).shuffle(names)
    query_ids = names[: args.queries]
    query_texts = [open_half.queries[n].text for n in query_ids]
    print(f"{len(doc_ids):,} passages from {len(both.corpus):,} packages; {len(query_ids):,} queries "
          f"from the open half's {len(names):,} synopses")
    model = structret.load_model(args.model)
    start = time.perf_counter()
    queries = model.encode_query(query_texts, batch_size=args.batch_size, show_progress=True)
    docs = model.encode_document(doc_texts, batch_size=args.batch_size, show_progress=True)
    print(f"encoded in {time.perf_counter() - start:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".partial.npz")
    np.savez(partial, doc_ids=np.array(doc_ids), docs=docs.astype(np.float32), query_ids=np.array(query_ids),
             queries=queries.astype(np.float32), model=np.array(model.name))
    os.replace(partial, args.out)
    print(f"wrote {args.out}: docs {docs.shape}, queries {queries.shape}")


if __name__ == "__main__":
    main()
