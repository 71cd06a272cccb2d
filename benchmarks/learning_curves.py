"""Learning curves on the six-language corpus (issue 38): does each structure-aware method's gap
to SDA close, widen or flip as the training budget grows?

Every system trains all-MiniLM-L6-v2 from the same settings (``BASE``: the fast training path,
batches of 32 pairs) for 60, 240 and 960 steps, and every run is scored on the validation and
test splits of the six-language corpus (docs/results.md, "Multi-language code data"): dense
alone, and fused with ``bm25-fields`` by the fusion that scores best on validation. Choices
read validation only; the test column is written when a run is scored, once, and never chosen on.

Each finished run leaves ``OUT/NAME.json`` (scores, settings, timings, CPU): the record that
survives the machine, committed to the repository as it lands. Re-running skips what is
recorded and resumes a run that was cut short from its newest checkpoint. ::

    python benchmarks/learning_curves.py prepare                  # the filtered and hard-negative pairs
    python benchmarks/learning_curves.py run --systems sda --steps 60 --seeds 42 43 44
    python benchmarks/learning_curves.py run --plan               # every run the issue asks for, in order
    python benchmarks/learning_curves.py table                    # the tables, markdown
    python benchmarks/learning_curves.py figure --figure-out docs/img/learning-curves.png
    python benchmarks/learning_curves.py fusion --steps 960       # the fusion each system's recipe ships with

The data: ``python benchmarks/data/code_corpus.py --cache DATA --combined DATA/ablation
--structure-pairs DATA/structure`` (``DATA`` = ``--data-dir``, default ``$STRUCTRET_CODE_DATA``
or /work/data/code). Runs go to ``--runs`` (their weights are not kept in the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "learning-curves"
BUDGETS = (60, 240, 960)
SEEDS = (42, 43, 44)

# The fast training path every system shares: the settings of issue 38's faster default,
# written out so that a later change to the minilm-code recipe does not change these runs.
BATCH = 32
BASE = {
    "objective": "sda", "backbone": "minilm", "negatives": 0, "lr": 2e-5, "batch_size": BATCH, "warmup": 0.1,
    "query_max_len": 50, "passage_max_len": 240, "checkpoint_every": 50, "log_every": 10,
    "similarity": "cos", "temperature": 0.05,
    "dtype": "auto", "minilm.attention_dropout": 0.0, "minilm.hidden_dropout": 0.0,
}
# the standard library's mined functions (docs/performance.md): the size of the corpus the shipped
# recipe is scored on when trained on a small project
SMALL = 4732
# MiniLM's random LM head is first trained alone (encoder frozen) for this many steps, on top of
# the budget, as issue 16's ablation did
MEP = {"objective": "sda+mep", "mep.lm_warmup_auto_steps": 60}


@dataclass(frozen=True)
class System:
    label: str
    train: str  # key of TRAIN_DATA
    settings: dict = field(default_factory=dict)


SYSTEMS = {
    "sda": System("SDA", "docstring"),
    "sda+mep": System("SDA+MEP (SANTA: one forward of the masked code)", "docstring", MEP),
    "sda+mep-unmasked": System("SDA+MEP, SDA on the unmasked passage (issue 16's best variant)", "docstring",
                               {**MEP, "mep.contrastive_input": "unmasked"}),
    "sda-structure": System("SDA on docstring + structure pairs", "structure"),
    "sda-filtered": System("SDA on consistency-filtered pairs (teacher top 20)", "filtered"),
    "sda-cornstack": System("SDA on CoRNStack-filtered pairs (teacher top 2, cosine > 0.7)", "cornstack"),
    "sda-bm25neg": System("SDA + one bm25-fields hard negative per query (false negatives filtered)", "bm25neg",
                          {"negatives": 1}),
    # a recipe's max_steps holds whatever the corpus: on a project the size of the standard library
    # (4,732 mined functions) 960 steps is 6.5 passes. Does repeating a small corpus help or hurt?
    "sda-small": System(f"SDA on {SMALL:,} pairs drawn from the train split (the standard library's size), "
                        "passed over again and again", "small"),
    # the validation check of the faster default: the trainer's settings before issue 38
    "sda-before": System("SDA, training settings before issue 38 (fp32, dropout 0.1)", "docstring",
                         {"dtype": "fp32", "minilm.attention": "sdpa", "minilm.attention_dropout": 0.1,
                          "minilm.hidden_dropout": 0.1, "minilm.train_chunk_tokens": 0}),
}


def data_dir(args) -> Path:
    return Path(args.data_dir or os.environ.get("STRUCTRET_CODE_DATA") or "/work/data/code")


def train_data(args, key: str) -> str:
    root = data_dir(args)
    return {"docstring": f"codesearchnet:{root}/ablation/*.jsonl.gz",
            "structure": f"codesearchnet:{root}/structure/*.jsonl.gz",
            "filtered": f"codesearchnet:{root}/derived/filtered-k20.jsonl.gz",
            "cornstack": f"codesearchnet:{root}/derived/cornstack.jsonl.gz",
            "bm25neg": f"tevatron:{root}/derived/bm25neg.jsonl.gz",
            "small": f"codesearchnet:{root}/derived/small-{SMALL}.jsonl.gz"}[key]


def has_train_data(args, key: str) -> bool:
    pattern = train_data(args, key).split(":", 1)[1]
    return any(Path(pattern).parent.glob(Path(pattern).name))


def eval_data(args) -> str:
    return f"codesearchnet:{data_dir(args)}/ablation/*.jsonl.gz"


# --- preparing the derived training files -------------------------------------------------------

LANGUAGES = ("python", "go", "java", "javascript", "php", "ruby")


def prepare(args) -> None:
    """The training files the data levers read, each made by the structret command a user runs."""
    root = data_dir(args)
    derived = root / "derived"
    derived.mkdir(parents=True, exist_ok=True)
    data = f"codesearchnet:{root}/ablation/*.jsonl.gz"
    # keyed by the training data they make (train_data names the file)
    commands = {
        "filtered": {"": ["filter-pairs", "--data", data, "--split", "train", "--top-k", "20"]},
        "cornstack": {"": ["filter-pairs", "--data", data, "--split", "train", "--top-k", "2", "--min-score", "0.7"]},
        # one language at a time, so a query's negatives come from its own language's functions
        "bm25neg": {f".{lang}": ["negatives", "--data", f"codesearchnet:{root}/ablation/{lang}.jsonl.gz", "--split",
                                 "train", "--lexical", "bm25-fields", "--depth", "30", "--keep", "1", "--filter",
                                 "percent:0.95", "--judge", "minilm"] for lang in LANGUAGES},
    }
    # --systems makes only those systems' files: each is a pass of the teacher over the train split
    wanted = {SYSTEMS[s].train for s in args.systems}
    if not wanted or "small" in wanted:
        draw_small(root / "ablation", derived / f"small-{SMALL}.jsonl.gz")
    for key, parts in commands.items():
        if wanted and key not in wanted:
            continue
        target = Path(train_data(args, key).split(":", 1)[1])
        name = target.name.removesuffix(".jsonl.gz")
        if target.is_file():
            print(f"{target}: there", file=sys.stderr)
            continue
        files = []
        for suffix, command in parts.items():
            part = derived / f"{name}{suffix}.part.jsonl.gz"
            files.append(part)
            if part.is_file():  # a part an earlier, interrupted call finished
                continue
            print("$ structret " + shlex.join(command + ["--out", str(part)]), file=sys.stderr, flush=True)
            started = time.perf_counter()
            partial = part.with_name(part.name.replace(".part.", ".partial."))
            subprocess.run([sys.executable, "-m", "structret.cli", *command, "--out", str(partial)], check=True)
            os.replace(partial, part)
            print(f"  {time.perf_counter() - started:.0f} s", file=sys.stderr)
        with open(target.with_suffix(".tmp"), "wb") as out:  # gzip members one after another are one gzip file
            for part in files:
                out.write(part.read_bytes())
        os.replace(target.with_suffix(".tmp"), target)
        for part in files:
            part.unlink()


def draw_small(source: Path, target: Path) -> None:
    """``SMALL`` rows drawn uniformly at random (seed 0) from the train splits of all languages, as
    one file whose rows are all train: the same distribution as SDA's data, a small project's size."""
    import gzip
    import random

    if target.is_file():
        print(f"{target}: there", file=sys.stderr)
        return
    rows = []
    for path in sorted(source.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            rows += [line for line in lines if json.loads(line).get("partition") == "train"]
    drawn = random.Random(0).sample(rows, SMALL)
    partial = target.with_suffix(".tmp")
    with gzip.open(partial, "wt", encoding="utf-8") as out:
        out.writelines(drawn)
    os.replace(partial, target)
    print(f"{target}: {SMALL:,} of {len(rows):,} train rows", file=sys.stderr)


# --- training and scoring one run -------------------------------------------------------------


def cpu_kind() -> str:
    """What decides CPU speed here: the bf16 and AVX-512 flags lscpu shows (not the model name)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    except (OSError, IndexError):
        return platform.processor() or "unknown"
    if "amx_bf16" in flags:
        return "AMX (amx_bf16 avx512_bf16)"
    if "avx512_bf16" in flags:
        return "AVX512-BF16 (no AMX)"
    return "AVX2 only" if "avx2" in flags else "no AVX2"


