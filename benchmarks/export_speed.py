"""Encoding speed of an export: torch vs ONNX fp32 vs ONNX int8, same process, same texts.

The bundled all-MiniLM-L6-v2 (``minilm`` backbone, mean pooling, unit vectors, 256 tokens)
is written as ONNX exactly as ``structret export --format onnx`` writes a run's, then
functions of the installed Python standard library (as ``structret mine`` keeps them) are
encoded by each, warmed up, in interleaved rounds, with the same thread count. Prints
texts/s, the ratio to torch, and the worst cosine of each graph to torch, for each int8
level the export may choose (structret.exporting.onnx_graph.INT8_LEVELS). ::

    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/export_speed.py
    python benchmarks/export_speed.py --texts 512 --rounds 5 --threads 2

Needs ``pip install 'structret[export]'``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from bench_encode import stdlib_functions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=256, help="stdlib functions encoded per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="default: torch's own count")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    from structret.models import open_model
    from structret.exporting.checks import cosines
    from structret.onnx_encoder import OnnxEncoder
    from structret.exporting.onnx_graph import INT8_LEVELS, quantize, write_graphs

    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    model = open_model("minilm", None, {"dtype": "fp32"})
    texts = stdlib_functions(args.texts)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "onnx"
        start = time.perf_counter()
        write_graphs(model, out, source="minilm")
        print(f"export: {time.perf_counter() - start:.1f} s; model.onnx {(out / 'model.onnx').stat().st_size / 1e6:.1f} MB, "
              f"model_int8.onnx {(out / 'model_int8.onnx').stat().st_size / 1e6:.1f} MB")
        def encoder(variant):
            onnx = OnnxEncoder(out, variant=variant, threads=threads)  # the session holds the graph from here on
            return lambda t: onnx.encode(t, kind="document", batch_size=args.batch_size)

        encoders = {"torch": lambda t: model.backbone.encode(t, kind="document", batch_size=args.batch_size),
                    "onnx fp32": encoder("fp32")}
        # every int8 level 'structret export' may pick (it takes the first within cosine 0.99)
        for level in INT8_LEVELS:
            quantize(out / "model.onnx", out / "model_int8.onnx", level=level, hidden=model.dim)
            encoders[f"int8 {level}"] = encoder("int8")
        reference = encoders["torch"](texts)
        worst = {name: float(cosines(encode(texts), reference).min()) for name, encode in encoders.items()}
        seconds: dict[str, list[float]] = {name: [] for name in encoders}
        for _ in range(args.rounds):  # interleaved: a busy neighbour slows every contender alike
            for name, encode in encoders.items():
                start = time.perf_counter()
                encode(texts)
                seconds[name].append(time.perf_counter() - start)
    speed = {name: len(texts) / statistics.median(s) for name, s in seconds.items()}
    print(f"{len(texts)} stdlib functions, max 256 tokens, batch {args.batch_size}, {threads} thread(s), "
          f"median of {args.rounds} rounds")
    print(f"{'':<16} {'texts/s':>9} {'vs torch':>9} {'min cosine':>11}")
    for name in encoders:
        print(f"{name:<16} {speed[name]:>9.1f} {speed[name] / speed['torch']:>8.2f}x {worst[name]:>11.6f}")
    print("int8 levels: " + "; ".join(f"{k}: {v}" for k, v in INT8_LEVELS.items()))


if __name__ == "__main__":
    main()
