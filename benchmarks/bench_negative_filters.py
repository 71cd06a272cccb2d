"""Filtered against unfiltered hard negatives for ``dr`` fine-tuning (docs/results.md, "Filtered hard negatives").

Mined code (the Python standard library, CodeSearchNet rows, the miner's train/valid/test
partition), hard negatives mined once by zero-shot MiniLM on the train queries, written
unfiltered and with each NV-Retriever filter; MiniLM fine-tuned with ``dr`` (1 hard negative
per query plus the batch's) on each file, same budget. Every filter setting is trained with the
first --selection-seeds seeds and the one with the best valid MRR@100 is chosen; it and the
unfiltered row are then trained with all --seeds and only they are scored on test, once.

    nice -n 19 python benchmarks/bench_negative_filters.py --data /tmp/negbench/stdlib.jsonl.gz \\
        --out /tmp/negbench/out

Re-running with the same --out reuses finished runs and scores (results.json), so an
interrupted comparison resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

UNFILTERED = "unfiltered"
MEASURE = "MRR@100 (full pool)"


def _save(results: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, path)


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{100 * values[0]:.2f} (one seed)"
    return f"{100 * statistics.mean(values):.2f} ± {100 * statistics.stdev(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a mined CodeSearchNet .jsonl.gz (structret mine ... --out)")
    parser.add_argument("--out", required=True, help="folder for negatives, runs and results.json")
    parser.add_argument("--filters", nargs="+", default=["percent:0.95", "margin:0.05"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--selection-seeds", type=int, default=1,
                        help="seeds every filter setting is trained with to choose one on valid (the chosen one and "
                             "the unfiltered row then get all --seeds)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5, help="above minilm-code's 2e-5: a short run must move")
    parser.add_argument("--depth", type=int, default=30, help="candidates ranked per query")
    parser.add_argument("--keep", type=int, default=10, help="negatives written per query (dr samples 1 per step)")
    parser.add_argument("--max-length", type=int, default=64, help="passage tokens, training and scoring")
    args = parser.parse_args()

    import structret
    from structret.negatives import NegativeFilter, rank_candidates, write_negatives

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results["settings"] = {k: v for k, v in vars(args).items()}
    spec = f"codesearchnet:{args.data}"
    started = time.time()

    # 1. candidates ranked once by zero-shot MiniLM; each filter is applied to the same ranking
    files = {UNFILTERED: out / "negatives-unfiltered.jsonl.gz"}
    files.update({f: out / f"negatives-{f.replace(':', '-')}.jsonl.gz" for f in args.filters})
    if not all(p.exists() for p in files.values()):
        train = structret.load_dataset(spec, split="train")
        miner = structret.load_model("minilm", max_length=args.max_length)
        candidates = rank_candidates(miner.backbone, train, depth=args.depth, batch_size=args.batch_size)
        counts = {}
        for name, path in files.items():
            flt = None if name == UNFILTERED else NegativeFilter.parse(name)
            report = write_negatives(train, candidates, path, keep=args.keep, seed=0, filter=flt,
                                     report_path=str(path).replace(".jsonl.gz", ".report.json"))
            print(report.summary(), file=sys.stderr)
            counts[name] = report.to_dict()
        results["dropped"] = counts
        _save(results, results_path)
        del miner

    # 2. zero-shot reference
    scores = results.setdefault("scores", {})
    if "zero-shot" not in scores:
        zs = structret.load_model("minilm", max_length=args.max_length)
        scores["zero-shot"] = {split: structret.evaluate(zs, spec, split=split)[MEASURE] for split in ("valid", "test")}
        _save(results, results_path)

    # 3. every setting x seed trained with the same budget and scored on valid
    def run(name: str, seed: int) -> Path:
        run_dir = out / "runs" / f"{name.replace(':', '-')}-seed{seed}"
        if not (run_dir / "final").exists():
            structret.train("minilm-code", data=f"tevatron:{files[name]}", out=str(run_dir), objective="dr",
                            negatives=1, max_steps=args.steps, batch_size=args.batch_size, seed=seed, lr=args.lr,
                            passage_max_len=args.max_length, checkpoint_every=0,
                            settings={"dr.similarity": "cos", "dr.temperature": 0.05},
                            resume=run_dir.exists())  # an interrupted run continues
        return run_dir

    seeds = [42 + i for i in range(args.seeds)]

    def score_valid(name: str, seed: int) -> None:
        key = f"{name}/seed{seed}"
        if "valid" in scores.get(key, {}):
            return
        model = structret.load_model(str(run(name, seed)), max_length=args.max_length)
        scores[key] = {"valid": structret.evaluate(model, spec, split="valid")[MEASURE]}
        _save(results, results_path)
        print(f"{key}: valid {scores[key]['valid']:.4f} ({time.time() - started:.0f} s so far)", file=sys.stderr)

    # 3a. every setting trained with the first --selection-seeds seeds; the filter is chosen on their valid mean
    for seed in seeds[: args.selection_seeds]:
        for name in files:
            score_valid(name, seed)
    selection = seeds[: args.selection_seeds]
    valid_mean = {name: statistics.mean(scores[f"{name}/seed{s}"]["valid"] for s in selection) for name in files}
    chosen = max(args.filters, key=lambda f: valid_mean[f])
    results["chosen"] = chosen
    # 3b. the chosen filter and the unfiltered row get every seed
    for seed in seeds:
        for name in (UNFILTERED, chosen):
            score_valid(name, seed)

    # 4. test scored once, for the chosen filter and the unfiltered row
    for name in (UNFILTERED, chosen):
        for seed in seeds:
            key = f"{name}/seed{seed}"
            if "test" not in scores[key]:
                model = structret.load_model(str(run(name, seed)), max_length=args.max_length)
                scores[key]["test"] = structret.evaluate(model, spec, split="test")[MEASURE]
                _save(results, results_path)

    lines = [f"| negatives | dropped (of {results['dropped'][UNFILTERED]['candidates']} candidates) | "
             f"queries left with none | seeds | valid MRR@100 | test MRR@100 |", "|---|---|---|---|---|---|"]
    lines.append(f"| none (zero-shot MiniLM) | - | - | - | {100 * scores['zero-shot']['valid']:.2f} | "
                 f"{100 * scores['zero-shot']['test']:.2f} |")
    for name in files:
        d = results["dropped"][name]
        valid = [scores[f"{name}/seed{s}"]["valid"] for s in seeds if f"{name}/seed{s}" in scores]
        test = [scores[f"{name}/seed{s}"]["test"] for s in seeds if "test" in scores.get(f"{name}/seed{s}", {})]
        label = name + (" (chosen on valid)" if name == chosen else "")
        dropped = f"{d['dropped']} ({100 * d['dropped_share']:.1f}%)" if name != UNFILTERED else "0"
        lines.append(f"| {label} | {dropped} | {d['emptied_by_filter'] if name != UNFILTERED else 0} | "
                     f"{len(valid)} | {_mean_std(valid)} | {_mean_std(test) if test else 'not scored'} |")
    results["table"] = "\n".join(lines)
    results["seconds"] = time.time() - started
    _save(results, results_path)
    print(results["table"])
    print(f"seeds {seeds}, {args.steps} steps of batch {args.batch_size}; wrote {results_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
