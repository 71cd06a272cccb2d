"""``structret bench``: score named systems on one dataset and print one table.

The protocol is the one the dataset's task names (``structret.evaluation``); this module
holds the table, the default dataset (the mined standard library) and the systems loop.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from structret import defaults
from structret.artifacts import cache_dir
from structret.contracts import HasSettings
from structret.datasets import load_dataset
from structret.evaluation import evaluate_retriever, make_protocol, tune_fusion
from structret.mining import mine
from structret.records import Dataset
from structret.search.system import DenseRetriever, HybridRetriever, resolve_system


def stdlib_path() -> Path:
    """The installed Python standard library mined into CodeSearchNet rows (mined once, cached)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    out = cache_dir() / f"stdlib-python{version}.jsonl.gz"
    if not out.exists():
        print(f"mining the Python {version} standard library into {out} (once)", file=sys.stderr)
        # one process per core (up to 4): the rows are the same bytes for any number of workers, and
        # mining is a third of the first run on 2 cores with one
        workers = max(1, min(4, os.cpu_count() or 1))
        report = mine(sysconfig.get_paths()["stdlib"], defaults.MINER, out, repo=f"cpython-{version}-stdlib", workers=workers,
                      splits=(0.8, 0.1, 0.1))
        print(report.summary(), file=sys.stderr)
    return out


def default_dataset(split: str | None = None) -> Dataset:
    """The installed Python standard library, mined once into CodeSearchNet format and cached.

    Zero-shot evaluation trains on none of it, so by default every split is test data:
    the test split alone (about 400 functions) is too small for CodeSearchNet's
    1000-pair batches.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    out = stdlib_path()
    dataset = load_dataset(f"codesearchnet:{out}", split=split)
    dataset.name = f"Python {version} standard library, mined ({f'{split} split' if split else 'all splits'})"
    print(dataset.stats.summary(), file=sys.stderr)
    return dataset


@dataclass
class BenchResult:
    dataset: str
    protocol: str
    columns: list[str]
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    # system -> what changes its numbers (tokenizer, lengths, dtype, ...)
    settings: dict[str, str] = field(default_factory=dict)

    def markdown(self) -> str:
        size = ", ".join(f"{n} {what}" for what, n in self.sizes.items())
        lines = [f"{self.dataset} — {self.protocol} ({size})", ""]
        header = ["system", *self.columns, "seconds"]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for system, row in self.rows.items():
            cells = [system]
            for c in self.columns:
                v = row.get(c)
                cells.append("n/a" if v is None else f"{100 * v:.2f}")
            cells.append(f"{row['seconds']:.1f}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("Scores ×100, higher is better (the Python API returns the same measures as fractions, 0 to 1). "
                     "seconds: wall time of the row, encoding or indexing the documents and the queries and scoring "
                     "them (vectors reused from the cache cost nothing). " + " ".join(self.notes))
        if self.settings:
            lines.append("")
            lines += [f"- {system}: {text}" for system, text in self.settings.items()]
        return "\n".join(lines)

    def write_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2))


def run_bench(dataset: Dataset, systems: list[str], *, batch_size: int = 32,
              limit: int | None = None, show_progress: bool = True, vector_cache: bool = True,
              fusion: Any = None, tune: Dataset | None = None, tune_measure: str | None = None) -> BenchResult:
    """Each system built by name, then fitted and scored with the protocol of the dataset's task.
    ``vector_cache``: dense systems keep their vectors in ``cache_dir()/vectors`` and reuse them.
    Hybrid systems (``bm25+minilm``) fuse by ``fusion`` (structret.search.fusion.parse; None: a trained
    run's shipped fusion, else the default), or by the fusion that scores best on ``tune`` (a
    validation split of the same data) by ``tune_measure`` (default: the protocol's first measure,
    ties broken by the next), recorded in the row."""
    protocol = make_protocol(dataset, limit)
    result = BenchResult(dataset.name, protocol.name, protocol.columns, sizes=protocol.sizes)
    for system in systems:
        # build every retriever before timing: model loading is not retrieval
        resolved = resolve_system(system)
        # the fusion given is a hybrid's; the system decided the rest (a run's shipped fusion, or the default)
        if resolved.hybrid and fusion is not None:
            resolved = resolved.with_fusion(fusion)
        retriever = resolved.retriever(batch_size=batch_size, show_progress=show_progress,
                                       cache=cache_dir() if vector_cache else None)
        tuning = None
        if isinstance(retriever, HybridRetriever):
            if tune is not None:
                retriever, tuning = tune_fusion(retriever, tune, limit=limit, show_progress=show_progress,
                                                measure=tune_measure)
                tuning["split"] = tune.name
                print(f"{system}: {tuning['fusion']} scored best on {tune.name} ({tuning['measure']} "
                      f"{100 * tuning['scores'][tuning['fusion']]:.2f})", file=sys.stderr)
        row = result.rows[system] = evaluate_retriever(protocol, retriever, system)
        if isinstance(retriever, HybridRetriever):
            row["fusion"] = retriever.fusion.spec
            if tuning is not None:
                row["fusion_tuning"] = tuning
        if isinstance(retriever, (DenseRetriever, HybridRetriever)) and retriever.cache_summary():
            print(f"{system}: {retriever.cache_summary()}", file=sys.stderr)
        result.settings[system] = (retriever.settings() if isinstance(retriever, HasSettings)
                                   else "(its settings are not reported)")
        if tuning is not None:
            result.settings[system] += f"; chosen on {tuning['split']} by {tuning['measure']}"
    result.notes = protocol.notes
    return result
