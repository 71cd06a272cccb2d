"""``structret bench --recipe/--suite``: train recipes, evaluate them, print the papers' tables.

A *suite* (``structret/suites/*.toml``) names a paper's table: its datasets and metrics
(columns), its systems (rows: a pretraining recipe, an optional fine-tuning recipe and
overrides), the paper's reported numbers per row and column, and the offline stand-in
data and backbone to use when the paper's data is not given.

Everything expensive is cached under ``cache_dir()``:

* ``runs/<recipe>-<key>/``: a training run, ``key`` = hash of the resolved recipe (minus
  its output directory and logging fields) plus the identity of its data (spec, options,
  split, file sizes and mtimes) and of its starting model (a cached run by its key, a
  local directory by its files' sizes and mtimes, a hub id by name). Finished runs are
  reused; interrupted ones resume from their last checkpoint.
* ``init/<key>/``: fresh from-scratch models (Khan & Jang) whose tokenizer is learned from
  the training split.
* ``evals/<key>.json``: one system's metrics on one test set, ``key`` = hash of the system
  (run directory + its recipe, or backbone + model identity, or retriever name), the test
  data identity and the protocol settings.

Changing one recipe field therefore re-trains and re-evaluates only the rows it reaches.

This module imports only the standard library at import time.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import tomllib

from structret.errors import StructretError

CACHE_VERSION = 1  # bump when a cached artifact's meaning changes
# recipe fields that do not change what a run computes
_NOT_IDENTITY = {"name", "description", "reproduces", "output", "log_every", "checkpoint_every",
                 "keep_checkpoints"}


class SuiteError(StructretError, ValueError):
    """A suite file cannot be found or read, or a bench table cannot be built."""


# --- suite files ---------------------------------------------------------------------


@dataclass
class SuiteMetric:
    label: str                       # the paper's column name
    measured: str                    # the protocol column measured here (exact, or a prefix)
    fallback: str = ""               # used (and marked *) when `measured` is n/a


@dataclass
class SuiteDataset:
    key: str
    label: str
    metrics: list[SuiteMetric]
    formats: list[str] = field(default_factory=list)   # --data FORMAT:PATH of these formats goes here
    backbone: str = ""               # the paper's backbone (the untrained baseline row)
    standin_data: str = ""           # FORMAT:PATH, or "stdlib" (the mined standard library)
    standin_options: dict[str, Any] = field(default_factory=dict)
    standin_backbone: str = ""       # "" = each recipe's own backbone
    standin_label: str = ""
    standin_set: dict[str, Any] = field(default_factory=dict)
    unavailable: str = ""            # why it cannot run without --data


@dataclass
class SuiteRow:
    label: str
    block: str = ""
    recipe: dict[str, str] = field(default_factory=dict)     # dataset key -> pretraining recipe
    finetune: dict[str, str] = field(default_factory=dict)   # dataset key -> fine-tuning recipe
    set: dict[str, dict[str, Any]] = field(default_factory=dict)  # dataset key -> recipe overrides
    init: str = ""                   # fresh-model options (backbones trained from scratch)
    paper_only: str = ""             # why this row has no measurement
    paper: dict[str, dict[str, str]] = field(default_factory=dict)  # dataset key -> column -> number as printed


@dataclass
class Suite:
    name: str
    title: str
    paper: str
    source: str
    datasets: list[SuiteDataset]
    rows: list[SuiteRow]
    scale: float = 100
    digits: int = 2
    notes: list[str] = field(default_factory=list)
    backbone_set: dict[str, dict[str, Any]] = field(default_factory=dict)


def list_suites() -> list[str]:
    folder = resources.files("structret") / "suites"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def _per_dataset(value: Any, keys: list[str], where: str) -> dict[str, Any]:
    """``"bibert"`` -> the same for every dataset; ``{code = ..., product = ...}`` as given."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, str):
        return {k: value for k in keys}
    if isinstance(value, dict):
        unknown = set(value) - set(keys)
        if unknown:
            raise SuiteError(f"{where}: unknown dataset key(s) {sorted(unknown)}; the suite's datasets are {keys}")
        return dict(value)
    raise SuiteError(f"{where}: expected a recipe name or a table of dataset key -> recipe, got {value!r}")


