"""The model card (README.md) of an export: what the run was, from its own files only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from structret.artifacts import META_FILE
from structret.contracts import HasTextPrefixes

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
KNOWN_LICENCES = {MINILM_ID: "apache-2.0"}
UNKNOWN_LICENCE = "unknown: check the base model's licence"


def run_facts(model: Any, run: Path) -> dict[str, Any]:
    """Base model, recipe, objectives, data and what was measured, as recorded in ``run``."""
    # a run directory or one of its checkpoints, as structret.search.system.trained_model reads them;
    # open_run has verified its checksums already
    final = run / "final" if (run / "final" / META_FILE).is_file() else run
    meta = _json(final / META_FILE) or {}
    recipe = meta.get("recipe") or {}
    if final != run:
        run_dir = run
    else:  # a checkpoint: metrics.jsonl and counts.json are in the run above it
        run_dir = run.parent
    base = meta.get("base_model") or recipe.get("model") or "unknown"
    rows = _jsonl(run_dir / "metrics.jsonl")
    trained = [r for r in rows if r.get("phase", "train") == "train"]
    return {
        "base_model": base,
        "licence": licence(str(base)),
        "recipe": recipe.get("name") or "(none: settings given on the command line)",
        "objective": recipe.get("objective") or meta.get("objective") or "unknown",
        "data": recipe.get("data") or "unknown",
        "split": recipe.get("split") or "",
        "steps": meta.get("step"),
        "batch_size": recipe.get("batch_size"),
        "final_loss": trained[-1].get("loss") if trained else None,
        "counts": _json(run_dir / "counts.json"),
        "bench": [(str(p.relative_to(run_dir)), p.read_text(encoding="utf-8", errors="replace")[:4000])
                  for p in _bench_files(run_dir)],
    }


def licence(base: str) -> str:
    """The base weights' licence: known ids, else the ``license:`` of a local README's front matter."""
    if base in KNOWN_LICENCES:
        return KNOWN_LICENCES[base]
    readme = Path(base) / "README.md"
    if readme.is_file():
        found = re.search(r"^license:\s*(\S+)", readme.read_text(encoding="utf-8", errors="replace")[:4000], re.M)
        if found:
            return found.group(1)
    return UNKNOWN_LICENCE


def _bench_files(run: Path) -> list[Path]:
    # 'structret bench --out DIR' inside the run is the only place a run keeps measured numbers
    return sorted(p for p in run.glob("bench*/**/*") if p.is_file() and p.suffix in (".md", ".json", ".csv"))


def model_card(model: Any, run: Path, *, fmt: str, usage: str, checks: list[str]) -> str:
    f = run_facts(model, run)
    b = model.backbone
    licence_tag = f["licence"] if f["licence"] != UNKNOWN_LICENCE else "other"
    lines = [
        "---",
        f"license: {licence_tag}",
        "library_name: sentence-transformers" if fmt == "sentence-transformers" else "library_name: onnx",
        "tags: [structret, dense-retrieval, sentence-similarity]",
        "---",
        "",
        f"# {run.resolve().name} ({fmt} export of a structret run)",
        "",
        f"Exported by `structret export` from the run `{run}`.",
        "",
        "## Model",
        "",
        f"- Base model: `{f['base_model']}`",
        f"- Licence of the base weights: {f['licence']}",
        f"- Backbone: `{model.backbone_name}`, {b.dim} dimensions, {b.pooling} pooling, "
        + ("unit-length vectors (compare with cosine or dot product)" if b.normalize
           else "raw vectors (compare with dot product)")
        + f", at most {b.max_length} tokens per text",
    ]
    prefixes = (b.text_prefixes if isinstance(b, HasTextPrefixes) else None) or {}
    if any(prefixes.values()):
        lines.append("- Queries and documents are read with different prefixes: "
                     + ", ".join(f"{k} {v!r}" for k, v in prefixes.items())
                     + " (sentence-transformers: `prompts` in config_sentence_transformers.json; "
                       "use `encode_query` / `encode_document`)")
    else:
        lines.append("- Queries and documents are encoded alike (no prefixes)")
    lines += [
        "",
        "## Training",
        "",
        f"- Recipe: `{f['recipe']}`; objectives: `{f['objective']}`",
        f"- Data: `{f['data']}`" + (f" (split {f['split']})" if f["split"] else "")
        + "; the run does not record how many pairs it holds",
    ]
    if f["steps"] is not None:
        seen = f" × batch {f['batch_size']} = {f['steps'] * f['batch_size']} training examples seen" \
            if f["batch_size"] else ""
        lines.append(f"- Steps: {f['steps']}{seen}")
    if f["final_loss"] is not None:
        lines.append(f"- Last logged training loss: {f['final_loss']:.4f} (metrics.jsonl)")
    if f["counts"]:
        lines.append(f"- What corruption objectives masked (counts.json): `{json.dumps(f['counts'])}`")
    lines += ["", "## Evaluation", ""]
    if f["bench"]:
        lines.append("Benchmark results recorded in the run directory:")
        for name, text in f["bench"]:
            lines += ["", f"From `{name}`:", "", "```", text.rstrip(), "```"]
    else:
        lines.append(f"No benchmark numbers are recorded in the run directory. Measure them with "
                     f"`structret bench --system {run}` (add `--data` for your data).")
    lines += ["", "## Export check", "", *[f"- {c}" for c in checks], "", "## Use", "", usage.strip(), ""]
    return "\n".join(lines)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return []
