"""Cold index time and query latency of one project, structret against semble run in the same session.

For each repository given (default: aiohttp of semble's validation set), in turns, each in a fresh
process so nothing is warm but the page cache:

- ``structret-lexical``: ``structret index SRC --backbone none`` (the syntax chunker and bm25-project);
- ``structret-hybrid``: ``structret index SRC`` with an empty STRUCTRET_CACHE (every unit encoded by
  all-MiniLM-L6-v2, and the model's ONNX copy exported, as on a machine's first build; ``--warm-model
  CACHE`` starts from that cache's ONNX copy: a project's first build on a machine that built one);
- ``semble``: ``SembleIndex.from_path(SRC, model_path=STATIC)`` with an empty SEMBLE_CACHE_LOCATION. Its
  hub model (potion-code-16M) cannot be reached here, so it is given a local static model: ``--static``,
  a model2vec folder (``model2vec.distill`` of the bundled MiniLM makes one; distilling is not timed).

Then each index answers the suite's queries one at a time, in-process, after one warm-up query: the
median is the query p50. semble must be installed in its own environment (``--semble-python``), as
its dependencies are not structret's::

    python3 -m venv /tmp/semble-venv && /tmp/semble-venv/bin/pip install semble==0.7.0
    python benchmarks/project_index_speed.py --semble-python /tmp/semble-venv/bin/python --static /tmp/minilm-static
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCH = ROOT.parent / "shared" / "semble-bench"

STRUCTRET = """
import json, statistics, sys, time
from pathlib import Path
from structret.api import index_source, load_index
source, out, mode, queries = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
start = time.perf_counter()
done = index_source(source, out, model=None if mode == "lexical" else "minilm", show_progress=False)
built = time.perf_counter() - start
index = load_index(out)
model = None if mode == "lexical" else index.model
search = (lambda q: index.search([q], k=10)) if model is None else (lambda q: index.search(model, [q], k=10))
search(queries[0])
times = []
for q in queries:
    began = time.perf_counter(); search(q); times.append(time.perf_counter() - began)
print(json.dumps({"seconds": built, "units": done.units, "encoded": done.encoded, "p50_ms": 1000 * statistics.median(times)}))
"""

SEMBLE = """
import json, statistics, sys, time
from semble import SembleIndex
source, static, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
start = time.perf_counter()
index = SembleIndex.from_path(source, model_path=static)
built = time.perf_counter() - start
index.search(queries[0], top_k=10)
times = []
for q in queries:
    began = time.perf_counter(); index.search(q, top_k=10); times.append(time.perf_counter() - began)
print(json.dumps({"seconds": built, "units": len(index.chunks), "p50_ms": 1000 * statistics.median(times)}))
"""


def _cpu() -> str:
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"
    kind = "AMX" if "amx_tile" in flags else "AVX512-BF16" if "avx512_bf16" in flags else "AVX2" if "avx2" in flags \
        else "no AVX2"
    return f"{os.cpu_count()} cores, {kind}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", action="append", default=None, help="repository of the benchmark (default aiohttp)")
    parser.add_argument("--data-root", default=str(BENCH))
    parser.add_argument("--semble-python", help="python of an environment with semble installed")
    parser.add_argument("--static", help="a local model2vec folder for semble")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warm-model", metavar="CACHE",
                        help="a STRUCTRET_CACHE whose onnx/ (the model's ONNX copy, exported on a machine's first "
                             "build) each structret run starts with: a project's first index, not the machine's")
    args = parser.parse_args()
    root = Path(args.data_root)
    listed = {entry["name"]: entry for entry in json.loads((root / "repos.json").read_text(encoding="utf-8"))}
    print(f"# {_cpu()}; {args.rounds} round(s), in turns")
    for name in args.repo or ["aiohttp"]:
        entry = listed[name]
        source = root / "repos" / name / (entry.get("benchmark_root") or "")
        texts = [q["query"] for q in json.loads((root / "annotations" / f"{name}.json").read_text(encoding="utf-8"))]
        queries = json.dumps(texts)
        rows: dict[str, list[dict]] = {}
        for _ in range(args.rounds):
            for system in ("structret-lexical", "structret-hybrid", "semble"):
                with tempfile.TemporaryDirectory() as tmp:
                    env = {**os.environ, "STRUCTRET_CACHE": f"{tmp}/cache", "SEMBLE_CACHE_LOCATION": f"{tmp}/semble",
                           "HF_HUB_OFFLINE": "1"}
                    if args.warm_model:
                        Path(tmp, "cache").mkdir()
                        os.symlink(Path(args.warm_model, "onnx").resolve(), Path(tmp, "cache", "onnx"))
                    if system == "semble":
                        if not (args.semble_python and args.static):
                            continue
                        argv = [args.semble_python, "-c", SEMBLE, str(source), args.static, queries]
                    else:
                        mode = system.split("-")[1]
                        argv = [sys.executable, "-c", STRUCTRET, str(source), f"{tmp}/idx", mode, queries]
                    done = subprocess.run(argv, capture_output=True, text=True, env=env)
                    if done.returncode:
                        raise SystemExit(f"{system} failed:\n{done.stderr[-2000:]}")
                    rows.setdefault(system, []).append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"\n{name} ({entry['language']}, {len(texts)} queries)\n")
        print("| system | units | cold index s | query p50 ms |\n|---|---:|---:|---:|")
        for system, runs in rows.items():
            print(f"| {system} | {runs[0]['units']} | {statistics.median(r['seconds'] for r in runs):.2f} | "
                  f"{statistics.median(r['p50_ms'] for r in runs):.1f} |")


if __name__ == "__main__":
    main()
