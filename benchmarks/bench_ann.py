"""Approximate search against exact: recall@10 and queries per second of flat, hnsw and usearch.

The same vectors in each index, built through structret's plugins; the flat index, run in the
same process, gives the true top 10 and the QPS every ratio is taken against. hnsw (hnswlib)
is swept over ef with M 16 and 32, usearch over expansion_search with f32, bf16 and i8
vectors. Each configuration is timed two ways: all queries in one call (batched, --threads
threads) and one query per call (--one-by-one queries). Prints a table, the fastest
configuration with recall@10 >= --target (batched), and draws the recall/QPS curves. ::

    # 100k real MiniLM vectors (benchmarks/data/real_vectors.py writes them)
    python benchmarks/bench_ann.py --vectors /work/data/real-vectors/debian-minilm.npz
    python benchmarks/bench_ann.py                    # clustered synthetic vectors, 100k x 384
    python benchmarks/bench_ann.py --n 20000 --quick  # a smoke run

    python benchmarks/bench_ann.py --vectors V.npz --only "hnsw M=32 efc=400" --plot ""   # one family

Threads: flat's BLAS (set before numpy loads) and the graphs' builds and searches use
--threads. The batched timing is the best of --repeats runs. About 4-5 minutes on 2 idle
cores for 100k vectors for the first five graphs, most of it building them; the sixth
(M=32, ef_construction=400) adds a build of about 110 s and its sweep.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _threads_from_argv() -> str:
    # BLAS reads its thread count when numpy is imported, so set it before
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "2"


for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv()

import numpy as np  # noqa: E402

from structret.registry import get_registry  # noqa: E402

K = 10
HNSW_EFS = (10, 20, 32, 48, 64, 96, 128, 200, 300)
USEARCH_EXPANSIONS = (10, 20, 32, 48, 64, 96, 128, 200, 300)
QUICK = (16, 64, 200)


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 200 centers (as benchmarks/bench_indexes.py makes them)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(200, dim))
    points = centers[rng.integers(200, size=n)] + 0.7 * rng.normal(size=(n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def read_vectors(args) -> tuple[np.ndarray, np.ndarray, str]:
    if args.vectors is None:
        return clustered(args.n, 384, 0), clustered(args.queries, 384, 1), "clustered synthetic unit vectors"
    with np.load(args.vectors, allow_pickle=False) as data:
        docs, queries = data["docs"][: args.n], data["queries"][: args.queries]
        model = str(data["model"]) if "model" in data else "?"
    return (np.ascontiguousarray(docs, dtype=np.float32), np.ascontiguousarray(queries, dtype=np.float32),
            f"{args.vectors} ({model})")


def timed_batched(index, queries: np.ndarray, repeats: int) -> tuple[float, list[list[str]]]:
    """(queries per second, ids), the best of ``repeats`` calls with every query at once."""
    index.search(queries[:8], K)  # warm up
    best, found = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        _, found = index.search(queries, K)
        best = min(best, time.perf_counter() - start)
    return len(queries) / best, found


def timed_one_by_one(index, queries: np.ndarray) -> float:
    start = time.perf_counter()
    for row in range(len(queries)):
        index.search(queries[row : row + 1], K)
    return len(queries) / (time.perf_counter() - start)


def recall(found: list[list[str]], truth: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(t)) / K for f, t in zip(found, truth)]))


def build(name: str, docs: np.ndarray, ids: list[str], **options):
    index = get_registry().create("index", name, docs.shape[1], **options)
    start = time.perf_counter()
    for s in range(0, len(docs), 20_000):
        index.add(ids[s : s + 20_000], docs[s : s + 20_000])
    return index, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", help="an .npz with docs and queries (benchmarks/data/real_vectors.py); "
                                          "default: clustered synthetic vectors")
    parser.add_argument("--n", type=int, default=100_000, help="documents (the first N)")
    parser.add_argument("--queries", type=int, default=1_000, help="queries (the first N)")
    parser.add_argument("--one-by-one", type=int, default=200, help="queries timed one per call")
    parser.add_argument("--threads", type=int, default=2, help="search threads (and BLAS threads for flat)")
    parser.add_argument("--repeats", type=int, default=3, help="batched timings; the best counts")
    parser.add_argument("--target", type=float, default=0.98, help="recall@10 the best configuration must reach")
    parser.add_argument("--quick", action="store_true", help=f"sweep only {QUICK} and skip M=32 (a smoke run)")
    parser.add_argument("--only", action="append", metavar="LABEL",
                        help='run only this family (repeatable), as labelled in the table: --only "hnsw M=32 efc=400"')
    parser.add_argument("--plot", default=os.path.join(os.path.dirname(__file__), "ann-curve.png"),
                        help="where to draw the recall/QPS curves (empty: no plot)")
    args = parser.parse_args()

    docs, queries, source = read_vectors(args)
    ids = [f"d{i}" for i in range(len(docs))]
    single = queries[: args.one_by_one]
    print(f"{len(docs):,} documents x {docs.shape[1]}-d, {len(queries):,} queries, k={K}, {args.threads} search "
          f"threads; {source}", flush=True)

    flat, _ = build("flat", docs, ids)
    flat_qps, truth = timed_batched(flat, queries, args.repeats)
    flat_single = timed_one_by_one(flat, single)
    rows = [("flat", "-", 1.0, flat_qps, flat_single, 0.0)]
    print(f"flat: {flat_qps:,.0f} q/s batched, {flat_single:,.0f} q/s one by one", flush=True)

    sweep = QUICK if args.quick else None
    families = [("hnsw", "hnsw M=16", {"M": 16, "threads": args.threads}, "ef", sweep or HNSW_EFS)]
    families += [("usearch", f"usearch {dtype}", {"dtype": dtype, "threads": args.threads}, "expansion_search",
                  sweep or USEARCH_EXPANSIONS) for dtype in ("f32", "bf16", "i8")]
    if not args.quick:  # the slowest builds last
        families.append(("hnsw", "hnsw M=32", {"M": 32, "threads": args.threads}, "ef", HNSW_EFS))
        # a better graph (ef_construction 400, not the default 200) reaches a recall at a smaller search beam
        families.append(("hnsw", "hnsw M=32 efc=400", {"M": 32, "ef_construction": 400, "threads": args.threads},
                         "ef", HNSW_EFS))
    if args.only:
        unknown = set(args.only) - {label for _, label, *_ in families}
        if unknown:
            parser.error(f"--only {', '.join(sorted(unknown))}: the families are "
                         f"{', '.join(label for _, label, *_ in families)}")
        families = [f for f in families if f[1] in args.only]
    for name, label, options, knob, values in families:
        index, build_seconds = build(name, docs, ids, **options)
        print(f"{label}: built in {build_seconds:.1f} s", flush=True)
        for value in values:
            setattr(index, knob, value)  # the search beam; read at each search
            qps, found = timed_batched(index, queries, args.repeats)
            rows.append((label, f"{knob}={value}", recall(found, truth), qps, timed_one_by_one(index, single),
                         build_seconds))
            print(f"  {knob}={value}: recall@10 {rows[-1][2]:.4f}, {qps:,.0f} q/s batched "
                  f"({qps / flat_qps:.1f}x flat), {rows[-1][4]:,.0f} one by one", flush=True)
        del index
    # timed again last: a machine whose load changed during the run shows it here
    again, again_single = timed_batched(flat, queries, args.repeats)[0], timed_one_by_one(flat, single)
    print(f"flat again at the end: {again:,.0f} q/s batched ({again / flat_qps:.2f}x the first timing), "
          f"{again_single:,.0f} one by one ({again_single / flat_single:.2f}x); ratios below use the first",
          flush=True)

    print(f"\n{'index':<14} {'setting':<22} {'recall@10':>9} {'batched q/s':>12} {'x flat':>7} "
          f"{'1-by-1 q/s':>11} {'x flat':>7} {'build s':>8}")
    for label, setting, got, qps, one, seconds in rows:
        print(f"{label:<14} {setting:<22} {got:>9.4f} {qps:>12,.0f} {qps / flat_qps:>7.1f} {one:>11,.0f} "
              f"{one / flat_single:>7.1f} {seconds:>8.1f}")
    good = [r for r in rows[1:] if r[2] >= args.target]
    if good:
        best = max(good, key=lambda r: r[3])
        print(f"\nfastest batched with recall@10 >= {args.target}: {best[0]} {best[1]}: recall@10 {best[2]:.4f}, "
              f"{best[3]:,.0f} q/s = {best[3] / flat_qps:.1f}x flat batched ({best[4] / flat_single:.1f}x flat one "
              f"by one)")
        best_single = max(good, key=lambda r: r[4])
        print(f"fastest one by one with recall@10 >= {args.target}: {best_single[0]} {best_single[1]}: "
              f"{best_single[4]:,.0f} q/s = {best_single[4] / flat_single:.1f}x flat one by one")
    else:
        print(f"\nno configuration reached recall@10 >= {args.target}")
    if args.plot:
        plot(rows, args.plot, f"{len(docs):,} x {docs.shape[1]}-d, {len(queries):,} queries, {args.threads} threads")
        print(f"curves: {args.plot}")


def plot(rows, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharex=True)
    for column, (axis, what) in enumerate(zip(axes, ("batched", "one by one"))):
        flat = rows[0][3 + column]
        for label in dict.fromkeys(r[0] for r in rows[1:]):
            points = [(r[2], r[3 + column]) for r in rows if r[0] == label]
            axis.plot([p[0] for p in points], [p[1] / flat for p in points], marker="o", markersize=3, label=label)
        axis.axhline(1.0, color="gray", linewidth=1, label="flat (exact)")
        axis.axvline(0.98, color="gray", linestyle=":", linewidth=1)
        axis.set_yscale("log")
        axis.set_xlabel("recall@10")
        axis.set_ylabel("QPS / flat QPS")
        axis.set_title(f"{what}: {title}", fontsize=9)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
