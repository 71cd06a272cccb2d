"""flat's batched search against the matrix product it is built on: how close to the matmul rate.

The roofline of an exact search of Q queries over N vectors of dimension d is the product
Q x d @ d x N (2QdN FLOPs); everything else (the top-k, the merge, the ids) is overhead. This
times, in one process and interleaved, the bare product in torch (fp32, and bf16 where the CPU
has it), structret's flat index with ``scoring=fp32`` and ``scoring=bf16``, and the numpy
search flat ran before (argpartition, single-threaded), all on the same clustered unit vectors,
and prints each as GFLOP/s and as a share of the fp32 product's rate. One query per call is
timed too (a product of one row is memory-bound: its rate is not the roofline). ::

    python benchmarks/bench_flat.py                    # 100k x 384, 1,000 queries, k = 10
    python benchmarks/bench_flat.py --n 1000000        # 1M vectors (1.5 GB fp32 + 0.75 GB bf16)
    python benchmarks/bench_flat.py --vectors V.npz    # real vectors (benchmarks/data/real_vectors.py)
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 200 centers (as bench_ann.py makes them)."""
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(0).normal(size=(200, dim))
    points = centers[rng.integers(200, size=n)] + 0.7 * rng.normal(size=(n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def numpy_search(vectors: np.ndarray, queries: np.ndarray, k: int, chunk: int = 65536) -> np.ndarray:
    """What flat did before: numpy's product per 64 MB block of scores, argpartition, a sort per merge."""

    def top_k(scores: np.ndarray, k: int) -> np.ndarray:  # flat's old kernel: the k best columns, unordered
        width = scores.shape[1]
        if k >= width:
            return np.broadcast_to(np.arange(width), scores.shape).copy()
        return np.argpartition(scores, width - k, axis=1)[:, width - k :]

    step = max(1, (1 << 24) // chunk)
    out = []
    for start in range(0, len(queries), step):
        block = queries[start : start + step]
        best = np.empty((len(block), 0), dtype=np.int64)
        for first in range(0, len(vectors), chunk):
            best = np.concatenate([best, top_k(block @ vectors[first : first + chunk].T, k) + first], axis=1)
        out.append(best)
    return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one-by-one", type=int, default=200, help="queries timed one per call")
    parser.add_argument("--vectors", help=".npz with docs and queries (benchmarks/data/real_vectors.py)")
    args = parser.parse_args()

    from structret import precision
    from structret.registry import get_registry

    if args.vectors:
        with np.load(args.vectors) as data:
            docs = np.ascontiguousarray(data["docs"][: args.n], dtype=np.float32)
            queries = np.ascontiguousarray(data["queries"][: args.queries], dtype=np.float32)
    else:
        docs, queries = clustered(args.n, 384, 1), clustered(args.queries, 384, 2)
    n, dim = docs.shape
    ids = [str(i) for i in range(n)]
    native = any(getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                          "_is_amx_tile_supported"))
    indexes = {scoring: get_registry().create("index", "flat", dim=dim, scoring=scoring) for scoring in (("fp32", "bf16") if native else ("fp32",))}
    for index in indexes.values():
        index.add(ids, docs)
    d, q = torch.from_numpy(docs), torch.from_numpy(queries)
    db, qb = d.bfloat16(), q.bfloat16()
    systems = {"product fp32 (the roofline)": lambda: q @ d.T}
    if native:
        systems["product bf16"] = lambda: qb @ db.T
    for scoring, index in indexes.items():
        systems[f"flat scoring={scoring}"] = lambda i=index: i.search(queries, args.k)
    systems["flat before (numpy, argpartition)"] = lambda: numpy_search(docs, queries, args.k)
    times: dict[str, list[float]] = {name: [] for name in systems}
    with torch.inference_mode():
        for run in systems.values():
            run()  # warm-up: the bf16 copy, kernel selection
        for _ in range(args.rounds):
            for name, run in systems.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    flops = 2 * len(queries) * dim * n
    best = {name: min(samples) for name, samples in times.items()}
    roof = best["product fp32 (the roofline)"]
    exact = {s: i.search(queries, args.k)[1] for s, i in indexes.items()}
    same = all(found == exact["fp32"] for found in exact.values())
    print(f"{n} x {dim} vectors, {len(queries)} queries, k={args.k}, torch threads {torch.get_num_threads()}, "
          f"best of {args.rounds} interleaved rounds; CPU {precision.cpu_model()}")
    print(f"{'system':36} {'seconds':>8} {'queries/s':>10} {'GFLOP/s':>8} {'of fp32 product':>16}")
    for name, seconds in best.items():
        print(f"{name:36} {seconds:8.3f} {len(queries) / seconds:10.0f} {flops / seconds / 1e9:8.1f} "
              f"{roof / seconds:16.0%}")
    print(f"median of rounds: " + ", ".join(f"{k} {statistics.median(v):.3f} s" for k, v in times.items()))
    print(f"flat scoring=bf16 and scoring=fp32 return the same ids: {same}; scoring=auto here: "
          f"{'bf16' if precision.bf16_matmul_faster() else 'fp32'}")
    for scoring, index in indexes.items():
        one = queries[: args.one_by_one]
        start = time.perf_counter()
        for row in one:
            index.search(row[None], args.k)
        print(f"flat scoring={scoring}, one query per call: {len(one) / (time.perf_counter() - start):.0f} queries/s")


if __name__ == "__main__":
    main()
