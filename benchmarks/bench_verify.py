"""Loading a big index: the full checksum check against the stamp that lets a later load skip it.

Writes a flat index of N random 384-d vectors (1M: 1.5 GB) with ``SearchIndex.save``, then times
``structret.load_index`` three ways, each in a fresh process so no page cache or memo of this one
helps the next more than the operating system's own file cache does:

1. the first load: every file hashed (sha256), and the stamp written;
2. a second load: the stamp matches, nothing hashed;
3. ``structret verify``: every byte hashed again, on purpose.

The file cache is warm for all three (the index was just written), so (1) and (3) measure hashing,
not the disk. ::

    python benchmarks/bench_verify.py --n 1000000 --work /tmp/bench-verify
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LOAD = "import structret, sys; structret.load_index(sys.argv[1], texts=False)"


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--work", default="/tmp/bench-verify")
    args = parser.parse_args()

    import numpy as np

    from structret.api import SearchIndex
    from structret.registry import get_registry

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    index = get_registry().create("index", "flat", 384)
    rng = np.random.default_rng(0)
    for start in range(0, args.n, 100_000):
        rows = min(100_000, args.n - start)
        index.add([f"d{i}" for i in range(start, start + rows)], rng.standard_normal((rows, 384), dtype=np.float32))
    SearchIndex(index, meta={"model": "random vectors"}).save(work / "idx")
    size = sum(f.stat().st_size for f in (work / "idx").iterdir())
    env = {**os.environ, "STRUCTRET_CACHE": str(work / "cache")}
    python = [sys.executable, "-c", LOAD, str(work / "idx")]
    baseline = timed([sys.executable, "-c", "import structret"], env)
    first = timed(python, env)
    second = timed(python, env)
    full = timed([sys.executable, "-m", "structret.cli", "verify", str(work / "idx")], env)
    print(f"flat index of {args.n:,} x 384 vectors, {size / 1e9:.2f} GB, file cache warm; each a fresh process "
          f"(python + import structret alone: {baseline:.2f} s)")
    print(f"first load (every file hashed, stamp written): {first:.2f} s")
    print(f"second load (stamp matches, nothing hashed):   {second:.2f} s  ({first / second:.1f}x faster)")
    print(f"structret verify (every byte hashed):          {full:.2f} s")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
