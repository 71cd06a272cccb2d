"""What a hybrid index costs: search latency against the same index searched dense-only, and memory.

Documents are real texts: one line per function of the installed Python packages and standard
library (name, parameters, first docstring line; the reserved packages left out, as in
bench_search.py), so BM25 sees a real vocabulary and real posting-list lengths. Queries are
held-out functions' docstring lines, encoded by all-MiniLM-L6-v2 one at a time, as a service
does. The document vectors are random unit vectors: an exact (flat) search costs the same
whatever the values, and encoding 100k texts would take most of the run. Each query is timed
three ways, interleaved: encode alone, encode + dense search, encode + hybrid search (BM25's
top candidates and the vectors' fused, structret.search.fusion). Prints p50/p90 per query, the ratio
hybrid / dense, BM25's fit time, the RSS it adds and its size on disk. ::

    python benchmarks/bench_hybrid.py                  # 100,000 documents, 200 queries
    python benchmarks/bench_hybrid.py --n 20000 --depth 100
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_search import function_lines  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--depth", type=int, default=1000, help="candidates per side (the fusion's default: 1000)")
    args = parser.parse_args()

    import structret
    from structret.search.fusion import Fusion

    lines = function_lines(args.n + args.queries)
    if len(lines) < args.n + args.queries:
        sys.exit(f"found only {len(lines)} functions; ask for fewer with --n")
    docs = [text for text, _ in lines[: args.n]]
    queries = [doc for _, doc in lines[args.n: args.n + args.queries]]
    ids = [f"f{i}" for i in range(args.n)]
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    model = structret.load_model("minilm")
    model.encode_query(["warm up"])
    index = structret.build_index(None, vectors, ids=ids, texts=docs)
    before = rss_mb()
    start = time.perf_counter()
    index.add_lexical("bm25", Fusion(depth=args.depth))
    fit_s = time.perf_counter() - start
    added_mb = rss_mb() - before
    with tempfile.TemporaryDirectory() as tmp:
        index.save(tmp)
        lexical_mb, whole_mb = size_mb(Path(tmp) / "lexical"), size_mb(Path(tmp))

    times = {"encode": [], "dense": [], "hybrid": []}
    lexical = index.lexical
    for i, query in enumerate(queries):
        order = ("dense", "hybrid") if i % 2 == 0 else ("hybrid", "dense")
        for how in order:
            start = time.perf_counter()
            vector = model.encode_query([query])
            encoded = time.perf_counter()
            if how == "dense":
                index.lexical = None
                index.search_vectors(vector, args.k)
                index.lexical = lexical
            else:
                index.search_vectors(vector, args.k, texts=[query])
            done = time.perf_counter()
            times[how].append(done - start)
            times["encode"].append(encoded - start)

    def pct(values, q):
        return 1000 * float(np.percentile(values, q))

    flags = open("/proc/cpuinfo").read()
    kind = "amx_bf16" if "amx_bf16" in flags else ("avx512_bf16" if "avx512_bf16" in flags else "avx2, no bf16")
    print(f"{args.n} documents (real function lines, random unit vectors), {args.queries} queries one at a time, "
          f"k={args.k}, fusion depth {args.depth}; CPU flags: {kind}; {os.cpu_count()} cores")
    print(f"{'per query':<34}{'p50 ms':>9}{'p90 ms':>9}{'x dense':>9}")
    dense50 = pct(times["dense"], 50)
    print(f"{'encode alone':<34}{pct(times['encode'], 50):>9.2f}{pct(times['encode'], 90):>9.2f}{'':>9}")
    for how in ("dense", "hybrid"):
        label = "encode + flat search" if how == "dense" else "encode + flat + BM25, fused"
        print(f"{label:<34}{pct(times[how], 50):>9.2f}{pct(times[how], 90):>9.2f}{pct(times[how], 50) / dense50:>9.2f}")
    print(f"BM25 fit {fit_s:.1f} s; RSS +{added_mb:.0f} MB in this process; on disk {lexical_mb:.1f} MB "
          f"(the whole index {whole_mb:.1f} MB)")


if __name__ == "__main__":
    main()
