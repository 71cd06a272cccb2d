"""Searching one whole project (issue 39): the validation and test projects of the six-language corpus.

Each project is a source package the corpus keeps out of training (benchmarks/data/code_sources.toml,
its ``valid`` and ``test`` packages; none in ../shared/RESERVED-SOURCES.md, which code_corpus.py
checks), prepared by ``structret.project.benchmark``: docstrings blanked with line numbers kept,
their first paragraphs the queries, the answer a file and a line. Each project is indexed by
``index_source`` (what ``structret index`` runs) with MiniLM and ``bm25-project`` (bm25-fields' fields
and a function's place: its file's path, its class, its callers), each field also scored alone so
that any field weights are scored from the same index, and these systems:

- ``bm25-fields``: the lexical side alone (fusion weight 1), bm25-fields' weights (no place fields);
- ``minilm``: the dense side alone (weight 0);
- ``default``: ``structret index``'s default before the place fields (bm25-fields, zscore:0.3);
- ``tuned``: that lexical side with the fusion (method and weight) best in macro MRR@10 over the
  validation projects;
- ``tuned+coherence``, ``tuned+prior``, ``tuned+both``: that fusion with the query-time structure
  levers of ``structret.project.benchmark`` (a file-coherence boost, a call-graph prior), each
  strength chosen on the validation projects from STRENGTHS (0 if nothing pays);
- ``+path``, ``+scope``, ``+callers``, ``+calls``: the default fusion with one more field weighed in
  (its weight chosen on validation from FIELD_WEIGHTS), each lever alone;
- ``place``: path, scope and callers weighed together (the grid PLACE_GRID, chosen on validation),
  then the fusion's lexical weight chosen on validation: ``bm25-project``'s default weights and
  ``structret index``'s default now.

Choices read the validation projects only; the test projects are scored once, with what was chosen. ::

    python benchmarks/data/code_corpus.py --cache /work/data/code     # the packages' sources (src/)
    python benchmarks/project_search.py prepare
    python benchmarks/project_search.py run                             # tables, and results/project-search.json

``--languages`` (default python go java) and ``--data-dir`` (default $STRUCTRET_CODE_DATA or
/work/data/code) say which projects and where.

``run --model RUN`` scores a trained run instead of MiniLM, with ``bm25-project`` as ``structret index``
fuses it (its default weights): each side alone, ``structret index``'s default fusion, the fusion chosen
on the validation projects, and each ``--fusion SPEC`` given (the one a recipe ships with), written to
``results/project-search-RUN.json`` (``table --model RUN`` prints it again)::

    python benchmarks/project_search.py run --model /work/runs/curves/sda-960-s44/final --fusion minmax:0.25
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
DEFAULT_FUSION = "zscore:0.3"
# bm25-fields' default weights: the base every field lever is added to
BASE_WEIGHTS = {"name": 1.0, "signature": 0.5, "calls": 0.0, "comments": 0.25, "body": 1.0}
FIELD_WEIGHTS = (0.1, 0.25, 0.5, 1.0, 2.0)
PLACE_GRID = {"path": (0.0, 0.5, 1.0), "scope": (0.0, 0.5, 1.0, 2.0), "callers": (0.0, 0.25, 0.5, 1.0)}
LEXICAL_WEIGHTS = (0.2, 0.25, 0.3, 0.4, 0.5)  # zscore fusion weights tried with the chosen field weights
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
    from structret.project.benchmark import SUMMARY, prepare_project

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


def result_path(args) -> Path:
    return OUT.with_name(f"project-search-{model_tag(args)}.json") if args.model else OUT


def model_tag(args) -> str:
    """A run folder's name (its parent's when it is a run's ``final``)."""
    path = Path(args.model)
    return path.parent.name if path.name == "final" else path.name