def load_suite(name_or_path: str) -> Suite:
    """A shipped suite by name (``santa``, ``khan-jang``, ``attempt``) or a ``.toml`` file."""
    path = Path(name_or_path).expanduser()
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise SuiteError(f"suite file {path} does not exist")
        text, where = path.read_text(encoding="utf-8"), str(path)
    else:
        known = list_suites()
        if name_or_path not in known:
            close = difflib.get_close_matches(name_or_path, known, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise SuiteError(f"unknown suite '{name_or_path}'.{hint} Shipped suites: {', '.join(known)}; "
                             f"or pass the path of a .toml file.")
        text = (resources.files("structret") / "suites" / f"{name_or_path}.toml").read_text(encoding="utf-8")
        where = f"suite '{name_or_path}'"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{where}: not valid TOML ({exc})") from None
    try:
        datasets = []
        for d in data.pop("datasets"):
            metrics = [SuiteMetric(**m) for m in d.pop("metrics")]
            datasets.append(SuiteDataset(metrics=metrics, **d))
        keys = [d.key for d in datasets]
        rows = []
        for i, r in enumerate(data.pop("rows")):
            at = f"{where}, row {i + 1} ({r.get('label', '?')})"
            r["recipe"] = _per_dataset(r.get("recipe"), keys, at)
            r["finetune"] = _per_dataset(r.get("finetune"), keys, at)
            r["set"] = _per_dataset(r.get("set"), keys, at)
            _per_dataset(r.get("paper"), keys, at)
            rows.append(SuiteRow(**r))
        suite = Suite(datasets=datasets, rows=rows, **data)
    except (KeyError, TypeError) as exc:
        raise SuiteError(f"{where}: {exc}") from None
    for row in suite.rows:
        for key, numbers in row.paper.items():
            labels = {m.label for d in suite.datasets if d.key == key for m in d.metrics}
            unknown = set(numbers) - labels
            if unknown:
                raise SuiteError(f"{where}, row {row.label}: paper numbers for unknown column(s) {sorted(unknown)} "
                                 f"of dataset '{key}' (columns: {sorted(labels)})")
    return suite


# --- data ----------------------------------------------------------------------------


@dataclass
class DataSpec:
    key: str                         # the suite's dataset key, or the spec itself
    label: str
    spec: str                        # FORMAT:PATH
    options: dict[str, Any] = field(default_factory=dict)
    standin: bool = False
    train_split: str = "train"
    test_split: str = "test"

    def options_field(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.options.items())

    def identity(self, split: str) -> dict[str, Any]:
        return {"spec": self.spec, "options": self.options, "split": split, "files": _data_fingerprint(self.spec)}


def resolve_spec(spec: str) -> str:
    """``stdlib`` -> the mined standard library's ``codesearchnet:PATH`` (mined once)."""
    if spec == "stdlib":
        from structret.bench import stdlib_path

        return f"codesearchnet:{stdlib_path()}"
    return spec


def _data_fingerprint(spec: str) -> str:
    _, _, path = spec.partition(":")
    entries = []
    for match in sorted(glob.glob(os.path.expanduser(path))) or [path]:
        p = Path(match)
        files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())[:10000] if p.is_dir() else []
        for f in files:
            st = f.stat()
            entries.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
    return _hash(entries)


