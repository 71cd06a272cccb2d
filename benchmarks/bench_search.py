"""Approximate search against exact: ``hnsw`` vs ``flat`` on real embeddings.

The vectors are all-MiniLM-L6-v2 embeddings of real text: one line per function of the
installed Python packages and standard library (name, parameters and the first line of its
docstring), so they have the clustered, low-intrinsic-dimension shape of a real corpus
(pure Gaussian vectors are the worst case for a graph index and say little). Queries are
embeddings of held-out functions' docstring lines. Encoding 100k lines takes a few minutes
once; the vectors are cached (``--cache``). Prints build time, recall@10 against ``flat``,
bytes per vector (saved size / n) and queries/s two ways, each with its ratio to ``flat``:
all queries in one call (flat is then one BLAS matrix product, its best case) and one query
per call (an online service; flat then streams every stored vector per query). ::

    nice python benchmarks/bench_search.py                    # 100,000 vectors, 1,000 queries
    python benchmarks/bench_search.py --vectors my.npy        # your own [n, d] float32 array
"""

from __future__ import annotations

import argparse
import ast
import os
import site
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

SINGLE = 200  # queries timed one per call

# (label, options): hnsw's default, then settings for higher recall
HNSW = [
    ("hnsw M=16 ef=100 (default)", {}),
    ("hnsw M=16 ef=200", {"ef": 200}),
    ("hnsw M=16 ef=50", {"ef": 50}),
    ("hnsw M=32 ef=200", {"M": 32, "ef": 200}),
]


def reserved_modules() -> set[str]:
    """Top-level module names of the reserved Python packages (../shared/RESERVED-SOURCES.md):
    search settings are chosen on these vectors, so none of them may come from held-out code."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    from code_corpus import RESERVED_FILE, read_reserved

    names = {n.lower().replace("-", "_") for n in read_reserved(RESERVED_FILE).get("python", set())}
    # distributions whose import name differs from their name
    return names | {"dateutil"}  # python-dateutil imports as dateutil


def function_lines(limit: int) -> list[tuple[str, str]]:
    """(index text, docstring line) for functions found under site-packages and the stdlib."""
    roots = [*site.getsitepackages(), sysconfig.get_paths()["stdlib"]]
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    held_out = reserved_modules()
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            if path.relative_to(root).parts[0].lower() in held_out:
                continue
            try:
                tree = ast.parse(path.read_bytes())
            except (SyntaxError, ValueError, OSError, RecursionError):
                continue
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                doc = (ast.get_docstring(node) or "").strip().split("\n")[0]
                params = ", ".join(a.arg for a in node.args.args)
                text = f"{path.stem}.{node.name}({params}) {doc}".strip()
                if text not in seen:  # duplicates (copied helpers) would make recall ambiguous
                    seen.add(text)
                    found.append((text, doc))
            if len(found) >= limit:
                return found[:limit]
    return found


def real_vectors(n: int, queries: int, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    file = cache / f"minilm-functions-{n}-{queries}.npz"
    if file.is_file():
        saved = np.load(file, allow_pickle=False)
        return saved["vectors"], saved["queries"]
    from structret.registry import get_registry

    lines = function_lines(n + 20 * queries)
    if len(lines) < n + queries:
        raise SystemExit(f"only {len(lines)} functions found; lower --n")
    # queries: docstring lines of functions that are not in the index
    held_out = [doc for _, doc in lines[n:] if len(doc.split()) >= 3][:queries]
    encoder = get_registry().create("backbone", "minilm", max_length=64)
    vectors = encoder.encode([text for text, _ in lines[:n]], batch_size=128, show_progress=True)
    query_vectors = encoder.encode(held_out, kind="query", batch_size=128, show_progress=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(file, vectors=vectors, queries=query_vectors)
    return vectors, query_vectors


def timed_index(name: str, options: dict, vectors: np.ndarray, queries: np.ndarray, ids: list[str]):
    from structret.search.saved import load_index
    from structret.registry import get_registry

    index = get_registry().create("index", name, vectors.shape[1], **options)
    start = time.perf_counter()
    index.add(ids, vectors)
    build = time.perf_counter() - start
    index.search(queries[:10], 10)
    start = time.perf_counter()
    _, found = index.search(queries, 10)
    qps = len(queries) / (time.perf_counter() - start)
    singles = queries[:SINGLE]
    start = time.perf_counter()
    for query in singles:
        index.search(query[None], 10)
    single_qps = len(singles) / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        index.save(Path(tmp) / "index")
        size = sum(f.stat().st_size for f in (Path(tmp) / "index").rglob("*") if f.is_file())
        load_index(Path(tmp) / "index")  # what was saved loads
    return build, qps, single_qps, found, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--vectors", help="an .npy [n, d] float32 array to index instead (queries: its last rows)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("STRUCTRET_CACHE", Path.home() / ".cache" / "structret")) / "bench")
    args = parser.parse_args()
    if args.vectors:
        data = np.load(args.vectors, allow_pickle=False).astype(np.float32)
        vectors, queries = data[: -args.queries], data[-args.queries:]
    else:
        vectors, queries = real_vectors(args.n, args.queries, args.cache)
    ids = [str(i) for i in range(len(vectors))]
    import torch

    print(f"{len(vectors)} vectors x {vectors.shape[1]}-d, {len(queries)} queries (one batch), k=10, "
          f"threads {torch.get_num_threads()}")
    rows = []
    build, flat_qps, flat_single, truth, size = timed_index("flat", {}, vectors, queries, ids)
    rows.append(("flat", build, flat_qps, flat_single, 1.0, size))
    for label, options in HNSW:
        build, qps, single, found, size = timed_index("hnsw", options, vectors, queries, ids)
        recall = float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth)]))
        rows.append((label, build, qps, single, recall, size))
    print(f"{'index':28} {'build s':>8} {'recall@10':>9} {'bytes/vector':>12} {'batch q/s':>10} {'x flat':>7} "
          f"{'1-by-1 q/s':>10} {'x flat':>7}")
    for label, build, qps, single, recall, size in rows:
        print(f"{label:28} {build:8.1f} {recall:9.3f} {size / len(vectors):12.0f} {qps:10.0f} {qps / flat_qps:7.1f} "
              f"{single:10.0f} {single / flat_single:7.1f}")


if __name__ == "__main__":
    main()
