"""``structret bench --suite coir --data-root PATH``: CoIR's leaderboard table on local task folders.

CoIR (Li et al., "CoIR: A Comprehensive Benchmark for Code Information Retrieval Models")
publishes each task as a BEIR-style dataset (``CoIR-Retrieval/<task>`` on the Hugging Face hub).
Saved locally, a task is a folder with ``corpus.jsonl``, ``queries.jsonl`` and
``qrels/test.tsv`` (the ``coir`` reader); the root given holds one such folder per task, found
at any depth. Each system is scored on every task with the ``coir-ranking`` protocol (nDCG@10
exactly as CoIR computes it), and the table has one column per task and their mean, as
CoIR's leaderboard prints it. CoIR's own names order the columns; other folders follow by name.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from structret.errors import SuiteError
from structret.api import load_dataset
from structret.plugin import BenchTable, cache_dir, evaluate_retriever, make_protocol, make_retriever

NAME = "coir"
# CoIR's ten tasks as its leaderboard orders them (the folder names of the published data);
# CodeSearchNet and CodeSearchNet-CCR come as one folder per language, e.g. CodeSearchNet-python
TASKS = ("apps", "cosqa", "synthetic-text2sql", "CodeSearchNet", "CodeSearchNet-ccr", "codetrans-contest",
         "codetrans-dl", "stackoverflow-qa", "codefeedback-st", "codefeedback-mt")
LAYOUT = "corpus.jsonl, queries.jsonl and qrels/test.tsv"


def find_tasks(root: str | os.PathLike) -> list[tuple[str, Path]]:
    """``(name, folder)`` of every task folder under ``root`` (a folder with corpus.jsonl(.gz) and
    qrels/), in CoIR's order; the name is the folder's path below ``root``."""
    root = Path(root)
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise SuiteError(f"--data-root {root} {what}. Give the folder holding one CoIR task folder per task "
                         f"(each with {LAYOUT}).")
    found = []
    for folder in sorted({p.parent for pattern in ("corpus.jsonl", "corpus.jsonl.gz") for p in root.rglob(pattern)}):
        if (folder / "qrels").is_dir():
            found.append((folder.relative_to(root).as_posix() if folder != root else folder.name, folder))
    if not found:
        present = sorted(p.name for p in root.iterdir())[:20]
        raise SuiteError(f"--data-root {root}: no CoIR task folder under it (a folder with {LAYOUT}); it holds: "
                         f"{', '.join(present) or 'nothing'}. Save each task of CoIR-Retrieval there, e.g. {root}/cosqa/.")

    def order(item: tuple[str, Path]) -> tuple[int, str]:
        name = item[0].lower()
        for i, task in enumerate(TASKS):
            # CodeSearchNet-ccr-python before CodeSearchNet-python would match "CodeSearchNet": longest first
            if name == task.lower() or name.startswith(task.lower() + "-") and not any(
                    name.startswith(t.lower()) and len(t) > len(task) for t in TASKS):
                return i, name
        return len(TASKS), name

    return sorted(found, key=order)


def _group(name: str) -> str:
    """The leaderboard task a folder belongs to: CodeSearchNet(-ccr)-<language> folders are one task each."""
    base = name.rsplit("/", 1)[-1].lower()
    if base.startswith("codesearchnet-ccr-"):
        return "CodeSearchNet-ccr"
    if base.startswith("codesearchnet-"):
        return "CodeSearchNet"
    return name


def coir_table(root: str | os.PathLike, systems: list[str], *, batch_size: int = 32, limit: int | None = None,
               vector_cache: bool = True, split: str = "test") -> BenchTable:
    """Every system on every task under ``root``: nDCG@10 per task and their mean (CoIR's table)."""
    tasks = find_tasks(root)
    protocols, notes = [], []
    for name, folder in tasks:
        dataset = load_dataset(f"{NAME}:{folder}", split=split)
        print(dataset.stats.summary(), file=sys.stderr)
        protocol = make_protocol(dataset, limit)
        protocols.append((name, protocol))
        skipped = sum(dataset.stats.skipped.values())
        notes.append(f"{name}: {protocol.sizes['queries']} queries, {protocol.sizes['documents']} documents"
                     + (f"; {skipped} rows skipped or left out (see the read summary on stderr)" if skipped else ""))
    rows = []
    for system in systems:
        retriever = make_retriever(system, batch_size=batch_size, cache=cache_dir() if vector_cache else None)
        values, dropped = {}, 0
        for i, (name, protocol) in enumerate(protocols, 1):
            print(f"[{i}/{len(protocols)}] {system} on {name}", file=sys.stderr)
            row = evaluate_retriever(protocol, retriever, system)
            values[name] = row["nDCG@10"]
            dropped += int(row.get("identical_ids_dropped") or 0)
        groups: dict[str, list[float]] = {}
        for name, _ in protocols:
            groups.setdefault(_group(name), []).append(values[name])
        values["avg"] = statistics.fmean(statistics.fmean(v) for v in groups.values())
        rows.append({"label": system, "block": "", "values": values, "paper": {}, "marks": [],
                     "system": {"name": system, "identical_ids_dropped": dropped}})
    columns = [{"key": name, "dataset": name, "metric": "nDCG@10", "kind": "measured", "header": name}
               for name, _ in protocols]
    columns.append({"key": "avg", "dataset": "Avg", "metric": "nDCG@10", "kind": "measured", "header": "Avg"})
    n_groups = len({_group(name) for name, _ in protocols})
    caption = (f"nDCG@10 ×100 on the CoIR tasks found under {root} (split {split}), computed as CoIR does: the whole "
               f"corpus ranked for each query, a document whose id equals the query's ignored, pytrec_eval "
               f"ndcg_cut.10 per query, mean over queries. Avg = mean over {n_groups} tasks, as CoIR's leaderboard "
               f"averages: the CodeSearchNet-<language> and CodeSearchNet-ccr-<language> folders count as one task "
               f"each, their languages' mean" + (f" (CoIR has {len(TASKS)} tasks; {n_groups} found)"
                                                  if n_groups != len(TASKS) else "") + ".")
    return BenchTable(title="CoIR (nDCG@10)", caption=caption, columns=columns, rows=rows, notes=notes)
