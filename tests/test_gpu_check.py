"""benchmarks/gpu_check.py: the one-shot GPU check, run here on the CPU with a small model.

The whole pipeline (encode against sentence-transformers, sda+mep under bf16 autocast with
GradCache, stop at a checkpoint, resume, export) runs as the command the GPU machine will run,
with ``--device cpu``; the table's bookkeeping is checked on made-up runs; without CUDA the
script says so in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _scripts import load_script
from _tiny_models import build_lively_bert, one_torch_thread, tiny_bert_dir  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"

gc = load_script("gpu_check.py")


def _env(**extra: str) -> dict[str, str]:
    # one thread: the tiny model is all per-op overhead, and a second thread only waits for a busy core
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


# --- without CUDA --------------------------------------------------------------------------


def test_without_cuda_it_prints_one_line_and_exits_0(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gc.main(["--out", str(tmp_path / "gpu.md")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("gpu_check: no CUDA device here")
    assert f"torch {torch.__version__}, cuda available: False); nothing to check" in out
    assert not (tmp_path / "gpu.md").exists()  # nothing was measured, so no table claims otherwise


def test_without_cuda_as_the_command_the_gpu_machine_runs(tmp_path):
    # an empty CUDA_VISIBLE_DEVICES hides every GPU: the no-CUDA path on any machine
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "gpu.md")], capture_output=True,
                          text=True, env=_env(CUDA_VISIBLE_DEVICES=""), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"gpu_check: no CUDA device here (torch {torch.__version__}, "
                                        f"cuda available: False); nothing to check"]


# --- the table and its bookkeeping -----------------------------------------------------------


def test_the_table_escapes_cells_and_marks_failures():
    table = gc.format_table([gc.Row("device", "NVIDIA H100 | 80 GiB"),
                             gc.Row("export onnx", "FAILED: ExportError: cosine\n0.5 < 0.9999", ok=False)])
    assert table.splitlines() == [
        "| check | measurement | ok |",
        "|---|---|---|",
        "| device | NVIDIA H100 \\| 80 GiB | yes |",
        "| export onnx | FAILED: ExportError: cosine 0.5 < 0.9999 | **NO** |",
    ]


def test_the_report_rewrites_the_file_after_every_row_and_a_failing_section_is_a_row(tmp_path):
    echoed: list[str] = []
    report = gc.Report(tmp_path / "sub" / "gpu.md", echo=echoed.append)
    report.add(gc.Row("torch", "2.x"))
    assert (tmp_path / "sub" / "gpu.md").read_text() == gc.format_table(report.rows)  # kept if the run dies now
    with report.section("train"):
        raise RuntimeError("CUDA out of memory")
    with report.section("export"):
        report.add(gc.Row("export onnx", "min cosine 1.000000"))
    assert [(r.check, r.ok) for r in report.rows] == [("torch", True), ("train", False), ("export onnx", True)]
    assert report.rows[1].measurement == "FAILED: RuntimeError: CUDA out of memory" and not report.ok
    assert (tmp_path / "sub" / "gpu.md").read_text().count("\n") == 2 + 3
    assert echoed[1] == "gpu_check: train: FAILED: RuntimeError: CUDA out of memory  <-- FAILED"


def _result(first: list[int], resumed: list[int], *, warmup: int = 1, steps: int = 4) -> object:
    stop = gc.checkpoint_step(warmup, steps)
    return gc.TrainResult(Path("run"), warmup, steps, stop, [(0, 0.0)] + [(s, float(s)) for s in first],
                          [(stop, 10.0)] + [(s, 10.0 + s) for s in resumed], None)


def test_the_resume_row_checks_where_the_resumed_run_continued():
    assert gc.checkpoint_step(1, 4) == 3 and gc.checkpoint_step(5, 50) == 30 and gc.checkpoint_step(0, 2) == 1
    good = gc.resume_report(_result([1, 2, 3], [4, 5]), [1, 2, 3, 4, 5], 5)
    assert good.ok and good.measurement.startswith("stopped after step 3 (checkpoint-000003), resumed at step 4, "
                                                   "ran to 5 of 5")
    # a resume that started over, or skipped a step, or a metrics file with the interrupted rows twice
    assert not gc.resume_report(_result([1, 2, 3], [1, 2, 3, 4, 5]), [1, 2, 3, 4, 5], 5).ok
    assert "expected 4..5" in gc.resume_report(_result([1, 2, 3], [5]), [1, 2, 3, 4, 5], 5).measurement
    assert "expected 1..5 once each" in gc.resume_report(_result([1, 2, 3], [4, 5]), [1, 2, 3, 3, 4, 5], 5).measurement
    assert "final model says step 3" in gc.resume_report(_result([1, 2, 3], [4, 5]), [1, 2, 3, 4, 5], 3).measurement


def test_step_times_leave_out_loading_warm_up_and_checkpoint_writes():
    stamps = [(0, 0.0), (1, 5.0), (2, 5.5), (3, 6.5), (4, 6.7), (5, 6.9)]  # step 1: loading; 3 wrote a checkpoint
    assert gc.seconds_per_step(stamps, first_own_step=2, skip=0) == pytest.approx([0.5, 1.0, 0.2, 0.2])
    assert gc.seconds_per_step(stamps, first_own_step=2, skip=1, saves=[3]) == pytest.approx([0.2, 0.2])


def test_arguments():
    args = gc.parse_args([])
    assert (args.device, args.steps, args.train_batch, args.grad_cache_chunk, args.export) == (
        None, 50, 32, 8, ["onnx", "sentence-transformers"])
    for bad in (["--steps", "1"], ["--grad-cache-chunk", "32"], ["--export", "tflite"]):
        with pytest.raises(SystemExit):
            gc.parse_args(bad)


# --- the whole pipeline on the CPU ----------------------------------------------------------


@pytest.fixture(scope="module")
def lively_bert_dir(tmp_path_factory, tiny_bert_dir) -> Path:  # noqa: F811
    return build_lively_bert(tiny_bert_dir, tmp_path_factory.mktemp("lively-bert"), masked_lm=True)


def test_the_cpu_dry_run_runs_every_check_and_resumes_at_the_saved_step(tmp_path, lively_bert_dir):
    from structret_backbones._loading import DTYPES

    # a fresh process, as on the GPU machine: accelerate fixes the mixed precision of the first
    # run in a process, and this one trains in bf16 where other tests' runs were fp32
    work, out, rows_json = tmp_path / "work", tmp_path / "gpu.md", tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--model", str(lively_bert_dir), "--texts", "16",
         "--rounds", "1", "--batch-size", "8", "--steps", "4", "--train-batch", "4", "--grad-cache-chunk", "2",
         "--lm-warmup", "1", "--out", str(out), "--json", str(rows_json), "--workdir", str(work)],
        capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    table = out.read_text(encoding="utf-8")
    assert done.stdout.endswith("\n" + table)  # the table printed is the table written
    rows = json.loads(rows_json.read_text())
    assert [r["check"] for r in rows] == [
        "device", "torch", "CUDA",
        "encode sentence-transformers (fp32)", "encode structret dtype=fp32", "encode structret dtype=bf16",
        *(["encode structret dtype=bf16-weights"] if "bf16-weights" in DTYPES else []),
        "train sda+mep, bf16 autocast, GradCache chunk 2, batch 4, 4 steps on cpu", "resume from checkpoint",
        "export onnx", "export sentence-transformers", "wall time",
    ]
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    assert table.count("| yes |") == len(rows) and "**NO**" not in table
    by = {r["check"]: r["measurement"] for r in rows}
    assert by["device"].startswith("cpu: a dry run") and by["torch"] == torch.__version__
    assert "tokens/s" in by["encode structret dtype=fp32"] and "16 texts" in by["encode structret dtype=fp32"]
    train_row = next(m for c, m in by.items() if c.startswith("train "))
    assert "s/step" in train_row and "-> step 5" in train_row and "losses finite" in train_row
    assert "after 1 LM-head warm-up steps" in train_row
    # 1 warm-up step + 4 of its own: stopped after 3 (1 + 4 // 2), resumed at 4
    assert by["resume from checkpoint"].startswith("stopped after step 3 (checkpoint-000003), resumed at step 4, "
                                                   "ran to 5 of 5")
    assert "onnx fp32: min cosine" in by["export onnx"] and "onnx int8" in by["export onnx"]
    assert "loads this folder" in by["export sentence-transformers"]

    # what the run left behind says the same, independently of the script's bookkeeping
    run = work / "run"
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-000003"]
    assert json.loads((run / "checkpoint-000003" / "trainer" / "state.json").read_text())["step"] == 3
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["phase"]) for m in metrics] == [(1, "lm-warmup")] + [(s, "train") for s in range(2, 6)]
    assert all("loss/sda" in m and "loss/mep" in m for m in metrics[1:])
    assert json.loads((run / "final" / "structret.json").read_text())["step"] == 5
    recipe = (run / "recipe.toml").read_text()
    assert 'dtype = "bf16"' in recipe and "grad_cache_chunk = 2" in recipe and 'objective = "sda+mep"' in recipe
    assert "resuming from checkpoint-000003 (step 3 of 5)" in done.stderr
    assert (work / "export" / "onnx" / "model.onnx").is_file()
    assert (work / "export" / "sentence-transformers" / "modules.json").is_file()
