"""Suite files (TOML; plugins register them): the model of a paper's table
(``Suite``: its datasets and metrics, its rows and the paper's numbers) and reading it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from structret.errors import PluginError, SuiteError
from structret.registry import PluginEntry, get_registry


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
    valid_split: str = ""            # the split every row is also scored on and variants are chosen on
    select_on: str = ""              # the metric label variants are chosen by (default: the first)


@dataclass
class SuiteVariant:
    label: str
    set: dict[str, Any] = field(default_factory=dict)          # recipe overrides on top of the row's


@dataclass
class SuiteRow:
    label: str
    block: str = ""
    recipe: dict[str, str] = field(default_factory=dict)     # dataset key -> pretraining recipe
    finetune: dict[str, str] = field(default_factory=dict)   # dataset key -> fine-tuning recipe
    set: dict[str, dict[str, Any]] = field(default_factory=dict)  # dataset key -> recipe overrides
    init: str = ""                   # fresh-model options (backbones trained from scratch)
    paper_only: str = ""             # why this row has no measurement
    variants: list[SuiteVariant] = field(default_factory=list)  # chosen on the validation split
    paper: dict[str, dict[str, str]] = field(default_factory=dict)  # dataset key -> column -> number as printed
    lexical: str = ""                # a lexical retriever fused with the row's model (bm25-fields+RUN)
    fusion: str = ""                 # how (structret.search.fusion spec); "" = the default; "valid" = the one
                                     # scoring best on the dataset's validation split (its select_on measure)


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
    """The names of the installed suites (plugins register them: ``register_suites``), those read
    from a suite file and those built from folders of data (``--data-root``) alike."""
    return get_registry().names("suite")


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


def suite_entry(name: str) -> PluginEntry:
    """The installed suite ``name``, or a SuiteError listing them."""
    try:  # the registry's own message: the closest name, every installed suite, plugins that failed to load
        return get_registry().get("suite", name)
    except PluginError as exc:
        raise SuiteError(f"{exc} Or pass the path of a .toml file.") from None


def load_suite(name_or_path: str) -> Suite:
    """An installed suite by name (``santa``, ``khan-jang``, ``attempt``) or a ``.toml`` file."""
    path = Path(name_or_path).expanduser()
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise SuiteError(f"suite file {path} does not exist")
        text, where = path.read_text(encoding="utf-8"), str(path)
    else:
        entry = suite_entry(name_or_path)
        if not entry.is_file:
            raise SuiteError(f"suite '{name_or_path}' is built from folders of data: give --data-root PATH "
                             f"(and --system NAME ...), not --data.")
        text, where = entry.read_text(), f"suite '{name_or_path}'"
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
            r["variants"] = [SuiteVariant(**v) for v in r.get("variants", [])]
            if len({v.label for v in r["variants"]}) < len(r["variants"]):
                raise SuiteError(f"{at}: two variants share a label")
            rows.append(SuiteRow(**r))
        suite = Suite(datasets=datasets, rows=rows, **data)
    except (KeyError, TypeError) as exc:
        raise SuiteError(f"{where}: {exc}") from None
    for d in suite.datasets:
        if d.select_on and d.select_on not in {m.label for m in d.metrics}:
            raise SuiteError(f"{where}, dataset {d.key}: select_on = {d.select_on!r} is not one of its metrics "
                             f"({', '.join(m.label for m in d.metrics)})")
    for row in suite.rows:
        if row.variants and not any(d.valid_split for d in suite.datasets):
            raise SuiteError(f"{where}, row {row.label}: variants are chosen on a validation split, and no "
                             f"dataset of the suite has one (valid_split)")
        for key, numbers in row.paper.items():
            labels = {m.label for d in suite.datasets if d.key == key for m in d.metrics}
            unknown = set(numbers) - labels
            if unknown:
                raise SuiteError(f"{where}, row {row.label}: paper numbers for unknown column(s) {sorted(unknown)} "
                                 f"of dataset '{key}' (columns: {sorted(labels)})")
    return suite

