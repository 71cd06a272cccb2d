"""Peak memory of one training step, with and without gradient caching (docs/scale.md §4).

The bundled all-MiniLM-L6-v2, ``dr`` (in-batch contrastive, cosine / 0.05), queries of 32
tokens and passages of exactly 256, fp32 on CPU, one thread. Each configuration runs in a
fresh process, because the figure is the growth of the process's peak RSS
(``ru_maxrss``) over one ``forward_backward``, and a peak never comes down. ::

    nice -n 19 python benchmarks/bench_grad_cache.py --batch 32 --chunks 0 8 4
    nice -n 19 python benchmarks/bench_grad_cache.py --batch 64 --chunks 0 8
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("the a function method class returns adds sums two numbers list sort string parse file open read "
         "write value key dict index search query code python").split()


def one(batch: int, chunk: int) -> dict:
    import torch

    from structret.recipes import resolve_recipe
    from structret.training import Batches, TrainStep, build_objectives, create_backbone, forward_backward, \
        load_examples, make_accelerator

    torch.set_num_threads(1)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.jsonl"
        with data.open("w") as f:
            for i in range(batch):  # 400 words: every passage is cut at 256 tokens
                f.write(json.dumps({"query": " ".join(rng.choice(WORDS) for _ in range(20)),
                                    "positive_passages": [{"text": " ".join(rng.choice(WORDS) for _ in range(400))}]}) + "\n")
        recipe = resolve_recipe(None, {"backbone": "minilm", "objective": "dr", "data": f"tevatron:{data}",
                                       "batch_size": batch, "similarity": "cos", "temperature": 0.05,
                                       "query_max_len": 32, "passage_max_len": 256, "output": str(Path(tmp) / "run")})
        accelerator = make_accelerator(recipe)
        backbone = create_backbone(recipe)
        objectives = build_objectives(recipe)
        module = accelerator.prepare(TrainStep(backbone, objectives).train())
        step = Batches(load_examples(recipe.data)[0], recipe, backbone, objectives).local(0)
    assert step["passage"]["input_ids"].shape[1] == 256, step["passage"]["input_ids"].shape
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    start = time.perf_counter()
    logs = forward_backward(module, step, accelerator, chunk)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"batch": batch, "grad_cache_chunk": chunk, "step_peak_rss_MiB": round((after - before) / 1024),
            "peak_rss_before_step_MiB": round(before / 1024), "seconds": round(seconds, 1), "loss": float(logs["loss"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--chunks", type=int, nargs="+", default=[0, 8, 4], help="0 = no caching")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a single configuration, in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.batch, args.chunks[0])))
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for chunk in args.chunks:
        out = subprocess.run([sys.executable, __file__, "--one", "--batch", str(args.batch), "--chunks", str(chunk)],
                             capture_output=True, text=True, env=env, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