def _model_fingerprint(model: str | None) -> str:
    """A cached run by its directory name (which holds its key); other directories by their files."""
    if not model:
        return ""
    p = Path(model).expanduser()
    if not p.exists():
        return model  # a hub id
    runs = (cache_root() / "runs").resolve()
    resolved = p.resolve()
    if runs in resolved.parents:
        return f"run:{resolved.relative_to(runs)}"
    files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
    return _hash([f"{f.relative_to(p) if f != p else f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files])


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cache_root() -> Path:
    from structret.bench import cache_dir

    return cache_dir()


# --- the table -----------------------------------------------------------------------


@dataclass
class BenchTable:
    """Rows = systems, columns = dataset x metric (paper and measured side by side in suites).

    Measured values are fractions (``values``); paper numbers are kept as printed
    (``paper``, strings); both are shown at ``scale`` (100: the paper prints x100).
    """

    title: str
    caption: str
    columns: list[dict[str, Any]]          # {key, dataset, metric, kind: measured|paper, header}
    rows: list[dict[str, Any]]             # {label, block, values: {key: float|None}, paper: {key: str}, marks, system}
    notes: list[str] = field(default_factory=list)
    scale: float = 100
    digits: int = 2

    def cell(self, row: dict[str, Any], column: dict[str, Any]) -> str:
        key = column["key"]
        if column["kind"] == "paper":
            return row.get("paper", {}).get(key) or "—"
        value = row.get("values", {}).get(key)
        if value is None:
            return "—" if row.get("paper_only") else "n/a"
        return f"{value * self.scale:.{self.digits}f}" + ("*" if key in row.get("marks", []) else "")

    def markdown(self) -> str:
        header = ["system", *(c["header"] for c in self.columns)]
        lines = [f"**{self.title}**", "", "| " + " | ".join(header) + " |",
                 "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
        block = None
        for row in self.rows:
            if row.get("block") and row["block"] != block:
                block = row["block"]
                lines.append("| " + " | ".join([f"*{block}*"] + [""] * len(self.columns)) + " |")
            lines.append("| " + " | ".join([row["label"], *(self.cell(row, c) for c in self.columns)]) + " |")
        lines += ["", self.caption]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")

    @classmethod
    def read_json(cls, path: str | os.PathLike) -> BenchTable:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))

    def plot(self, path: str | os.PathLike) -> None:
        """A bar chart of the same numbers: one panel per dataset x metric, measured beside paper."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        measured = [c for c in self.columns if c["kind"] == "measured"]
        paper_of = {(c["dataset"], c["metric"]): c for c in self.columns if c["kind"] == "paper"}
        panels = max(1, len(measured))
        labels = [r["label"] + (f" [{r['block']}]" if r.get("block") else "") for r in self.rows]
        height = max(2.5, 0.35 * len(labels) + 1.2)
        fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels + 2.5, height), sharey=True, squeeze=False)
        ys = list(range(len(labels)))
        for ax, column in zip(axes[0], measured or [None]):
            if column is None:
                break
            paper = paper_of.get((column["dataset"], column["metric"]))
            got = [(r.get("values", {}).get(column["key"]) or 0.0) * self.scale for r in self.rows]
            width = 0.4 if paper else 0.8
            ax.barh([y - (width / 2 if paper else 0) for y in ys], got, height=width, label="measured here",
                    color="tab:blue")
            if paper:
                printed = [_number(r.get("paper", {}).get(paper["key"])) for r in self.rows]
                ax.barh([y + width / 2 for y in ys], [p or 0.0 for p in printed], height=width, label="paper",
                        color="tab:gray")
            ax.set_title(f"{column['dataset']}: {column['metric']}", fontsize=9)
            ax.invert_yaxis()
            ax.tick_params(axis="x", labelsize=8)
        axes[0][0].set_yticks(ys)
        axes[0][0].set_yticklabels(labels, fontsize=8)
        axes[0][0].legend(fontsize=7, loc="lower right")
        fig.suptitle(self.title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)

    def write(self, out: str | os.PathLike) -> dict[str, Path]:
        """``results.json``, ``results.md`` and ``results.png`` in ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "results.json", "md": out / "results.md", "png": out / "results.png"}
        self.write_json(paths["json"])
        paths["md"].write_text(self.markdown(), encoding="utf-8")
        self.plot(paths["png"])
        return paths


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


# --- running -------------------------------------------------------------------------


