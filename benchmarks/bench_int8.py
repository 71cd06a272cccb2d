"""int8 on this CPU: which variant is faster than fp32, and still within cosine 0.99 of it.

Same model (the bundled all-MiniLM-L6-v2), same texts as benchmarks/bench_encode.py (functions
of the installed Python standard library), same thread count, one process, rounds interleaved
(drift on a shared machine hits every variant alike; compare the ratios, not the absolute
times). Every ONNX variant runs through structret's OnnxEncoder (its batching); the torch ones
through the backbone's ``encode``. ::

    python benchmarks/bench_int8.py                         # 800 texts, 3 rounds
    python benchmarks/bench_int8.py --texts 300 --rounds 2  # quicker
    python benchmarks/bench_int8.py --no-torch-int8         # ONNX variants and torch fp32/bf16 only

Variants:

* torch fp32 / bf16: structret's torch encoder (``dtype=``); bf16 only where the CPU has bf16
  instructions.
* onnx sdpa ...: the graph as structret exported it before (SDPA attention, unfused), fp32 and
  int8 at each level of onnx_graph.INT8_LEVELS (what stays fp32).
* onnx fused ...: the graph structret exports now (eager attention, onnxruntime's transformer
  fusions: onnx_graph.export_graph), fp32 and int8 at each level; ``rr0`` is reduce_range=False
  (8-bit weights; structret ships 7-bit, safe on CPUs without VNNI).
* torch dynamic int8 <engine>: ``torch.ao.quantization.quantize_dynamic`` on every Linear
  (``torch_int8`` below), per-tensor and per-channel weights.

Columns: tokens/s, the ratio to torch fp32 and to the old onnx fp32 graph, and the minimum
cosine over the texts to torch fp32's vectors (int8 counts only at >= 0.99).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def torch_int8(model, *, engine: str = "x86", per_channel: bool = True):
    """A copy of ``model`` (a transformers encoder) with every ``nn.Linear`` dynamically quantized
    to int8 by torch: int8 weights (per output channel when ``per_channel``), activations quantized
    per tensor at each call. ``engine``: torch.backends.quantized.engine ("x86", "onednn",
    "fbgemm"); it is process-wide, and must be the same when the model runs as when it was
    quantized. Runs on CPU only, and cannot be trained."""
    import copy

    import torch
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    torch.backends.quantized.engine = engine
    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    return quantize_dynamic(copy.deepcopy(model).eval(), {torch.nn.Linear: qconfig}, dtype=torch.qint8)


def onnx_session(encoder, graph: Path, threads: int):
    """``encoder`` (an OnnxEncoder) running ``graph`` instead of its own, as OnnxEncoder opens one."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    encoder.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    encoder._inputs = [i.name for i in encoder.session.get_inputs()]
    return encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-torch-int8", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    import torch

    from bench_encode import bf16_instructions, stdlib_functions
    from structret.models import Model
    from structret.exporting import onnx_graph
    from structret.onnx_encoder import VARIANTS, OnnxEncoder
    from structret.registry import get_registry

    registry = get_registry()
    texts = stdlib_functions(args.texts)
    threads = torch.get_num_threads()
    fp32 = registry.create("backbone", "minilm", dtype="fp32")
    hidden = fp32.dim
    systems = {"torch fp32": lambda: fp32.encode(texts, batch_size=args.batch_size)}
    if bf16_instructions():
        bf16 = registry.create("backbone", "minilm", dtype="bf16")
        systems["torch bf16"] = lambda: bf16.encode(texts, batch_size=args.batch_size)

    work = Path(tempfile.mkdtemp(prefix="bench_int8-"))
    graphs: dict[str, Path] = {}
    for kind, fused in (("sdpa", False), ("fused", True)):
        folder = work / kind
        onnx_graph.write_graphs(Model(fp32, backbone_name="minilm"), folder, source="bench")  # tokenizer, meta
        onnx_graph.export_graph(fp32, folder / VARIANTS["fp32"], fused=fused)
        graphs[f"onnx {kind} fp32"] = folder / VARIANTS["fp32"]
        for level in onnx_graph.INT8_LEVELS:
            graphs[f"onnx {kind} int8 {level}"] = target = folder / f"int8-{level}.onnx"
            onnx_graph.quantize(folder / VARIANTS["fp32"], target, level=level, hidden=hidden)
    for level in ("none", "ffn-output"):  # 8-bit weights: faster or more exact where VNNI/AMX is there?
        target = work / "fused" / f"int8-{level}-rr0.onnx"
        quantize_full_range(work / "fused" / VARIANTS["fp32"], target, level=level, hidden=hidden)
        graphs[f"onnx fused int8 {level} rr0"] = target
    for label, graph in graphs.items():
        encoder = onnx_session(OnnxEncoder(graph.parent, variant="fp32", threads=threads), graph, threads)
        systems[label] = lambda e=encoder: e.encode(texts, kind="document", batch_size=args.batch_size)

    if not args.no_torch_int8:
        for engine in ("x86", "onednn", "fbgemm"):
            if engine not in torch.backends.quantized.supported_engines:
                continue
            for per_channel in (False, True):
                backbone = registry.create("backbone", "minilm", dtype="fp32")
                backbone.model = torch_int8(backbone.model, engine=engine, per_channel=per_channel)

                def run(b=backbone, e=engine):
                    torch.backends.quantized.engine = e
                    return b.encode(texts, batch_size=args.batch_size)

                systems[f"torch dynamic int8 {engine} {'per-channel' if per_channel else 'per-tensor'}"] = run

    tokens = sum(len(ids) for ids in fp32.tokenize.ids(texts)["input_ids"])
    times: dict[str, list[float]] = {name: [] for name in systems}
    outputs: dict[str, np.ndarray] = {}
    for name, run in systems.items():  # warm-up
        run()
    for _ in range(args.rounds):
        for name, run in systems.items():
            start = time.perf_counter()
            outputs[name] = np.asarray(run(), dtype=np.float32)
            times[name].append(time.perf_counter() - start)

    seconds = {name: statistics.median(samples) for name, samples in times.items()}
    reference = outputs["torch fp32"]
    print(f"\n{len(texts)} functions, {tokens} tokens, {threads} threads, {args.rounds} rounds interleaved (median); "
          f"onnxruntime {__import__('onnxruntime').__version__}, torch {torch.__version__}")
    print(f"{'variant':44} {'tokens/s':>9} {'x torch':>8} {'x onnx':>7} {'min cos':>8}")
    for name, taken in seconds.items():
        a, b = reference.astype(np.float64), outputs[name].astype(np.float64)
        cos = float(np.min((a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)))
        print(f"{name:44} {tokens / taken:9.0f} {seconds['torch fp32'] / taken:8.2f} "
              f"{seconds['onnx sdpa fp32'] / taken:7.2f} {cos:8.5f}{'' if cos >= 0.99 else '  (< 0.99)'}")
    shutil.rmtree(work, ignore_errors=True)


def quantize_full_range(fp32: Path, int8: Path, *, level: str, hidden: int) -> None:
    """onnx_graph.quantize with reduce_range=False (8-bit weights)."""
    import logging

    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from structret.exporting import onnx_graph

    ffn = onnx_graph.feed_forward_matmuls(fp32, hidden)
    keep = {"none": [], "ffn-output": ffn["out"], "ffn": ffn["in"] + ffn["out"]}[level]
    logging.getLogger().setLevel(logging.ERROR)
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True, reduce_range=False,
                     op_types_to_quantize=["MatMul", "Gather", "Attention", "EmbedLayerNormalization"],
                     nodes_to_exclude=keep, extra_options={"DefaultTensorType": TensorProto.FLOAT})


if __name__ == "__main__":
    main()