def device_name() -> str:
    """Where the run trained: the GPU's name, or "cpu"."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def run_name(system: str, steps: int, seed: int) -> str:
    return f"{system}-{steps}-s{seed}"


def train_and_score(args, system: str, steps: int, seed: int) -> dict:
    import structret
    from structret.bench import run_bench
    from structret.datasets import load_dataset
    from structret.training.distributed import bf16_training

    spec = SYSTEMS[system]
    name = run_name(system, steps, seed)
    run = Path(args.runs) / name
    settings = {**BASE, **spec.settings, "max_steps": steps, "seed": seed}
    data = train_data(args, spec.train)
    started = time.perf_counter()
    if not (run / "final" / "structret.json").is_file():
        resume = run.is_dir() and any(run.glob("checkpoint-*"))
        print(f"== training {name}" + (" (resuming)" if resume else ""), file=sys.stderr, flush=True)
        structret.train(None, data=data, out=str(run), resume=resume, settings=settings)
    trained = time.perf_counter() - started
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rates = [m["examples_per_s"] for m in metrics if m.get("phase") == "train"]

    valid = load_dataset(eval_data(args), "valid")
    test = load_dataset(eval_data(args), "test")
    hybrid = f"bm25-fields+{run}"
    on_valid = run_bench(valid, [str(run)], show_progress=False)
    on_test = run_bench(test, [str(run), hybrid], tune=valid, show_progress=False)
    tuning = on_test.rows[hybrid]["fusion_tuning"]
    column = "MRR@100 (full pool)"
    record = {
        "system": system, "label": spec.label, "steps": steps, "seed": seed, "pairs_seen": steps * BATCH,
        "train_data": data, "eval_data": eval_data(args), "settings": settings,
        "dense": {"valid": on_valid.rows[str(run)][column], "test": on_test.rows[str(run)][column]},
        "fused": {"fusion": tuning["fusion"], "valid": tuning["scores"][tuning["fusion"]],
                  "test": on_test.rows[hybrid][column], "valid_grid": tuning["scores"]},
        "train_seconds": round(trained, 1) if trained > 5 else None,  # None: trained in an earlier call
        "pairs_per_s": round(statistics.median(rates), 2) if rates else None,
        "bf16": bf16_training(settings["dtype"]), "cpu": cpu_kind(), "device": device_name(),
        "torch_threads": __import__("torch").get_num_threads(),
        "scored": time.strftime("%Y-%m-%d %H:%M"),
    }
    return record


def zero_shot(args) -> dict:
    """MiniLM as it is, and fused with bm25-fields: the budget-0 point of every curve."""
    from structret.bench import run_bench
    from structret.datasets import load_dataset

    valid = load_dataset(eval_data(args), "valid")
    test = load_dataset(eval_data(args), "test")
    on_valid = run_bench(valid, ["minilm"], show_progress=False)
    on_test = run_bench(test, ["minilm", "bm25-fields+minilm"], tune=valid, show_progress=False)
    tuning = on_test.rows["bm25-fields+minilm"]["fusion_tuning"]
    column = "MRR@100 (full pool)"
    return {"system": "zero-shot", "label": "MiniLM zero-shot", "steps": 0, "seed": 0, "pairs_seen": 0,
            "eval_data": eval_data(args),
            "dense": {"valid": on_valid.rows["minilm"][column], "test": on_test.rows["minilm"][column]},
            "fused": {"fusion": tuning["fusion"], "valid": tuning["scores"][tuning["fusion"]],
                      "test": on_test.rows["bm25-fields+minilm"][column], "valid_grid": tuning["scores"]},
            "cpu": cpu_kind(), "device": device_name(), "scored": time.strftime("%Y-%m-%d %H:%M")}


def records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


def save(out: Path, record: dict) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    name = "zero-shot" if record["system"] == "zero-shot" else run_name(record["system"], record["steps"],
                                                                         record["seed"])
    path = out / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


# --- the plan: what the issue asks for, in the order that answers most first -------------------

# the small corpus once through (ceil(4,732 / 32) steps) and 6.5 times through, at 960 steps
REPEATS = [("sda-small", -(-SMALL // 32), 42), ("sda-small", 960, 42)]
CURVES = ("sda", "sda+mep", "sda+mep-unmasked", "sda-structure", "sda-filtered", "sda-cornstack", "sda-bm25neg")


def plan(done: list[dict]) -> list[tuple[str, int, int]]:
    """Every run not yet recorded: the validation check (before/after, 3 seeds at 60 steps), every
    system at 60 and 240 steps (seed 42), then at 960 steps SDA and the two systems other than SDA
    best on validation (fused, ``_ranked``) at 240, the small-corpus repeats (``REPEATS``), those
    three's seeds 43 and 44, and last the other systems at 960 and the seeds of the system best at
    960 (the one a recipe ships), each once all of its budget is in. The contenders come first
    because a 2-core CPU takes 75-90 minutes for a 960-step SDA run (2 h 12 min measured with a
    hard negative, MEP about twice SDA's): what the shipped recipe is chosen from, with its seeds'
    spread, is in before the rest."""
    have = {(r["system"], r["steps"], r["seed"]) for r in done}
    wanted = [(s, 60, seed) for s in ("sda-before", "sda") for seed in SEEDS]
    wanted += [(s, steps, 42) for steps in BUDGETS[:-1] for s in CURVES]
    contenders = ["sda"] + [s for s in _ranked(done, 240) if s != "sda"][:2]
    if len(contenders) < 3:  # 240 is not all in yet: its order decides which systems get seeds
        wanted += [(s, 960, 42) for s in CURVES]
    else:
        wanted += [(s, 960, 42) for s in contenders]
        wanted += REPEATS  # what the shipped recipe's budget means on a small project: before its seeds
        wanted += [(s, 960, seed) for seed in SEEDS[1:] for s in contenders]
        wanted += [(s, 960, 42) for s in CURVES if s not in contenders]
        wanted += [(s, 960, seed) for seed in SEEDS[1:] for s in _ranked(done, 960)[:1]]
    return [w for w in dict.fromkeys(wanted) if w not in have]


def _ranked(done: list[dict], steps: int) -> list[str]:
    """The systems by validation MRR at ``steps`` (seed 42) fused with bm25-fields, best first; empty
    until all are in. Fused, because that is what a shipped recipe is served as (its ``fusion``) and
    what the issue's done-when compares; dense and fused can disagree (the hard negative at 960)."""
    scores = {r["system"]: r["fused"]["valid"] for r in done
              if r["steps"] == steps and r["seed"] == 42 and r["system"] in CURVES}
    return sorted(scores, key=scores.__getitem__, reverse=True) if len(scores) == len(CURVES) else []


# --- the fusion a recipe ships with -----------------------------------------------------------


def shipped_fusion(runs: list[dict]) -> tuple[str, dict[str, float]]:
    """The fusion a recipe trained like ``runs`` (one system, one budget, its seeds) ships with: the
    one whose validation MRR, averaged over the seeds, is best (each seed's own choice can differ:
    SDA at 960, seed 42, chose minmax where every other SDA run chose zscore). Returns it and every
    fusion's mean; only fusions every seed scored count."""
    grids = [r["fused"]["valid_grid"] for r in runs]
    common = set(grids[0]).intersection(*grids[1:])
    means = {spec: statistics.mean(g[spec] for g in grids) for spec in sorted(common)}
    return max(means, key=means.__getitem__), means


def add_valid_grid(args, out: Path, record: dict) -> dict:
    """A record from before ``valid_grid`` was kept gets it (and is saved to ``out`` again): every fusion
    scored on validation from the run's final weights (test is not scored again). The recomputed score of
    the fusion the record chose must equal the recorded one, or the weights are not the run's."""
    from structret.api import load_model, tune_fusion
    from structret.datasets import load_dataset

    if "valid_grid" in record["fused"]:
        return record
    name = run_name(record["system"], record["steps"], record["seed"])
    path, run = out / f"{name}.json", Path(args.runs) / name
    if not (run / "final" / "structret.json").is_file():
        raise SystemExit(f"{path}: no valid_grid, and no weights at {run}/final to score the fusions from; "
                         f"pass --runs where the run was trained, or train it again")
    tuning = tune_fusion(load_model(str(run)), load_dataset(eval_data(args), "valid"), split=None,
                         lexical="bm25-fields", show_progress=False)
    recorded, again = record["fused"]["valid"], tuning["scores"].get(record["fused"]["fusion"])
    if again is None or abs(again - recorded) > 1e-6:
        raise SystemExit(f"{path}: validation with {record['fused']['fusion']} scores {again} from {run}/final, "
                         f"the record says {recorded}: these are not the weights that were scored; pass --runs "
                         f"where this run was trained, or train it again (delete {path} and run it)")
    record["fused"]["valid_grid"] = tuning["scores"]
    save(out, record)
    return record


def fusions(args) -> None:
    """``fusion``: for each system (``--systems``, default every one with runs) at its largest budget
    (or ``--steps``), the fusion a recipe of it ships with, and the runs' own choices."""
    out = Path(args.out)
    groups = grouped(records(out))
    for system in args.systems or sorted({s for s, _ in groups if s in SYSTEMS}):
        budgets = [n for s, n in groups if s == system and (not args.steps or n in args.steps)]
        if not budgets:
            continue
        steps = max(budgets)
        runs = [add_valid_grid(args, out, r) for r in sorted(groups[(system, steps)], key=lambda r: r["seed"])]
        best, means = shipped_fusion(runs)
        own = ", ".join(f"seed {r['seed']}: {r['fused']['fusion']}" for r in runs)
        print(f"{system} at {steps} steps: ship {best} (validation {100 * means[best]:.2f}, mean of "
              f"{len(runs)} seed(s); {own})")


# --- tables and the figure --------------------------------------------------------------------


def summarize(values: list[float]) -> str:
    if len(values) == 1:
        return f"{100 * values[0]:.2f}"
    return f"{100 * statistics.mean(values):.2f} ± {100 * statistics.stdev(values):.2f}"


def grouped(done: list[dict]) -> dict[tuple[str, int], list[dict]]:
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in done:
        groups.setdefault((r["system"], r["steps"]), []).append(r)
    return groups


def table(args) -> None:
    done = records(Path(args.out))
    groups = grouped(done)
    systems = [s for s in ("zero-shot", *CURVES, "sda-before") if any(k[0] == s for k in groups)]
    repeats = {k: groups.pop(k) for k in list(groups) if k[0] == "sda-small"}
    for side, title in (("dense", "dense alone"), ("fused", "fused with bm25-fields (fusion chosen on valid)")):
        for split in ("valid", "test"):
            print(f"\n**MRR@100 (full pool), {split}, {title}; ×100, mean ± std over seeds (n)**\n")
            steps = sorted({k[1] for k in groups})
            print("| system | " + " | ".join(f"{s} steps ({s * BATCH:,} pairs)" if s else "zero-shot"
                                           for s in steps) + " |")
            print("|---|" + "---:|" * len(steps))
            for system in systems:
                label = SYSTEMS[system].label if system in SYSTEMS else "MiniLM zero-shot"
                cells = []
                for s in steps:
                    runs = groups.get((system, s), [])
                    cells.append(f"{summarize([r[side][split] for r in runs])} ({len(runs)})" if runs else "")
                print(f"| {label} | " + " | ".join(cells) + " |")
    # the question, read directly: does each method's gap to SDA close, widen or flip with budget?
    steps = sorted(k[1] for k in groups if k[0] == "sda")
    for side in ("dense", "fused"):
        print(f"\n**Gap to SDA at the same budget, validation, {side}**: the system's mean minus SDA's, "
              f"×100 (over the seeds each has; SDA's spread is in the tables above)\n")
        print("| system | " + " | ".join(f"{s} steps" for s in steps) + " |")
        print("|---|" + "---:|" * len(steps))
        for system in CURVES[1:]:
            cells = []
            for s in steps:
                mine, sda = ([r[side]["valid"] for r in groups.get((name, s), [])] for name in (system, "sda"))
                cells.append(f"{100 * (statistics.mean(mine) - statistics.mean(sda)):+.2f}" if mine else "")
            print(f"| {SYSTEMS[system].label} | " + " | ".join(cells) + " |")
    if repeats:
        print(f"\n**Repeats: SDA on {SMALL:,} pairs passed over again and again, against SDA on fresh pairs**: "
              "MRR@100 (full pool) ×100, seed 42, fusion chosen on valid\n")
        print("| training | steps | pairs seen | distinct pairs | passes | valid | test | fused valid | fused test |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        fresh = [(k, runs) for k, runs in sorted(groups.items()) if k[0] == "sda"]
        for (system, n), runs in sorted(repeats.items(), key=lambda kv: kv[0][1]) + fresh:
            r = next((r for r in runs if r["seed"] == 42), None)
            if r is None:
                continue
            distinct = min(SMALL, n * BATCH) if system == "sda-small" else n * BATCH
            print(f"| {system} | {n} | {n * BATCH:,} | {distinct:,} | {n * BATCH / distinct:.1f} | "
                  f"{100 * r['dense']['valid']:.2f} | {100 * r['dense']['test']:.2f} | "
                  f"{100 * r['fused']['valid']:.2f} | {100 * r['fused']['test']:.2f} |")
    print("\n**Training cost** (median pairs/s over each run's logged intervals; CPU kind, bf16)\n")
    print("| system | steps | seed | pairs/s | train s | cpu | bf16 |")
    print("|---|---:|---:|---:|---:|---|---|")
    for r in done:
        if r["system"] != "zero-shot":
            print(f"| {r['system']} | {r['steps']} | {r['seed']} | {r.get('pairs_per_s')} | {r.get('train_seconds')} | "
                  f"{r.get('cpu')} | {r.get('bf16')} |")


def figure(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = records(Path(args.out))
    groups = grouped(done)
    base = next((r for r in done if r["system"] == "zero-shot"), None)
    fig, axes = plt.subplots(2, 2, figsize=(12, 9), sharex=True)
    for col, split in enumerate(("valid", "test")):
        for row, side in enumerate(("dense", "fused")):
            ax = axes[row][col]
            for system in CURVES:
                points = sorted((s, [r[side][split] for r in runs]) for (name, s), runs in groups.items()
                                if name == system)
                if not points:
                    continue
                x = [s * BATCH for s, _ in points]
                mean = [100 * statistics.mean(v) for _, v in points]
                spread = [100 * statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in points]
                line, = ax.plot(x, mean, marker="o", label=SYSTEMS[system].label)
                ax.fill_between(x, [m - d for m, d in zip(mean, spread)], [m + d for m, d in zip(mean, spread)],
                                color=line.get_color(), alpha=0.2)
            if base is not None:
                ax.axhline(100 * base[side][split], color="grey", linestyle=":", label="MiniLM zero-shot")
            ax.set_xscale("log")
            # the budgets themselves as ticks: log scale's minor labels (3x10^3, 4x10^3) run into each other
            ax.set_xticks([b * BATCH for b in BUDGETS], [f"{b * BATCH / 1000:.1f}k" for b in BUDGETS])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_title(f"{split}, {'dense alone' if side == 'dense' else 'fused with bm25-fields'}")
            ax.set_ylabel("MRR@100 (full pool) ×100")
            ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("training pairs seen (batches of 32; log scale)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8)
    fig.suptitle("Learning curves on the six-language corpus (all-MiniLM-L6-v2; shading: ± one std over seeds)")
    fig.tight_layout(rect=(0, 0.1, 1, 0.97))
    fig.savefig(args.figure_out, dpi=110)
    print(f"wrote {args.figure_out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("prepare", "run", "plan", "table", "figure", "fusion"))
    parser.add_argument("--data-dir", help="the corpus folder (ablation/, structure/; derived/ is written there)")
    parser.add_argument("--runs", default="/work/runs/curves", help="where the runs' weights go")
    parser.add_argument("--out", default=str(OUT), help="where each run's record goes (committed)")
    parser.add_argument("--systems", nargs="*", choices=sorted(SYSTEMS), default=[])
    parser.add_argument("--steps", nargs="*", type=int, default=[])
    parser.add_argument("--seeds", nargs="*", type=int, default=[42])
    parser.add_argument("--plan", action="store_true", help="run: every run the plan still needs, in order")
    parser.add_argument("--figure-out", default="docs/img/learning-curves.png")
    parser.add_argument("--commit", action="store_true", help="run: git-commit each record as it lands")
    parser.add_argument("--jobs", type=int, default=1, help="run: this many runs at once (a GPU holds several)")
    parser.add_argument("--threads", type=int, default=2, help="run --jobs: CPU threads per run")
    parser.add_argument("--data-wait", type=int, default=900,
                        help="run --jobs: seconds to wait for `prepare` (run beside it) to write a run's training file")
    args = parser.parse_args()
    out = Path(args.out)
    if args.command == "prepare":
        return prepare(args)
    if args.command == "table":
        return table(args)
    if args.command == "figure":
        return figure(args)
    if args.command == "fusion":
        return fusions(args)
    if args.command == "plan":
        for item in plan(records(out)):
            print(run_name(*item))
        return
    if not (out / "zero-shot.json").is_file():
        path = save(out, zero_shot(args))
        print(f"wrote {path}", file=sys.stderr)
    if args.jobs > 1:
        return run_in_parallel(args, out)
    while True:
        todo = plan(records(out)) if args.plan else [
            (s, n, seed) for s in args.systems for n in args.steps for seed in args.seeds
            if not (out / f"{run_name(s, n, seed)}.json").is_file()]
        if not todo:
            break
        system, steps, seed = todo[0]
        path = save(out, train_and_score(args, system, steps, seed))
        record = json.loads(path.read_text())
        print(f"wrote {path}: dense valid {100 * record['dense']['valid']:.2f} test {100 * record['dense']['test']:.2f}; "
              f"fused valid {100 * record['fused']['valid']:.2f} test {100 * record['fused']['test']:.2f}",
              file=sys.stderr, flush=True)
        if args.commit:
            commit(path)


def run_in_parallel(args, out: Path) -> None:
    """``--jobs N``: N runs at once, each its own process (one GPU holds many MiniLM runs; each process
    gets ``--threads`` CPU threads). The plan is read again whenever a run ends, so runs that wait on
    others' scores (the extra seeds) start as soon as those are in. 240-step runs go first, since
    the extra seeds at 960 wait on them, then the longest."""
    passed = ["--out", str(out), "--runs", args.runs] + (["--data-dir", args.data_dir] if args.data_dir else [])
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    logs = Path(args.runs) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    running: dict[tuple[str, int, int], subprocess.Popen] = {}
    failed: set[tuple[str, int, int]] = set()
    logs_open: dict[tuple[str, int, int], IO[str]] = {}
    idle_since = time.monotonic()
    while True:
        done = records(out)
        todo = plan(done) if args.plan else [
            (s, n, seed) for s in args.systems for n in args.steps for seed in args.seeds
            if not (out / f"{run_name(s, n, seed)}.json").is_file()]
        todo = sorted((t for t in todo if t not in running and t not in failed), key=lambda t: (t[1] != 240, -t[1]))
        waiting = [t for t in todo if not has_train_data(args, SYSTEMS[t[0]].train)]
        todo = [t for t in todo if t not in waiting]  # `prepare` may still be writing their files
        if waiting and not todo and not running:
            if time.monotonic() - idle_since > args.data_wait:
                raise SystemExit("no training data for " + ", ".join(run_name(*t) for t in waiting) +
                                 f" after {args.data_wait} s; run `learning_curves.py prepare` first")
            time.sleep(5)
            continue
        idle_since = time.monotonic()
        while todo and len(running) < args.jobs:
            item = todo.pop(0)
            system, steps, seed = item
            log = open(logs / f"{run_name(*item)}.log", "a")
            print(f"== starting {run_name(*item)} ({len(running) + 1} running)", file=sys.stderr, flush=True)
            running[item] = subprocess.Popen(
                [sys.executable, __file__, "run", "--systems", system, "--steps", str(steps), "--seeds", str(seed),
                 *passed], stdout=log, stderr=subprocess.STDOUT, env=env)
            logs_open[item] = log
        if not running:
            break
        time.sleep(2)
        for item, proc in list(running.items()):
            if proc.poll() is None:
                continue
            del running[item]
            logs_open.pop(item).close()
            if proc.returncode != 0:
                failed.add(item)
                print(f"!! {run_name(*item)} failed (exit {proc.returncode}); see {logs / run_name(*item)}.log",
                      file=sys.stderr, flush=True)
            else:
                print(f"== {run_name(*item)} scored", file=sys.stderr, flush=True)
                if args.commit:
                    commit(out / f"{run_name(*item)}.json")
    if failed:
        raise SystemExit(f"{len(failed)} runs failed: " + ", ".join(run_name(*f) for f in sorted(failed)))


def commit(path: Path) -> None:
    """Commit one record alone (other staged work is left as it is); a busy index is retried."""
    for attempt in range(10):
        added = subprocess.run(["git", "add", str(path)], cwd=HERE.parent)
        done = added.returncode == 0 and subprocess.run(
            ["git", "commit", "-q", "-m", f"learning curves: {path.stem} scored (benchmarks/learning_curves.py)",
             "--", str(path)], cwd=HERE.parent).returncode == 0
        if done:
            return
        time.sleep(3 + attempt)
    print(f"could not commit {path}; it is written, commit it by hand", file=sys.stderr)


if __name__ == "__main__":
    main()