@dataclass
class Cell:
    """What one row means on one dataset: pretrain? fine-tune? or the backbone as it is."""

    recipe: str = ""
    finetune: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)   # applied to both recipes (user --set last)
    base: dict[str, Any] = field(default_factory=dict)        # backbone, model, backbone_options of an untrained row
    init: str = ""
    system: str = ""                                          # a retriever/backbone/run dir given as is


class Runner:
    """Trains and evaluates cells, reusing everything cached; counts what it did."""

    def __init__(self, *, batch_size: int = 32, limit: int | None = None, show_progress: bool = True):
        self.batch_size, self.limit, self.show_progress = batch_size, limit, show_progress
        self.root = cache_root()
        self._test_sets: dict[str, Any] = {}
        self.trained: list[Path] = []
        self.reused_runs: list[Path] = []
        self.evaluated: list[str] = []
        self.reused_evals: list[str] = []
        self.budgets: dict[str, set[str]] = {}

    # training

    def run_dir(self, recipe: Any) -> Path:
        values = {k: v for k, v in recipe.to_dict().items() if k not in _NOT_IDENTITY}
        values["model"] = _model_fingerprint(recipe.model)
        identity = {"v": CACHE_VERSION, "recipe": values,
                    "data": {"spec": recipe.data, "split": recipe.split,
                             "files": _data_fingerprint(recipe.data)}}
        return self.root / "runs" / f"{recipe.name or 'recipe'}-{_hash(identity)}"

    def train(self, recipe: Any, data: DataSpec) -> Path:
        from structret import training
        from structret.training import checkpoints

        run = self.run_dir(recipe)
        recipe = recipe.model_copy(update={"output": str(run)})
        self.budgets.setdefault(data.key, set()).add(
            f"max_steps={recipe.max_steps}" if recipe.max_steps else f"{recipe.epochs} epoch(s)")
        if (run / "final" / "structret.json").is_file():
            print(f"  reusing {run} (same resolved recipe, data and starting model)", file=sys.stderr)
            self.reused_runs.append(run)
            return run
        resume = run.is_dir() and bool(checkpoints(run))
        print(f"  training {recipe.name or 'recipe'} ({recipe.objective} on {recipe.backbone}) -> {run}"
              + (" (resuming)" if resume else ""), file=sys.stderr)
        training.train(recipe, resume=resume)
        self.trained.append(run)
        return run

    def init_model(self, backbone: str, options: str, data: DataSpec) -> str:
        """A fresh from-scratch model whose tokenizer is learned from the training split (cached)."""
        from structret.api.models import new_model
        from structret.data import load_dataset
        from structret.recipes import parse_options_field

        directory = self.root / "init" / _hash({"v": CACHE_VERSION, "backbone": backbone, "options": options,
                                                 "data": data.identity(data.train_split)})
        if (directory / "config.json").is_file():
            return str(directory)
        dataset = load_dataset(data.spec, split=data.train_split, options=data.options)
        tmp = directory.with_name(directory.name + ".tmp")
        count = new_model(backbone, dataset, str(tmp), parse_options_field(options))
        print(f"  new {backbone} ({options}) from {count} training texts -> {directory}", file=sys.stderr)
        os.replace(tmp, directory)
        return str(directory)

    def check(self, cell: Cell, data: DataSpec) -> None:
        """Raise now if any recipe, plugin or option the cell names is unknown: a whole table's
        typo must not surface after its first rows have trained for an hour."""
        from structret.data import parse_data_spec
        from structret.recipes import check_plugins, resolve_recipe
        from structret.registry import get_registry
        from structret.retrieval import resolve_system

        get_registry().check("dataset", parse_data_spec(data.spec)[0])
        if cell.system:
            resolve_system(cell.system)
            return
        forced = {"data": data.spec, "split": data.train_split, "data_options": data.options_field(), "output": None}
        for name in (cell.recipe, cell.finetune):
            if name:
                check_plugins(resolve_recipe(name, {**cell.overrides, **forced}))
        if not (cell.recipe or cell.finetune):
            get_registry().check("backbone", cell.base["backbone"], _as_options(cell.base.get("backbone_options")))

    def build(self, cell: Cell, data: DataSpec) -> tuple[str, dict[str, Any]]:
        """(system for make_retriever, its options); trains what the cell asks for."""
        from structret.recipes import resolve_recipe, run_plugins

        if cell.system:
            return cell.system, {}
        forced = {"data": data.spec, "split": data.train_split, "data_options": data.options_field(), "output": None}
        run = None
        pre = None
        if cell.recipe:
            overrides = dict(cell.overrides)
            if cell.init and not overrides.get("model"):
                backbone = overrides.get("backbone") or resolve_recipe(cell.recipe).backbone
                overrides["model"] = self.init_model(backbone, cell.init, data)
            pre = resolve_recipe(cell.recipe, {**overrides, **forced})
            run = self.train(pre, data)
        if cell.finetune:
            overrides = {**cell.overrides, **forced}
            if pre is not None:  # continue from the pretraining run, reading records as it did
                overrides.update(model=str(run), backbone=pre.backbone, text_format=pre.text_format)
                # the backbone's and the text format's options go along, whatever they are
                kept = [name for name, e in run_plugins(pre.to_dict()).items() if e.kind in ("backbone", "linearizer")]
                overrides.update({f"{name}.{k}": v for name in kept for k, v in pre.options(name).items()
                                  if v is not None})
            else:
                overrides.update({k: v for k, v in cell.base.items() if v})
            run = self.train(resolve_recipe(cell.finetune, overrides), data)
        if run is not None:
            return str(run), {}
        options = {"model": cell.base.get("model")} if cell.base.get("model") else {}
        options.update(_as_options(cell.base.get("backbone_options")))
        return cell.base["backbone"], options

    # evaluation

    def system_identity(self, system: str, options: dict[str, Any]) -> dict[str, Any]:
        path = Path(system)
        recipe_file = path / "recipe.toml"
        if recipe_file.is_file():
            return {"run": str(path.resolve()), "recipe": _hash(recipe_file.read_text(encoding="utf-8")),
                    "final": _model_fingerprint(str(path / "final"))}
        if path.exists():
            return {"model_dir": _model_fingerprint(system)}
        return {"name": system, "model": _model_fingerprint(options.get("model")),
                "options": {k: v for k, v in options.items() if k != "model"}}

    def evaluate(self, system: str, options: dict[str, Any], data: DataSpec) -> dict[str, Any]:
        from structret.evaluation import evaluate_retriever, make_protocol

        key = _hash({"v": CACHE_VERSION, "system": self.system_identity(system, options),
                     "data": data.identity(data.test_split), "limit": self.limit})
        path = self.root / "evals" / f"{key}.json"
        if path.is_file():
            self.reused_evals.append(system)
            print(f"  reusing the evaluation of {system} on {data.label} ({path.name})", file=sys.stderr)
            return json.loads(path.read_text(encoding="utf-8"))
        from structret.retrieval import make_retriever

        if data.key not in self._test_sets:
            from structret.data import load_dataset

            dataset = load_dataset(data.spec, split=data.test_split, options=data.options)
            print(dataset.stats.summary(), file=sys.stderr)
            self._test_sets[data.key] = (dataset, make_protocol(dataset, self.limit))
        dataset, protocol = self._test_sets[data.key]
        retriever = make_retriever(system, batch_size=self.batch_size, show_progress=self.show_progress, **options)
        row = evaluate_retriever(protocol, retriever, system)
        result = {"row": row, "protocol": protocol.name, "columns": list(protocol.columns),
                  "sizes": protocol.sizes, "notes": protocol.notes, "dataset": dataset.name}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=2), encoding="utf-8")
        os.replace(tmp, path)
        self.evaluated.append(system)
        return result