def scored(args, model) -> dict[str, list[tuple[str, object]]]:
    """Each split's (language, Candidates), indexed with ``model`` and bm25-project."""
    from structret.project.benchmark import candidates

    found: dict[str, list[tuple[str, object]]] = {}
    for split in SPLITS:
        found[split] = []
        for language, folder in projects(args, split):
            prepared = prepared_dir(args, split, language, folder)
            started = time.perf_counter()
            index_dir = data_dir(args) / "projects-index" / (model_tag(args) if args.model else "") / split / prepared.name
            got = candidates(prepared, index_dir, model=model, lexical="bm25-project",
                             fields=() if args.model else [*BASE_WEIGHTS, *PLACE_GRID])
            print(f"{split} {prepared.name}: {len(got.answers)} queries over {got.units} units "
                  f"[{time.perf_counter() - started:.0f} s]", file=sys.stderr, flush=True)
            found[split].append((language, got))
    return found


def run_model(args) -> None:
    """A trained run in a whole project, fused as ``structret index`` fuses it; see the module's doc."""
    from structret.project.benchmark import metrics
    from structret.search.fusion import grid, parse
    from structret.models import load_model

    found = scored(args, load_model(args.model))
    tried = {f.spec: macro([metrics(c.ranks(f)) for _, c in found["valid"]], "MRR@10") for f in grid()}
    tuned = max(tried, key=lambda spec: (tried[spec], -parse(spec).weight))
    systems = {"bm25-project": "zscore:1.0", "dense": "zscore:0.0", "default": parse(None).spec, "tuned": tuned,
               **{f"given {spec}": parse(spec).spec for spec in args.fusion}}
    record = {"model": str(args.model), "lexical": "bm25-project (its default weights)",
              "systems": {name: {"fusion": spec} for name, spec in systems.items()},
              "tuning": {"metric": "macro MRR@10 over the validation projects", "fusions": tried, "chosen": tuned},
              "splits": {split: {got.project: {"language": language, "queries": len(got.answers),
                                               "units": got.units,
                                               **{name: metrics(got.ranks(spec)) for name, spec in systems.items()}}
                                 for language, got in found[split]} for split in SPLITS}}
    out = result_path(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}; fusion chosen on validation: {tuned}", file=sys.stderr)
    table(record)


