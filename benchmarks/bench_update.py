"""Adding documents to a big saved index: what one ``structret.update_index`` costs, by index size.

Writes a flat (or ``--kind usearch``) index of N random 384-d vectors with a short text each (1M: 1.5 GB
of vectors),
then times, each in a fresh process (as ``structret index --out IDX --add ...`` runs):

1. ``update_index(IDX, add=ENC)``: 1,000 new vectors from an encode folder, three times in a row
   (the 2nd and 3rd add to an index that an update already wrote);
2. a load of the updated index and one search (the segments read back);
3. ``structret verify IDX`` at the end: every file hashed, so the updates left a consistent index.

The peer is the same update at a tenth of the size, in the same run: an update that is O(added)
costs about the same at both sizes, an O(index) one about ten times more. ::

    python benchmarks/bench_update.py --n 1000000 --work /tmp/bench-update
    python benchmarks/bench_update.py --kind usearch --n 200000 --work /tmp/bench-update-usearch
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

UPDATE = "import structret, sys; structret.update_index(sys.argv[1], add=sys.argv[2], show_progress=False)"
SEARCH = ("import structret, sys, numpy as np; i = structret.load_index(sys.argv[1]); "
          "print(len(i), i.index.search(np.ones((1, 384), dtype=np.float32), 5)[1][0])")


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def build(work: Path, n: int, add: int, kind: str) -> tuple[Path, list[Path]]:
    import numpy as np

    from structret.api import SearchIndex
    from structret.embeddings import encode_resumably
    from structret.registry import get_registry

    index = get_registry().create("index", kind, 384)
    rng = np.random.default_rng(0)
    texts = {}
    for start in range(0, n, 100_000):
        rows = min(100_000, n - start)
        ids = [f"d{i}" for i in range(start, start + rows)]
        index.add(ids, rng.standard_normal((rows, 384), dtype=np.float32))
        texts.update((i, f"def function_{i}(): return {i}") for i in ids)
    SearchIndex(index, meta={"model": "random"}, texts=texts).save(work / "idx")
    batches = []
    for b in range(3):
        ids = [f"new{b}-{i}" for i in range(add)]
        vectors = rng.standard_normal((add, 384), dtype=np.float32)
        rows = {i: v for i, v in zip(ids, vectors)}
        encode_resumably(work / f"add{b}", ids, [f"def added_{i}(): pass" for i in ids],
                         lambda texts, rows=rows, ids=ids: np.stack([rows[i] for i in ids[:len(texts)]]),
                         {"backbone": "random", "model": "random", "what": "documents"}, show_progress=False)
        batches.append(work / f"add{b}")
    return work / "idx", batches


def measure(work: Path, n: int, add: int, kind: str) -> dict[str, float]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    start = time.perf_counter()
    idx, batches = build(work, n, add, kind)
    built = time.perf_counter() - start
    env = {**os.environ, "STRUCTRET_CACHE": str(work / "cache")}
    load = timed([sys.executable, "-c", SEARCH, str(idx)], env)  # first load: hashes, leaves the stamp
    result = {"build": built, "first load + search": load}
    for b, batch in enumerate(batches, 1):
        result[f"update {b}"] = timed([sys.executable, "-c", UPDATE, str(idx), str(batch)], env)
    result["load + search after"] = timed([sys.executable, "-c", SEARCH, str(idx)], env)
    verify = Path(sys.executable).with_name("structret")
    result["structret verify"] = timed([str(verify), "verify", str(idx)], env)
    result["bytes"] = sum(f.stat().st_size for f in idx.rglob("*") if f.is_file())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--add", type=int, default=1000)
    parser.add_argument("--work", default="/tmp/bench-update")
    parser.add_argument("--kind", default="flat", choices=["flat", "usearch"])
    args = parser.parse_args()
    sizes = [args.n // 10, args.n]
    results = {n: measure(Path(args.work) / str(n), n, args.add, args.kind) for n in sizes}
    print(f"adding {args.add} vectors to a {args.kind} index (seconds, fresh process each, python start included)")
    print(f"{'':24s}" + "".join(f"{n:>14,d}" for n in sizes) + "   ratio")
    for key in results[sizes[0]]:
        small, big = results[sizes[0]][key], results[sizes[1]][key]
        cell = (lambda v: f"{v / 1e9:13.2f}G") if key == "bytes" else (lambda v: f"{v:14.2f}")
        print(f"{key:24s}{cell(small)}{cell(big)}   {big / small:5.1f}x")


if __name__ == "__main__":
    main()
