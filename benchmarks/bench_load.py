"""Loading a big index and showing one search's hits: texts read by id (their lookup) against read whole.

Writes a flat index of N random 384-d vectors (1M: 1.5 GB) with a real function's code as each text
(the six-language corpus' functions, cycled: 1M texts are ~2.3 GB of code) through
``SearchIndex.save``, and beside it the same index as the previous structret wrote it (one gzip
stream of texts, no lookup; the vectors hard-linked): the peer. Then, each in a fresh process, in
turns, times ``structret.load_index(IDX)`` and one search showing its ten hits' texts:

* warm: the index's files in the page cache (each load just ran once);
* cold: every file of the index (and its checksum stamp) dropped from the page cache first
  (``posix_fadvise(DONTNEED)``; python, numpy and structret's own files stay cached, as on a
  machine that has run structret before).

The checksum stamp is written by a first load before the timings (bench_verify.py times that). ::

    python benchmarks/bench_load.py --n 1000000 --work /tmp/bench-load
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# prints the phases' seconds as JSON: python + import structret, load_index, one search with its texts
RUN = """
import time; start = time.perf_counter()
import sys, json, numpy as np, structret
imported = time.perf_counter()
index = structret.load_index(sys.argv[1])
loaded = time.perf_counter()
hits = index.search_vectors(np.ones((1, 384), dtype=np.float32), 10)[0]
shown = sum(len(h.text) for h in hits)
done = time.perf_counter()
print(json.dumps({"import": imported - start, "load": loaded - imported, "search": done - loaded, "chars": shown}))
"""


def corpus_texts(data: str, limit: int) -> list[str]:
    texts: list[str] = []
    for file in sorted(glob.glob(data)):
        with gzip.open(file, "rt", encoding="utf-8") as rows:
            texts += [json.loads(row)["code"] for row in rows]
        if len(texts) >= limit:
            break
    return texts[:limit]


def build(work: Path, n: int, data: str) -> tuple[Path, Path]:
    import numpy as np

    from structret.api import SearchIndex
    from structret.artifacts import write_checksums
    from structret.registry import get_registry
    from structret.search.texts import TEXTS_FILE

    new, old = work / "idx", work / "idx-whole-texts"
    if (new / "checksums.json").is_file() and (old / "checksums.json").is_file():
        return new, old
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    code = corpus_texts(data, n)
    ids = [f"f{i}" for i in range(n)]
    texts = {i: code[k % len(code)] for k, i in enumerate(ids)}
    index = get_registry().create("index", "flat", 384)
    rng = np.random.default_rng(0)
    for start in range(0, n, 100_000):
        rows = min(100_000, n - start)
        index.add(ids[start:start + rows], rng.standard_normal((rows, 384), dtype=np.float32))
    started = time.perf_counter()
    SearchIndex(index, meta={"model": "random vectors"}, texts=texts).save(new)
    print(f"written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    old.mkdir()
    for file in new.iterdir():
        if file.is_file() and file.name not in (TEXTS_FILE, "texts.lookup", "checksums.json"):
            os.link(file, old / file.name)
    with gzip.open(old / TEXTS_FILE, "wt", encoding="utf-8", compresslevel=6) as f:  # as structret wrote it before
        for i, t in texts.items():
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    write_checksums(old)
    return new, old


def drop_from_cache(folder: Path, cache: Path) -> None:
    for file in [*folder.rglob("*"), *cache.rglob("*")]:
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed(folder: Path, env: dict[str, str]) -> dict[str, float]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", RUN, str(folder)], env=env, check=True, capture_output=True, text=True)
    phases = json.loads(out.stdout)
    phases["process"] = time.perf_counter() - started
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--work", default="/tmp/bench-load")
    parser.add_argument("--data", default="/work/data/code/ablation/*.jsonl.gz",
                        help="codesearchnet-style .jsonl.gz files whose 'code' fields become the texts")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    work = Path(args.work)
    new, old = build(work, args.n, args.data)
    cache = work / "cache"
    env = {**os.environ, "STRUCTRET_CACHE": str(cache)}
    for folder in (new, old):
        timed(folder, env)  # the checksum stamp, and the files in the page cache
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for state in ("warm", "cold"):
            for name, folder in (("lookup", new), ("whole", old)):
                if state == "cold":
                    drop_from_cache(folder, cache)
                results.setdefault((name, state), []).append(timed(folder, env))

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    size = {name: sum(f.stat().st_size for f in folder.glob("texts*")) for name, folder in (("lookup", new),
                                                                                           ("whole", old))}
    print(f"flat index of {args.n:,} functions (384-d random vectors, real code as texts); each a fresh process, "
          f"median of {args.rounds}; texts on disk: {size['lookup'] / 1e6:.0f} MB with lookup, "
          f"{size['whole'] / 1e6:.0f} MB whole")
    print(f"{'':14}{'import':>8}{'load':>8}{'search':>8}{'load+search':>13}{'process':>9}")
    for state in ("warm", "cold"):
        for name in ("lookup", "whole"):
            rows = results[(name, state)]
            print(f"{state + ' ' + name:14}" + "".join(f"{median(rows, key):8.2f}" for key in ("import", "load", "search"))
                  + f"{statistics.median(r['load'] + r['search'] for r in rows):13.2f}{median(rows, 'process'):9.2f}")
        ratio = (median(results[("whole", state)], "load") + median(results[("whole", state)], "search")) / (
            median(results[("lookup", state)], "load") + median(results[("lookup", state)], "search"))
        print(f"{state}: load + search {ratio:.1f}x faster with the lookup")


if __name__ == "__main__":
    main()
