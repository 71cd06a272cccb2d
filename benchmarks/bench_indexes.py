"""Index throughput: flat, hnsw and milvus (Lite, FLAT and HNSW) on the same vectors.

Clustered random vectors (points around 200 centers, unit length, as a normalizing encoder
gives) in 384 dimensions, MiniLM's. Prints add and search throughput, the ratio to flat,
recall@10 against flat, and save and load times. Milvus HNSW is searched after the save,
once its vectors are sealed and indexed (before that Milvus searches them exhaustively). ::

    nice -n 19 python benchmarks/bench_indexes.py            # 20,000 vectors, 1,000 queries
    python benchmarks/bench_indexes.py --n 100000 --queries 2000

Needs ``pip install 'structret[milvus]'`` for the milvus rows.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from structret.search.saved import load_index
from structret.registry import get_registry

CASES = {
    "flat": ("flat", {}),
    "hnsw": ("hnsw", {}),
    "milvus FLAT": ("milvus", {"index_type": "FLAT"}),
    "milvus HNSW": ("milvus", {"index_type": "HNSW"}),
}


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(200, dim))
    points = centers[rng.integers(200, size=n)] + 0.7 * rng.normal(size=(n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=5_000, help="vectors per add call")
    args = parser.parse_args()
    vectors, queries = clustered(args.n, args.dim, 0), clustered(args.queries, args.dim, 1)
    ids = [f"doc{i}" for i in range(args.n)]
    rows, truth = [], None
    for label, (name, options) in CASES.items():
        index = get_registry().create("index", name, args.dim, **options)
        start = time.perf_counter()
        for s in range(0, args.n, args.batch):
            index.add(ids[s : s + args.batch], vectors[s : s + args.batch])
        add = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            index.save(Path(tmp) / "idx")
            save = time.perf_counter() - start
            start = time.perf_counter()
            loaded = load_index(Path(tmp) / "idx")
            load = time.perf_counter() - start
            search_index = loaded
            search_index.search(queries[:10], 10)  # warm up
            start = time.perf_counter()
            _, found = search_index.search(queries, 10)
            search = time.perf_counter() - start
            for made in (index, loaded):
                getattr(made, "close", lambda: None)()
        truth = truth or found
        recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)])
        rows.append((label, args.n / add, args.queries / search, recall, save, load))
        print(f"{label}: done", flush=True)

    flat_add, flat_search = rows[0][1], rows[0][2]
    print(f"\n{args.n} vectors x {args.dim}-d, {args.queries} queries, k=10, batches of {args.batch}")
    print(f"{'index':<12} {'add vec/s':>10} {'x flat':>7} {'search q/s':>11} {'x flat':>7} {'recall@10':>9} "
          f"{'save s':>7} {'load s':>7}")
    for label, add, search, recall, save, load in rows:
        print(f"{label:<12} {add:>10,.0f} {add / flat_add:>7.3f} {search:>11,.0f} {search / flat_search:>7.3f} "
              f"{recall:>9.3f} {save:>7.2f} {load:>7.2f}")


if __name__ == "__main__":
    main()
