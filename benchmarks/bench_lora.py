"""LoRA vs full fine-tuning of the bundled all-MiniLM-L6-v2 (backbone ``minilm``) on CPU.

Part 1, cost: each arm trains ``--steps`` steps of the same recipe (minilm-code: SDA, the budget
of benchmarks/lora_suite.toml) on the same batches through structret's own trainer, in a fresh
process of its own so that its peak RSS is its own. Printed per arm: trainable parameters, peak
RSS, median step time (steps 2.., the first one pays for warm-up), and each as a ratio to full
fine-tuning, run in the same invocation.

Part 2, quality (``--seeds N``, 0 skips it): ``structret bench --suite benchmarks/lora_suite.toml``
trains both arms N times on the same budget, chooses LoRA's learning rate on the validation
split and scores the test split once (MRR@100 over the full pool).

    python benchmarks/bench_lora.py --data /path/stdlib.jsonl.gz --steps 8 --seeds 2

``--data``: a CodeSearchNet-format file (``structret mine /usr/lib/python3.11 --out FILE``); default:
the standard library structret bench mines and caches.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = HERE / "lora_suite.toml"
BUDGET = {"objective": "sda", "batch_size": 16, "query_max_len": 32, "passage_max_len": 128,
          "checkpoint_every": 0, "lr": 1e-4, "log_every": 1}
ARMS = {"full fine-tuning": {}, "LoRA r=8": {"lora_r": 8}}


def _arm(options: dict, data: str, steps: int, out: str, queue: mp.Queue) -> None:
    import resource

    import torch

    from structret.recipes import resolve_recipe
    from structret.training import create_backbone, train

    values = {**BUDGET, "max_steps": steps, "data": f"codesearchnet:{data}", "output": out}
    if options:
        values["minilm"] = options
    recipe = resolve_recipe("minilm-code", values)
    backbone = create_backbone(recipe)
    params = list(backbone.training_module.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    total = sum(p.numel() for p in params)
    del backbone
    times = [time.perf_counter()]
    train(recipe, callback=lambda step, logs: times.append(time.perf_counter()))
    steps_s = [b - a for a, b in zip(times, times[1:])]
    queue.put({"trainable": trainable, "total": total, "threads": torch.get_num_threads(),
               "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "median_step_s": statistics.median(steps_s[1:]), "steps": len(steps_s)})


def cost(data: str, steps: int, workdir: Path) -> dict[str, dict]:
    results = {}
    ctx = mp.get_context("spawn")
    for name, options in ARMS.items():
        queue = ctx.Queue()
        proc = ctx.Process(target=_arm, args=(options, data, steps, str(workdir / name.split()[0]), queue))
        proc.start()
        results[name] = queue.get()
        proc.join()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="CodeSearchNet-format .jsonl.gz (default: structret bench's mined stdlib)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per arm for the cost table")
    parser.add_argument("--seeds", type=int, default=2, help="seeds of the quality suite; 0 = skip it")
    parser.add_argument("--out", default="bench-out/lora", help="run directories and the suite's results")
    args = parser.parse_args()
    if args.data is None:
        from structret.bench import stdlib_path

        args.data = str(stdlib_path())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import tempfile

    with tempfile.TemporaryDirectory(dir=out) as tmp:
        results = cost(args.data, args.steps, Path(tmp))
    full = results["full fine-tuning"]
    print(f"cost of {args.steps} training steps (batch {BUDGET['batch_size']}, passages {BUDGET['passage_max_len']} "
          f"tokens, {full['threads']} torch threads), each arm in its own process; ratios to full fine-tuning")
    print()
    print("| arm | trainable parameters | peak RSS (MiB) | median step (s) |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['trainable']:,} ({100 * r['trainable'] / r['total']:.2f}%, "
              f"x{r['trainable'] / full['trainable']:.4f}) | {r['peak_rss_mib']:.0f} "
              f"(x{r['peak_rss_mib'] / full['peak_rss_mib']:.2f}) | {r['median_step_s']:.2f} "
              f"(x{r['median_step_s'] / full['median_step_s']:.2f}) |")
    if args.seeds:
        print()
        sys.stdout.flush()
        subprocess.run([sys.executable, "-m", "structret.cli", "bench", "--suite", str(SUITE), "--data",
                        f"code=codesearchnet:{args.data}", "--seeds", str(args.seeds), "--out", str(out / "suite")],
                       check=True)


if __name__ == "__main__":
    main()
