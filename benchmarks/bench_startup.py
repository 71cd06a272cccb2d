"""Start-up: wall time of ``structret --help`` and ``structret plugins``, against the
Python interpreter alone and against ``import torch`` (what a careless plugin would add). ::

    python benchmarks/bench_startup.py --runs 7

Each command runs in a fresh process; the median of the runs is printed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    structret = shutil.which("structret") or sys.exit("structret is not on PATH: pip install -e . first")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "structret --help": [structret, "--help"],
        "structret plugins": [structret, "plugins"],
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    }
    results = {name: median_seconds(command, args.runs) for name, command in commands.items()}
    print(f"median of {args.runs} runs, fresh process each")
    for name, seconds in results.items():
        print(f"{name:28} {seconds * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