def run(args) -> None:
    import itertools

    from structret.project.benchmark import metrics
    from structret.search.fusion import grid
    from structret.models import load_model

    found = scored(args, load_model("minilm"))

    def valid(fusion, **levers) -> float:
        return macro([metrics(c.ranks(fusion, **levers)) for _, c in found["valid"]], "MRR@10")

    base = {"weights": BASE_WEIGHTS}
    # the fusion chosen on the validation projects: macro MRR@10, ties to the smaller lexical weight
    fusions = {f.spec: f for f in grid()}
    tried = {spec: valid(f, **base) for spec, f in fusions.items()}
    tuned = max(tried, key=lambda spec: (tried[spec], -fusions[spec].weight))
    # then each structure lever's strength with that fusion, and both together, on validation too
    levers = {(a, b): valid(tuned, coherence=a, prior=b, **base) for a in STRENGTHS for b in STRENGTHS}
    coherence = max(STRENGTHS, key=lambda a: (levers[a, 0.0], -a))
    prior = max(STRENGTHS, key=lambda b: (levers[0.0, b], -b))
    both = max(levers, key=lambda pair: (levers[pair], -sum(pair)))
    # the field levers: each alone with the default fusion, then the place fields together
    alone = {(f, w): valid(DEFAULT_FUSION, weights={**BASE_WEIGHTS, f: w})
             for f in ("path", "scope", "callers", "calls") for w in FIELD_WEIGHTS}
    place = {ws: valid(DEFAULT_FUSION, weights={**BASE_WEIGHTS, **dict(zip(PLACE_GRID, ws))})
             for ws in itertools.product(*PLACE_GRID.values())}
    chosen = dict(zip(PLACE_GRID, max(place, key=lambda ws: (place[ws], -sum(ws)))))
    placed = {**BASE_WEIGHTS, **chosen}
    weighed = {w: valid(f"zscore:{w}", weights=placed) for w in LEXICAL_WEIGHTS}
    place_fusion = f"zscore:{max(weighed, key=lambda w: (weighed[w], -w))}"
    systems = {name: {"fusion": spec, **base} for name, spec in SYSTEMS.items()}
    systems["tuned"] = {"fusion": tuned, **base}
    systems["tuned+coherence"] = {"fusion": tuned, "coherence": coherence, **base}
    systems["tuned+prior"] = {"fusion": tuned, "prior": prior, **base}
    systems["tuned+both"] = {"fusion": tuned, "coherence": both[0], "prior": both[1], **base}
    for f in ("path", "scope", "callers", "calls"):
        w = max(FIELD_WEIGHTS, key=lambda w: (alone[f, w], -w))
        systems[f"+{f}"] = {"fusion": DEFAULT_FUSION, "weights": {**BASE_WEIGHTS, f: w}}
    systems["place"] = {"fusion": place_fusion, "weights": placed}
    record = {"model": "sentence-transformers/all-MiniLM-L6-v2", "lexical": "bm25-project", "systems": systems,
              "tuning": {"metric": "macro MRR@10 over the validation projects", "fusions": tried, "chosen": tuned,
                         "levers (coherence,prior) with the chosen fusion": {f"{a},{b}": v for (a, b), v in levers.items()},
                         "one field added (field,weight) with the default fusion": {f"{f},{w}": v for (f, w), v in alone.items()},
                         "place fields (path,scope,callers) with the default fusion": {",".join(map(str, ws)): v for ws, v in place.items()},
                         "lexical weight with the place fields": weighed},
              "splits": {}}
    for split in SPLITS:
        rows = {}
        for language, got in found[split]:
            rows[got.project] = {"language": language, "queries": len(got.answers), "units": got.units,
                                 **{name: metrics(got.ranks(spec["fusion"], coherence=spec.get("coherence", 0.0),
                                                            prior=spec.get("prior", 0.0), weights=spec["weights"]))
                                    for name, spec in systems.items()}}
        record["splits"][split] = rows
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {OUT}; fusion chosen on validation: {tuned}; place fields {chosen} with {place_fusion}",
          file=sys.stderr)
    table(record)


def table(record: dict) -> None:
    names = list(record["systems"])
    metric_names = ("MRR@10", "NDCG@10", "R@1", "R@10")
    for split, rows in record["splits"].items():
        if "weights" not in next(iter(record["systems"].values())):  # run --model: no field levers
            print(f"\n**{split} projects, MRR@10 ×100 per project**; {record['model']}; fusion chosen on "
                  f"validation: {record['tuning']['chosen']}\n")
        else:
            print(f"\n**{split} projects, MRR@10 ×100 per project**; chosen on validation: "
                  + "; ".join(f"{n} = " + ", ".join(f"{k} {v}" for k, v in spec.items() if k != "weights")
                              for n, spec in record["systems"].items() if n.startswith("tuned")) + "; "
                  + "; ".join(f"{n} = " + ", ".join(f"{f} {w}" for f, w in spec["weights"].items()
                                                    if w != BASE_WEIGHTS.get(f, 0.0) or n == "place" and f in PLACE_GRID)
                              + f" ({spec['fusion']})" for n, spec in record["systems"].items()
                              if n[0] == "+" or n == "place")
                  + "\n")
        print("| project | queries | units | " + " | ".join(names) + " |")
        print("|---|---:|---:|" + "---:|" * len(names))
        for project, row in rows.items():
            print(f"| {project} | {row['queries']} | {row['units']} | " +
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
    parser.add_argument("--model", help="run: a trained run (its folder) instead of MiniLM; see the module's doc")
    parser.add_argument("--fusion", nargs="*", default=[], help="run --model: fusions scored beside the tuned one")
    args = parser.parse_args()
    if args.fusion and not args.model:
        parser.error("--fusion goes with --model")
    if args.command == "prepare":
        prepare(args)
    elif args.command == "run":
        run_model(args) if args.model else run(args)
    else:
        table(json.loads(result_path(args).read_text()))


if __name__ == "__main__":
    main()
