"""Training and evaluation runs cached under ``cache_root()``: ``DataSpec`` (one dataset and
its identity), the data and model fingerprints the cache keys hash, ``Cell`` (what one row
means on one dataset) and ``Runner`` (trains, evaluates and reuses what is cached)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structret.artifacts import cache_dir
from structret.datasets import load_dataset, parse_data_spec
from structret.errors import SuiteError
from structret.models import new_model
from structret.registry import get_registry
from structret.search.system import make_retriever, parse_fusion, resolve_system

CACHE_VERSION = 1  # bump when a cached artifact's meaning changes
TUNED = "valid"  # a row's fusion chosen on the dataset's validation split
# recipe fields that do not change what a run computes
_NOT_IDENTITY = {"name", "description", "reproduces", "output", "log_every", "checkpoint_every",
                 "keep_checkpoints", "fusion"}


@dataclass
class DataSpec:
    key: str                         # the suite's dataset key, or the spec itself
    label: str
    spec: str                        # FORMAT:PATH
    options: dict[str, Any] = field(default_factory=dict)
    standin: bool = False
    train_split: str = "train"
    test_split: str = "test"
    valid_split: str = ""            # "" = none: no validation column, no variant selection
    select_on: str = ""              # the measure choices on valid_split read ("" = the protocol's first)

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
    return cache_dir()


@dataclass
class Cell:
    """What one row means on one dataset: pretrain? fine-tune? or the backbone as it is."""

    recipe: str = ""
    finetune: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)   # applied to both recipes (user --set last)
    pretrain: dict[str, Any] = field(default_factory=dict)    # applied to the pretraining recipe only (a variant)
    base: dict[str, Any] = field(default_factory=dict)        # backbone, model, backbone_options of an untrained row
    init: str = ""
    system: str = ""                                          # a retriever/backbone/run dir given as is
    seed_offset: int = 0                                      # each trained recipe runs with its seed + this
    lexical: str = ""                                         # fused with the cell's model: LEXICAL+model
    fusion: str = ""                                          # how they fuse (structret.search.fusion spec; "": default)

    @property
    def trained(self) -> bool:
        """Whether the cell trains anything (only then does a seed change what it measures)."""
        return bool(self.recipe or self.finetune)


class Runner:
    """Trains and evaluates cells, reusing everything cached; counts what it did."""

    def __init__(self, *, batch_size: int = 32, limit: int | None = None, show_progress: bool = True):
        self.batch_size, self.limit, self.show_progress = batch_size, limit, show_progress
        self.root = cache_root()
        self._eval_sets: dict[tuple[str, str], Any] = {}
        self.trained: list[Path] = []
        self.reused_runs: list[Path] = []
        self.evaluated: list[str] = []
        self.reused_evals: list[str] = []
        self.budgets: dict[str, set[str]] = {}
        self.seeds: dict[str, int] = {}  # run directory -> the seed it was trained with

    # training

    def run_dir(self, recipe: Any) -> Path:
        values = {k: v for k, v in recipe.to_dict().items() if k not in _NOT_IDENTITY}
        values["model"] = _model_fingerprint(recipe.model)
        # an unset option (None) computes what it did before the option existed: a plugin that
        # gains an option keeps its cached runs
        values["plugins"] = {name: {k: v for k, v in options.items() if v is not None}
                             for name, options in values["plugins"].items()}
        identity = {"v": CACHE_VERSION, "recipe": values,
                    "data": {"spec": recipe.data, "split": recipe.split,
                             "files": _data_fingerprint(recipe.data)}}
        return self.root / "runs" / f"{recipe.name or 'recipe'}-{_hash(identity)}"

    def train(self, recipe: Any, data: DataSpec) -> Path:
        from structret import training
        from structret.training import checkpoints

        run = self.run_dir(recipe)
        recipe = recipe.model_copy(update={"output": str(run)})
        self.seeds[str(run)] = recipe.seed
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
        from structret.recipes import parse_options_field

        directory = self.root / "init" / _hash({"v": CACHE_VERSION, "backbone": backbone, "options": options,
                                                 "data": data.identity(data.train_split)})
        if (directory / "config.json").is_file():
            return str(directory)
        dataset = load_dataset(data.spec, data.train_split, **data.options)
        tmp = directory.with_name(directory.name + ".tmp")
        count = new_model(backbone, dataset, str(tmp), parse_options_field(options))
        print(f"  new {backbone} ({options}) from {count} training texts -> {directory}", file=sys.stderr)
        os.replace(tmp, directory)
        return str(directory)

    def check(self, cell: Cell, data: DataSpec) -> None:
        """Raise now if any recipe, plugin or option the cell names is unknown: a whole table's
        typo must not surface after its first rows have trained for an hour."""
        from structret.recipes import check_plugins, resolve_recipe

        get_registry().check("dataset", parse_data_spec(data.spec)[0])
        if cell.lexical:
            get_registry().check("retriever", cell.lexical)
            if cell.fusion == TUNED and not data.valid_split:
                raise SuiteError(f"fusion = \"{TUNED}\" chooses the fusion on a validation split, and "
                                 f"{data.label} has none; give the dataset a valid_split or the row a fusion.")
            if cell.fusion and cell.fusion != TUNED:
                parse_fusion(cell.fusion)  # a bad spec raises now, naming how to write one
        if cell.system:
            resolve_system(cell.system)
            return
        forced = {"data": data.spec, "split": data.train_split, "data_options": data.options_field(), "output": None}
        for name, extra in ((cell.recipe, cell.pretrain), (cell.finetune, {})):
            if name:
                check_plugins(resolve_recipe(name, {**cell.overrides, **extra, **forced}))
        if not (cell.recipe or cell.finetune):
            get_registry().check("backbone", cell.base["backbone"], _as_options(cell.base.get("backbone_options")))

    def build(self, cell: Cell, data: DataSpec) -> tuple[str, dict[str, Any]]:
        """(system for make_retriever, its options); trains what the cell asks for. A cell with
        ``lexical`` is that retriever fused with the cell's model (``fusion`` among the options)."""
        system, options = self._build(cell, data)
        if not cell.lexical:
            return system, options
        return f"{cell.lexical}+{system}", {**options, "fusion": cell.fusion or None}

    def _build(self, cell: Cell, data: DataSpec) -> tuple[str, dict[str, Any]]:
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
            pre = _reseed(resolve_recipe(cell.recipe, {**overrides, **cell.pretrain, **forced}), cell.seed_offset)
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
            run = self.train(_reseed(resolve_recipe(cell.finetune, overrides), cell.seed_offset), data)
        if run is not None:
            return str(run), {}
        options = {"model": cell.base.get("model")} if cell.base.get("model") else {}
        options.update(_as_options(cell.base.get("backbone_options")))
        return cell.base["backbone"], options

    # evaluation

    def system_identity(self, system: str, options: dict[str, Any]) -> dict[str, Any]:
        lexical, plus, dense = system.partition("+")
        if plus and not Path(system).exists() and "fusion" in options:  # a hybrid cell: its model's identity
            rest = {k: v for k, v in options.items() if k != "fusion"}
            fusion = TUNED if options["fusion"] == TUNED else resolve_system(system, options["fusion"]).fusion.spec
            return {"lexical": lexical, "fusion": fusion, "dense": self.system_identity(dense, rest)}
        path = Path(system)
        recipe_file = path / "recipe.toml"
        if recipe_file.is_file():
            return {"run": str(path.resolve()), "recipe": _hash(recipe_file.read_text(encoding="utf-8")),
                    "final": _model_fingerprint(str(path / "final"))}
        if path.exists():
            return {"model_dir": _model_fingerprint(system)}
        return {"name": system, "model": _model_fingerprint(options.get("model")),
                "options": {k: v for k, v in options.items() if k != "model"}}

    def evaluate(self, system: str, options: dict[str, Any], data: DataSpec, split: str | None = None
                 ) -> dict[str, Any]:
        """Scores of ``system`` on ``split`` of ``data`` (its test split by default), cached."""
        from structret.evaluation import evaluate_retriever, make_protocol

        split = split or data.test_split
        key = _hash({"v": CACHE_VERSION, "system": self.system_identity(system, options),
                     "data": data.identity(split), "limit": self.limit})
        path = self.root / "evals" / f"{key}.json"
        if path.is_file():
            self.reused_evals.append(system)
            print(f"  reusing the evaluation of {system} on {data.label} [{split}] ({path.name})", file=sys.stderr)
            return json.loads(path.read_text(encoding="utf-8"))

        if (data.key, split) not in self._eval_sets:
            dataset = load_dataset(data.spec, split, **data.options)
            print(dataset.stats.summary(), file=sys.stderr)
            self._eval_sets[(data.key, split)] = (dataset, make_protocol(dataset, self.limit))
        dataset, protocol = self._eval_sets[(data.key, split)]
        tuned = options.get("fusion") == TUNED
        # the vector cache: a hybrid row, its tuning and the dense row of the same model encode the texts once
        retriever = make_retriever(system, batch_size=self.batch_size, show_progress=self.show_progress,
                                   cache=cache_dir(), **({**options, "fusion": None} if tuned else options))
        tuning = None
        if tuned:  # the fusion that scores best on the validation split, then this split scored with it
            from structret.evaluation import tune_fusion

            if (data.key, data.valid_split) not in self._eval_sets:
                valid = load_dataset(data.spec, data.valid_split, **data.options)
                self._eval_sets[(data.key, data.valid_split)] = (valid, make_protocol(valid, self.limit))
            retriever, tuning = tune_fusion(retriever, self._eval_sets[(data.key, data.valid_split)][0],
                                            limit=self.limit, show_progress=self.show_progress,
                                            measure=data.select_on or None)
            print(f"  {system}: {tuning['fusion']} scored best on {data.valid_split} ({tuning['measure']})",
                  file=sys.stderr)
        row = evaluate_retriever(protocol, retriever, system)
        if tuning is not None:
            row["fusion"] = tuning["fusion"]
        result = {"row": row, "protocol": protocol.name, "columns": list(protocol.columns),
                  "sizes": protocol.sizes, "notes": protocol.notes, "dataset": dataset.name}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=2), encoding="utf-8")
        os.replace(tmp, path)
        self.evaluated.append(system)
        return result


def _reseed(recipe: Any, offset: int) -> Any:
    """The recipe with ``seed + offset`` (offset 0: the recipe itself, so its cached run is reused)."""
    return recipe.model_copy(update={"seed": recipe.seed + offset}) if offset else recipe


def _as_options(value: str | dict[str, Any] | None) -> dict[str, Any]:
    """Backbone options given as "k=v,k2=v2" (a suite file, --set backbone_options=...) or a dict."""
    from structret.recipes import parse_options_field

    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return parse_options_field(value or "")