def _as_options(value: str | dict[str, Any] | None) -> dict[str, Any]:
    """Backbone options given as "k=v,k2=v2" (a suite file, --set backbone_options=...) or a dict."""
    from structret.recipes import parse_options_field

    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return parse_options_field(value or "")


def parse_settings(settings: list[str] | tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in settings:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SuiteError(f"--set {pair!r} is not FIELD=VALUE (for example --set max_steps=20)")
        out[key.strip()] = value.strip()  # resolve_recipe reads dashes; plugin names keep theirs
    return out


def _progress(i: int, n: int, label: str, data: DataSpec) -> None:
    print(f"[{i}/{n}] {label} on {data.label}", file=sys.stderr)


# --- recipes mode --------------------------------------------------------------------


def recipes_table(recipes: list[str], datas: list[DataSpec], *, finetune: str | None = None, zero_shot: bool = False,
                  settings: dict[str, str] | None = None, systems: list[str] = (), runner: Runner | None = None,
                  backbone: str | None = None) -> BenchTable:
    """Each recipe trained on each dataset's train split (then ``finetune``), scored on its test split."""
    from structret.recipes import resolve_recipe

    runner = runner or Runner()
    settings = dict(settings or {})
    if backbone:
        settings.setdefault("backbone", backbone)
    rows: list[tuple[str, Cell]] = []
    for name in systems:
        rows.append((name, Cell(system=name)))
    if zero_shot:
        first = resolve_recipe(recipes[0] if recipes else None, settings)
        base = {"backbone": first.backbone, "model": first.model, "backbone_options": first.options(first.backbone)}
        rows.append((f"{first.backbone} (untrained)", Cell(base=base)))
    for name in recipes:
        label = Path(name).stem if name.endswith(".toml") else name
        tuned = Path(finetune).stem if finetune and finetune.endswith(".toml") else finetune
        if finetune:
            if zero_shot:
                rows.append((f"{label} (no fine-tuning)", Cell(recipe=name, overrides=settings)))
            rows.append((f"{label} + {tuned}", Cell(recipe=name, finetune=finetune, overrides=settings)))
        else:
            rows.append((label, Cell(recipe=name, overrides=settings)))
    for data in datas:
        for _, cell in rows:
            runner.check(cell, data)
    results: dict[tuple[int, str], dict[str, Any]] = {}
    n, i = len(rows) * len(datas), 0
    for data in datas:
        for r, (label, cell) in enumerate(rows):
            i += 1
            _progress(i, n, label, data)
            system, options = runner.build(cell, data)
            results[(r, data.key)] = runner.evaluate(system, options, data)
    columns, notes = [], []
    for data in datas:
        first = next(results[(r, data.key)] for r in range(len(rows)))
        for metric in first["columns"]:
            columns.append({"key": f"{data.key}|{metric}", "dataset": data.label, "metric": metric,
                            "kind": "measured", "header": f"{data.label}: {metric}"})
        notes.append(f"{data.label}: {first['dataset']}, {first['protocol']} ("
                     + ", ".join(f"{v} {k}" for k, v in first["sizes"].items()) + "). " + " ".join(first["notes"]))
    table_rows = []
    for r, (label, _) in enumerate(rows):
        values = {}
        for data in datas:
            got = results[(r, data.key)]["row"]
            for metric in results[(r, data.key)]["columns"]:
                values[f"{data.key}|{metric}"] = got.get(metric)
        table_rows.append({"label": label, "block": "", "values": values, "paper": {}, "marks": []})
    budgets = "; ".join(f"{d.label}: {', '.join(sorted(runner.budgets.get(d.key, ())))}"
                        for d in datas if runner.budgets.get(d.key))
    caption = ("Scores ×100. Each recipe trained on the dataset's train split"
               + (f", then fine-tuned with {finetune}" if finetune else "") + ", evaluated on its test split"
               + (f" (budget — {budgets})" if budgets else "") + "."
               + ("".join(f" {d.label} is an offline stand-in." for d in datas if d.standin)))
    return BenchTable(title="structret bench", caption=caption, columns=columns, rows=table_rows, notes=notes)


# --- suite mode ----------------------------------------------------------------------


def assign_data(suite: Suite, data: list[str]) -> dict[str, str]:
    """``KEY=FORMAT:PATH`` or ``FORMAT:PATH`` (matched to the dataset whose formats include FORMAT)."""
    out: dict[str, str] = {}
    keys = [d.key for d in suite.datasets]
    for item in data:
        head, eq, rest = item.partition("=")
        if eq and ":" not in head:
            if head not in keys:
                raise SuiteError(f"--data {item}: suite '{suite.name}' has no dataset '{head}' (it has {', '.join(keys)})")
            out[head] = rest
            continue
        fmt = item.partition(":")[0]
        match = [d.key for d in suite.datasets if fmt in d.formats]
        if len(match) != 1:
            raise SuiteError(f"--data {item}: cannot tell which of the suite's datasets ({', '.join(keys)}) it is; "
                             f"write KEY=FORMAT:PATH, e.g. --data {keys[0]}={item}")
        out[match[0]] = item
    return out


def suite_table(suite: Suite, data: list[str] = (), *, data_options: dict[str, Any] | None = None,
                settings: dict[str, str] | None = None, backbone: str | None = None,
                runner: Runner | None = None, rows: list[str] | None = None) -> BenchTable:
    """The paper's table: its rows and columns, the paper's numbers beside what is measured here."""
    from structret.recipes import resolve_recipe

    runner = runner or Runner()
    settings = dict(settings or {})
    given = assign_data(suite, list(data))
    specs: dict[str, DataSpec | None] = {}
    unavailable: dict[str, str] = {}
    for d in suite.datasets:
        if d.key in given:
            specs[d.key] = DataSpec(d.key, d.label, given[d.key], dict(data_options or {}))
        elif d.standin_data:
            options = {**d.standin_options, **(data_options or {})}
            label = (d.standin_label or d.standin_data) + (
                f" ({', '.join(f'{k}={v}' for k, v in options.items())})" if options else "")
            specs[d.key] = DataSpec(d.key, label, resolve_spec(d.standin_data), options, standin=True)
        else:
            specs[d.key] = None
            unavailable[d.key] = d.unavailable or "no data given and no offline stand-in"

    def chosen_backbone(d: SuiteDataset, spec: DataSpec) -> str | None:
        return settings.get("backbone") or backbone or (d.standin_backbone if spec.standin else None) or None

    labels = [r.label for r in suite.rows]
    for label in rows or ():
        if label not in labels:
            close = difflib.get_close_matches(label, labels, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise SuiteError(f"--row {label!r}: suite '{suite.name}' has no such row.{hint} Rows: {', '.join(labels)}.")
    selected = [r for r in suite.rows if rows is None or r.label in rows]
    todo = [(r, d) for d in suite.datasets if specs[d.key] is not None for r in selected
            if not r.paper_only and (r.recipe.get(d.key) or r.finetune.get(d.key) or not (r.recipe or r.finetune))]
    measured: dict[tuple[int, str], dict[str, Any]] = {}
    backbones: dict[str, set[str]] = {}
    cells = []
    for row, d in todo:
        spec = specs[d.key]
        pick = chosen_backbone(d, spec)
        recipe_name = row.recipe.get(d.key, "")
        own = pick or (resolve_recipe(recipe_name).backbone if recipe_name else d.backbone) or "minilm"
        overrides: dict[str, Any] = {}
        overrides.update(suite.backbone_set.get(own, {}))
        if spec.standin:
            overrides.update(d.standin_set)
        overrides.update(row.set.get(d.key, {}))
        overrides.update(settings)
        if pick:
            overrides["backbone"] = pick
        final_backbone = overrides.get("backbone") or own
        backbones.setdefault(d.key, set()).add(final_backbone)
        base = {"backbone": final_backbone, "model": overrides.get("model"),
                "backbone_options": overrides.get("backbone_options", "")}
        init = row.init if final_backbone == (resolve_recipe(recipe_name).backbone if recipe_name else None) else ""
        cell = Cell(recipe=recipe_name, finetune=row.finetune.get(d.key, ""), overrides=overrides, base=base,
                    init=init)
        runner.check(cell, spec)
        cells.append((row, d, cell))
    for i, (row, d, cell) in enumerate(cells, 1):
        spec = specs[d.key]
        _progress(i, len(cells), f"{row.label}{f' [{row.block}]' if row.block else ''}", spec)
        system, options = runner.build(cell, spec)
        measured[(suite.rows.index(row), d.key)] = runner.evaluate(system, options, spec)

    columns = []
    settings_text = {}
    for d in suite.datasets:
        spec = specs[d.key]
        if spec is None:
            setting = f"cannot run: {unavailable[d.key]}"
        else:
            budget = ", ".join(sorted(runner.budgets.get(d.key, ()))) or "no training"
            setting = (f"{spec.label if spec.standin else spec.spec}; backbone {', '.join(sorted(backbones.get(d.key, {'-'})))}"
                       f"; budget {budget}")
        settings_text[d.key] = setting
        for m in d.metrics:
            if any(m.label in r.paper.get(d.key, {}) for r in selected):
                columns.append({"key": f"{d.key}|{m.label}|paper", "dataset": d.label, "metric": m.label,
                                "kind": "paper", "header": f"{d.label} {m.label} — paper"})
            columns.append({"key": f"{d.key}|{m.label}", "dataset": d.label, "metric": m.label, "kind": "measured",
                            "header": f"{d.label} {m.label} — measured here "
                                      f"({setting if spec is not None else 'cannot run, see below'})"})
    table_rows = []
    marks_used = False
    for row in selected:
        values, paper, marks = {}, {}, []
        for d in suite.datasets:
            got = measured.get((suite.rows.index(row), d.key))
            for m in d.metrics:
                if m.label in row.paper.get(d.key, {}):
                    paper[f"{d.key}|{m.label}|paper"] = row.paper[d.key][m.label]
                if got is None:
                    values[f"{d.key}|{m.label}"] = None
                    continue
                value = _lookup(got, m.measured)
                if value is None and m.fallback:
                    value = _lookup(got, m.fallback)
                    if value is not None:
                        marks.append(f"{d.key}|{m.label}")
                        marks_used = True
                values[f"{d.key}|{m.label}"] = value
        table_rows.append({"label": row.label, "block": row.block, "values": values, "paper": paper, "marks": marks,
                           "paper_only": row.paper_only,
                           "system": {"recipe": row.recipe, "finetune": row.finetune, "set": row.set}})
    standins = [f"{d.label} → {specs[d.key].label}" for d in suite.datasets if specs[d.key] and specs[d.key].standin]
    scale = "×100" if suite.scale == 100 else "as fractions"
    caption = (f"Scores {scale}. Paper: {suite.paper}, {suite.source}. Measured here: "
               + "; ".join(f"{d.label}: {settings_text[d.key]}" for d in suite.datasets) + ". "
               + (f"Offline stand-ins used ({'; '.join(standins)}): the measured columns are not the paper's setting "
                  f"and are not comparable number for number. " if standins else "")
               + "— = no measurement (row not implemented or another paper's system); n/a = not applicable.")
    notes = list(suite.notes)
    notes += [f"{r.label}: {r.paper_only}" for r in selected if r.paper_only]
    if marks_used:
        notes.append("* = the metric's fallback column (see above), because the measured one was n/a on this data.")
    for d in suite.datasets:
        got = next((v for (ri, k), v in measured.items() if k == d.key), None)
        if got:
            notes.append(f"{d.label} measured on {got['dataset']}: {got['protocol']} ("
                         + ", ".join(f"{v} {k}" for k, v in got["sizes"].items()) + ").")
    return BenchTable(title=suite.title, caption=caption, columns=columns, rows=table_rows, notes=notes,
                      scale=suite.scale, digits=suite.digits)


def _lookup(result: dict[str, Any], column: str) -> float | None:
    row = result["row"]
    if column in row:
        return row[column]
    for name in result["columns"]:
        if name.startswith(column):
            return row.get(name)
    return None
