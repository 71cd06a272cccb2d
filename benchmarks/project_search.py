"""Searching one whole project (issue 39): the validation and test projects of the six-language corpus.

Each project is a source package the corpus keeps out of training (benchmarks/data/code_sources.toml,
its ``valid`` and ``test`` packages; none in ../shared/RESERVED-SOURCES.md, which code_corpus.py
checks), prepared by ``structret.api.projects``: docstrings blanked with line numbers kept,
their first paragraphs the queries, the answer a file and a line. Each project is indexed by
``index_source`` (what ``structret index`` runs) with MiniLM and ``bm25-fields``, and these systems
are scored from that one index:

- ``bm25-fields``: the lexical side alone (fusion weight 1);
- ``minilm``: the dense side alone (weight 0);
- ``default``: ``structret index``'s fusion today (zscore, lexical weight 0.3);
- ``tuned``: the fusion (method and weight) with the best macro MRR@10 over the validation projects;
- ``tuned+coherence``, ``tuned+prior``, ``tuned+both``: that fusion with the query-time structure
  levers of ``structret.api.projects`` (a file-coherence boost, a call-graph prior), each
  strength chosen on the validation projects from STRENGTHS (0 if nothing pays).

Choices read the validation projects only; the test projects are scored once, with what was chosen. ::

    python benchmarks/data/code_corpus.py --cache /work/data/code     # the packages' sources (src/)
    python benchmarks/project_search.py prepare
    python benchmarks/project_search.py run                             # tables, and results/project-search.json

``--languages`` (default python go java) and ``--data-dir`` (default $STRUCTRET_CODE_DATA or
/work/data/code) say which projects and where.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "data"))
OUT = HERE / "results" / "project-search.json"
SYSTEMS = {"bm25-fields": "zscore:1.0", "minilm": "zscore:0.0", "default": "zscore:0.3"}
SPLITS = ("valid", "test")
STRENGTHS = (0.0, 0.05, 0.1, 0.2)  # what the structure levers' strengths are chosen from


def data_dir(args) -> Path:
    return Path(args.data_dir or os.environ.get("STRUCTRET_CODE_DATA") or "/work/data/code")


def projects(args, split: str) -> list[tuple[str, Path]]:
    """(language, source folder) of each project of ``split``."""
    from code_corpus import load_sources

    found = []
    for language in args.languages:
        for source in load_sources()[language][split]:
            folder = data_dir(args) / "src" / language / source.slug
            if not folder.is_dir():
                raise SystemExit(f"{folder} is missing: run benchmarks/data/code_corpus.py --cache {data_dir(args)}")
            found.append((language, folder))
    return found


def prepared_dir(args, split: str, language: str, folder: Path) -> Path:
    return data_dir(args) / "projects" / split / f"{language}-{folder.name}"


def prepare(args) -> None:
    from structret.api.projects import SUMMARY, prepare_project

    for split in SPLITS:
        for language, folder in projects(args, split):
            out = prepared_dir(args, split, language, folder)
            if (out / SUMMARY).is_file():
                continue
            started = time.perf_counter()
            done = prepare_project(folder, out)
            print(f"{split} {out.name}: {done.files} files, {done.functions} functions, {done.queries} queries "
                  f"({dict(done.languages)}); dropped {done.dropped}; {len(done.skipped_files)} files skipped "
                  f"[{time.perf_counter() - started:.0f} s]", file=sys.stderr, flush=True)


def macro(scores: list[dict[str, float]], metric: str) -> float:
    return statistics.mean(s[metric] for s in scores)


def run(args) -> None:
    from structret.api.projects import candidates, metrics
    from structret.fusion import grid
    from structret.models import load_model

    model = load_model("minilm")
    found = {}
    for split in SPLITS:
        found[split] = []
        for language, folder in projects(args, split):
            prepared = prepared_dir(args, split, language, folder)
            started = time.perf_counter()
            index_dir = data_dir(args) / "projects-index" / split / prepared.name
            got = candidates(prepared, index_dir, model=model, lexical="bm25-fields")
            print(f"{split} {prepared.name}: {len(got.answers)} queries over {got.functions} functions "
                  f"[{time.perf_counter() - started:.0f} s]", file=sys.stderr, flush=True)
            found[split].append((language, got))
    # the fusion chosen on the validation projects: macro MRR@10, ties to the smaller lexical weight
    fusions = {f.spec: f for f in grid()}
    tried = {spec: macro([metrics(c.ranks(f)) for _, c in found["valid"]], "MRR@10") for spec, f in fusions.items()}
    tuned = max(tried, key=lambda spec: (tried[spec], -fusions[spec].weight))
    # then each structure lever's strength with that fusion, and both together, on validation too
    levers = {(a, b): macro([metrics(c.ranks(tuned, coherence=a, prior=b)) for _, c in found["valid"]], "MRR@10")
              for a in STRENGTHS for b in STRENGTHS}
    coherence = max(STRENGTHS, key=lambda a: (levers[a, 0.0], -a))
    prior = max(STRENGTHS, key=lambda b: (levers[0.0, b], -b))
    both = max(levers, key=lambda pair: (levers[pair], -sum(pair)))
    systems = {name: {"fusion": spec} for name, spec in SYSTEMS.items()}
    systems["tuned"] = {"fusion": tuned}
    systems["tuned+coherence"] = {"fusion": tuned, "coherence": coherence}
    systems["tuned+prior"] = {"fusion": tuned, "prior": prior}
    systems["tuned+both"] = {"fusion": tuned, "coherence": both[0], "prior": both[1]}
    record = {"model": "sentence-transformers/all-MiniLM-L6-v2", "lexical": "bm25-fields", "systems": systems,
              "tuning": {"metric": "macro MRR@10 over the validation projects", "fusions": tried, "chosen": tuned,
                         "levers (coherence,prior) with the chosen fusion": {f"{a},{b}": v for (a, b), v in levers.items()}},
              "splits": {}}
    for split in SPLITS:
        rows = {}
        for language, got in found[split]:
            rows[got.project] = {"language": language, "queries": len(got.answers), "functions": got.functions,
                                 **{name: metrics(got.ranks(spec["fusion"], coherence=spec.get("coherence", 0.0),
                                                            prior=spec.get("prior", 0.0)))
                                    for name, spec in systems.items()}}
        record["splits"][split] = rows
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {OUT}; fusion chosen on validation: {tuned}", file=sys.stderr)
    table(record)


def table(record: dict) -> None:
    names = list(record["systems"])
    metric_names = ("MRR@10", "NDCG@10", "R@1", "R@10")
    for split, rows in record["splits"].items():
        print(f"\n**{split} projects, MRR@10 ×100 per project**; chosen on validation: "
              + "; ".join(f"{n} = " + ", ".join(f"{k} {v}" for k, v in spec.items())
                          for n, spec in record["systems"].items() if n.startswith("tuned")) + "\n")
        print("| project | queries | functions | " + " | ".join(names) + " |")
        print("|---|---:|---:|" + "---:|" * len(names))
        for project, row in rows.items():
            print(f"| {project} | {row['queries']} | {row['functions']} | " +
                  " | ".join(f"{100 * row[n]['MRR@10']:.1f}" for n in names) + " |")
        print(f"\n**{split}: macro over {len(rows)} projects ({sum(r['queries'] for r in rows.values())} queries), "
              f"×100**\n")
        print("| system | " + " | ".join(metric_names) + " |")
        print("|---|" + "---:|" * len(metric_names))
        for n in names:
            print(f"| {n} | " + " | ".join(f"{100 * macro([row[n] for row in rows.values()], m):.1f}"
                                         for m in metric_names) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("prepare", "run", "table"))
    parser.add_argument("--data-dir")
    parser.add_argument("--languages", nargs="*", default=["python", "go", "java"])
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args)
    elif args.command == "run":
        run(args)
    else:
        table(json.loads(OUT.read_text()))


if __name__ == "__main__":
    main()
