"""Recipes: a training run's every setting, core fields plus one table per plugin.

```toml
objective = "sda+mep"          # core: what every run has (data, backbone, objectives,
backbone = "codet5-base"       # optimizer, schedule, lengths, checkpoints, seed)
lr = 5e-5

[mep]                          # a plugin's own options, in a table named after it
extractor = "tree-sitter"

[codet5-base]
max_length = 512
```

The packaged presets (``structret/recipes/*.toml``) reproduce the papers' pipelines; a file
path works the same way. Resolution: the defaults, then the preset or file, then overrides
(``--set``, the Python API). An override names a core field (``lr=1e-4``), one plugin's
option (``mep.extractor=tree-sitter``), or an option alone (``temperature=0.05``: every
plugin of this run that has it). A plugin's options are its own (``structret.options``):
core checks them against the model the plugin declares and knows none of them.

The resolved recipe holds every option of every plugin the run uses (its objectives,
backbone, text format and data reader), defaults filled in. A run writes it to
``RUN/recipe.toml`` so it can be read back, resumed (a changed option is refused as a changed
core field is) or rerun exactly. Recipes written before plugin tables existed (every option
a top-level field) still load: each such key goes to the plugins of the run that have it,
with a warning saying where to write it now.

This module imports only the standard library, pydantic and tomli-w, so the CLI refuses a
bad recipe in well under a second.
"""

from __future__ import annotations

import difflib
import math
import os
import warnings
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from structret.errors import PluginError, StructretError


class RecipeError(StructretError, ValueError):
    """A recipe cannot be found, read or resolved."""


class ObjectiveError(StructretError, ValueError):
    """An objective spec is malformed, or an objective cannot run on the chosen backbone."""


class RecipeWarning(UserWarning):
    """A recipe setting that is not used, or written the old way; the run goes ahead."""


class Recipe(BaseModel):
    """Every setting of a training run: the core fields below, and ``plugins``, the options of
    each plugin the run uses, keyed by plugin name (a recipe's ``[name]`` tables)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)

    name: str = ""
    """The preset or file it came from (informational)."""
    description: str = ""
    """One line for --list-recipes (informational)."""
    reproduces: str = ""
    """The paper, table and row it reproduces, or "none: ..." (informational)."""
    objective: str = "sda"
    """Objectives joined by '+', with weights: "sda+mep", "sda+0.5*mep"."""
    backbone: str = "minilm"
    """A registered backbone."""
    model: str | None = None
    """Hub id, local path or run directory overriding the backbone's weights."""
    text_format: str = ""
    """How records become text: "" = each record's text(), else a linearizer with text() (product, aspects)."""
    data: str = ""
    """FORMAT:PATH of a registered reader."""
    split: str | None = "train"
    """The split to train on."""
    output: str = ""
    """The run directory."""
    seed: int = Field(42, ge=0)
    lr: float = Field(5e-5, gt=0)
    batch_size: int = Field(32, gt=0)
    """Global: summed over processes."""
    epochs: int = Field(1, ge=0)
    max_steps: int = Field(0, ge=0)
    """> 0: train this many steps instead of `epochs`."""
    warmup: float = Field(0.1, ge=0, lt=1)
    """Fraction of the steps with a linear warm-up."""
    weight_decay: float = Field(0.0, ge=0)
    """Hugging Face Trainer's default, which SANTA's OpenMatch runs used."""
    max_grad_norm: float = Field(1.0, ge=0)
    """Clip threshold (0 = off); HF Trainer's default, as above."""
    grad_cache_chunk: int = Field(0, ge=0)
    """GradCache: encode N texts at a time, same gradients, less memory (0 = off)."""
    dtype: Literal["fp32", "bf16"] = "fp32"
    """bf16 = autocast; off by default, CPUs without bf16 get slower."""
    query_max_len: int = Field(50, gt=0)
    passage_max_len: int = Field(240, gt=0)
    label_max_len: int = Field(35, gt=0)
    """Target tokens of a seq2seq corruption objective's labels."""
    negatives: int = Field(0, ge=0)
    """Hard negatives per query (on data that carries them)."""
    checkpoint_every: int = Field(500, ge=0)
    """Steps between checkpoints (0 = only the final model)."""
    keep_checkpoints: int = Field(2, ge=0)
    """Newest checkpoints kept (0 = keep all)."""
    log_every: int = Field(10, ge=1)
    """Steps between metrics lines."""
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each used plugin's options, every option with its value: {"mep": {"extractor": "auto"}}."""

    @field_validator("model", "split", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value  # TOML has no null: written as "", read back as None

    @model_validator(mode="after")
    def _some_steps(self) -> Recipe:
        if self.epochs == 0 and self.max_steps == 0:
            raise ValueError("epochs and max_steps are both 0: set one of them")
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def options(self, plugin: str) -> dict[str, Any]:
        """The options of one plugin of this run (empty for one that has none)."""
        return dict(self.plugins.get(plugin, {}))


CORE_FIELDS = tuple(name for name in Recipe.model_fields if name != "plugins")
# settings that used to be core fields and are now plugin options: still read, with a warning
_SLOT_FIELDS = {"backbone_options": "backbone", "data_options": "dataset"}


def recipe_fields() -> list[str]:
    return list(CORE_FIELDS)


def parse_options_field(text: str) -> dict[str, Any]:
    """``"informed_layers=1,strict=false"`` -> ``{"informed_layers": 1, "strict": False}`` (the old
    backbone_options and data_options strings)."""
    from structret.data import parse_options

    try:
        return parse_options([part for part in text.split(",") if part.strip()])
    except StructretError as exc:
        raise RecipeError(f"options {text!r}: {exc}; write KEY=VALUE pairs joined by commas") from None


# --- objectives ------------------------------------------------------------------------


def parse_objectives(spec: str) -> list[tuple[str, float]]:
    """``"sda+0.5*mep"`` -> ``[("sda", 1.0), ("mep", 0.5)]``; names checked against the registry."""
    from structret.registry import get_registry

    if not isinstance(spec, str) or not spec.strip():
        raise ObjectiveError("no objective given: name one or more, e.g. --objective sda+mep")
    parsed: list[tuple[str, float]] = []
    for term in spec.split("+"):
        term = term.strip()
        if not term:
            raise ObjectiveError(f"objective '{spec}' has an empty term; write names joined by '+', e.g. sda+mep")
        weight_text, star, name = term.rpartition("*")
        name = name.strip()
        weight = 1.0
        if star:
            try:
                weight = float(weight_text)
            except ValueError:
                raise ObjectiveError(
                    f"objective term '{term}': '{weight_text.strip()}' is not a number; "
                    f"weights go before the name, e.g. 0.5*{name or 'mep'}"
                ) from None
            if not math.isfinite(weight) or weight <= 0:
                raise ObjectiveError(f"objective term '{term}': the weight must be a positive number")
        get_registry().get("objective", name)  # unknown: lists the known ones and the closest
        if any(name == seen for seen, _ in parsed):
            raise ObjectiveError(f"objective '{name}' appears twice in '{spec}'; give it once with a weight")
        parsed.append((name, weight))
    return parsed


def run_plugins(values: dict[str, Any]) -> dict[str, Any]:
    """The plugins a run with these core values uses, by primary name: its objectives, its
    backbone, its text format (a linearizer) and the reader of its data. Unknown names raise."""
    from structret.data import parse_data_spec
    from structret.registry import get_registry

    registry = get_registry()
    slots = [("objective", name) for name, _ in parse_objectives(values.get("objective") or "")]
    slots.append(("backbone", values.get("backbone") or Recipe.model_fields["backbone"].default))
    if values.get("text_format"):
        slots.append(("linearizer", values["text_format"]))
    if values.get("data"):
        slots.append(("dataset", parse_data_spec(values["data"])[0]))
    used: dict[str, Any] = {}
    for kind, name in slots:
        entry = registry.get(kind, name)
        other = used.get(entry.name)
        if other is not None and other.kind != kind:
            raise RecipeError(f"this run uses two plugins named '{entry.name}' ({other.kind} and {kind}), so a "
                              f"[{entry.name}] table would be ambiguous; uninstall one or pick another {kind}.")
        if entry.name in CORE_FIELDS:
            raise RecipeError(f"{kind} '{entry.name}' has the name of a recipe field, so its options cannot be "
                              f"written as a table; this is a bug in its plugin, report it to its authors.")
        used[entry.name] = entry
    return used


def check_plugins(recipe: Recipe) -> None:
    """Raise before any work if the recipe names a plugin that is not installed or gives one an
    option it does not have (resolve_recipe has done both; this re-checks a Recipe built another way)."""
    used = run_plugins(recipe.to_dict())
    for name, options in recipe.plugins.items():
        if name not in used:
            raise RecipeError(f"the recipe has options for '{name}', which this run does not use "
                              f"({_used_text(used)})")
        used[name].validate_options(options)


def _used_text(used: dict[str, Any]) -> str:
    return ", ".join(f"{e.kind} {name}" for name, e in used.items())


# --- presets and files -----------------------------------------------------------------


def list_recipes() -> list[str]:
    """Names of the presets shipped in the package."""
    folder = resources.files("structret") / "recipes"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def _read_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{where}: not valid TOML ({exc})") from None


def load_recipe_values(name_or_path: str) -> tuple[dict[str, Any], str]:
    """The raw values of a preset name or a ``.toml`` path, and where they came from."""
    path = Path(name_or_path).expanduser()
    if path.suffix == ".toml" or os.sep in name_or_path or path.is_file():
        if not path.is_file():
            raise RecipeError(f"recipe file {path} does not exist")
        return _read_toml(path.read_text(encoding="utf-8"), str(path)), str(path)
    known = list_recipes()
    if name_or_path not in known:
        close = difflib.get_close_matches(name_or_path, known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise RecipeError(
            f"unknown recipe '{name_or_path}'.{hint} Packaged recipes: {', '.join(known)}; "
            f"or pass the path of a .toml file."
        )
    text = (resources.files("structret") / "recipes" / f"{name_or_path}.toml").read_text(encoding="utf-8")
    return _read_toml(text, f"recipe '{name_or_path}'"), name_or_path


def _unknown_field(key: str, where: str, used: dict[str, Any]) -> RecipeError:
    names = list(CORE_FIELDS)
    options = [f"{name}.{option}" for name, entry in used.items() for option in _option_names(entry)]
    close = difflib.get_close_matches(key, names + [o.partition(".")[2] for o in options], n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    plugin_part = (f" Options of this run's plugins ({_used_text(used)}): {', '.join(options)}."
                   if options else f" This run's plugins ({_used_text(used)}) have no options.")
    return RecipeError(f"{where}: unknown recipe field '{key}'.{hint} Fields: {', '.join(names)}.{plugin_part} "
                       f"A plugin's option is set as NAME.OPTION, e.g. --set mep.extractor=tree-sitter.")


def _option_names(entry: Any) -> list[str]:
    try:
        model = entry.options_model()
    except PluginError:
        return []
    return list(model.model_fields) if model is not None else []


def _warn(message: str) -> None:
    warnings.warn(message, RecipeWarning, stacklevel=4)


def _core(values: dict[str, Any], where: str) -> Recipe:
    try:
        return Recipe(**values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(p) for p in error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            problems.append(f"{key}={values.get(key)!r}: {message}" if key else message)
        raise RecipeError(f"{where}: {'; '.join(problems)}") from None


class _Settings:
    """What a recipe file and the overrides say, in the order said (a later one wins), before
    the run's plugins are known."""

    def __init__(self) -> None:
        self.core: dict[str, Any] = {}
        # ("table", plugin, options, where, given as an override) | ("loose", option, value, where, old style)
        # | ("slot", kind, options, where, old style)
        self.items: list[tuple[str, str, Any, str, bool]] = []

    def add(self, key: str, value: Any, where: str, *, from_file: bool) -> None:
        if isinstance(value, dict) and key == "plugins":  # a resolved recipe's to_dict(): like a file's tables
            for name, table in value.items():
                self.items.append(("table", name, dict(table), where, False))
        elif isinstance(value, dict):  # [name] table
            self.items.append(("table", key, dict(value), where, not from_file))
        elif "." in key:  # name.option
            name, _, option = key.partition(".")
            self.items.append(("table", name, {option.replace("-", "_"): value}, where, True))
        else:
            key = key.replace("-", "_")
            if key in CORE_FIELDS:
                self.core[key] = value
            elif key in _SLOT_FIELDS:
                options = parse_options_field(value) if isinstance(value, str) else dict(value)
                self.items.append(("slot", _SLOT_FIELDS[key], options, where, from_file))
            else:
                self.items.append(("loose", key, value, where, from_file))


def _plugin_options(settings: _Settings, used: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every used plugin's options, from the tables, loose keys and slot options, validated."""
    from structret.options import plain
    from structret.registry import get_registry

    registry = get_registry()
    given: dict[str, dict[str, Any]] = {name: {} for name in used}
    by_kind = {entry.kind: name for name, entry in used.items()}
    aliases = {alias: name for name, entry in used.items() for alias in entry.aliases}

    for what, key, value, where, flag in settings.items:
        if what == "slot":  # backbone_options / data_options: whatever the run's backbone / reader is
            name = by_kind.get(key)
            if name is None:
                if value:
                    _warn(f"{where}: {key} options {value} are not used: this run has no {key}")
                continue
            if flag:
                field = next(k for k, v in _SLOT_FIELDS.items() if v == key)
                _warn(f"{where}: {field} is deprecated; write the options in a [{name}] table")
            given[name].update(value)
        elif what == "loose":  # an option without its plugin: every plugin of the run that has it
            if flag and value == "":
                continue  # an old recipe.toml wrote an unset option as ""
            takers = [name for name, entry in used.items() if key in _option_names(entry)]
            if not takers:
                others = sorted({e.name for e in registry.all()
                                 if isinstance(e.options, str | type) and key in _option_names(e)})
                if not others:
                    raise _unknown_field(key, where, used)
                _warn(f"{where}: '{key}' is an option of {', '.join(others)}, which this run does not use "
                      f"({_used_text(used)}); it is ignored")
                continue
            if flag:
                _warn(f"{where}: '{key}' as a top-level field is deprecated; write it in the "
                      f"{' and '.join(f'[{t}]' for t in takers)} table")
            for name in takers:
                given[name][key] = value
        else:  # a [name] table, or name.option
            target = key if key in used else aliases.get(key)
            if target is None:
                if not any(registry.has(kind, key) for kind in registry.entries):
                    raise RecipeError(f"{where}: [{key}] names no installed plugin. This run uses "
                                      f"{_used_text(used)}; their options go in tables named after them.")
                if flag:
                    raise RecipeError(f"{where}: '{key}' is not a plugin of this run ({_used_text(used)}), so "
                                      f"its options {sorted(value)} would not be used.")
                _warn(f"{where}: the options for '{key}' are not used: this run uses {_used_text(used)}")
                continue
            given[target].update(value)

    resolved = {}
    for name, entry in used.items():
        try:
            values = entry.validate_options(given[name])
        except PluginError as exc:
            raise RecipeError(str(exc)) from None
        if values:
            resolved[name] = {k: plain(v) for k, v in values.items()}
    return resolved


def resolve_recipe(name_or_path: str | None = None, overrides: dict[str, Any] | None = None) -> Recipe:
    """Defaults <- preset or file <- ``overrides`` (``None`` values mean "not given").

    Override keys are core fields (dashes allowed: ``query-max-len``), ``plugin.option``, or an
    option alone (every plugin of this run that has it). An unknown key is an error naming the
    fields, this run's plugins' options and the closest match.
    """
    settings = _Settings()
    source = "defaults"
    if name_or_path:
        loaded, source = load_recipe_values(name_or_path)
        for key, value in loaded.items():
            settings.add(key, value, source, from_file=True)
        settings.core.setdefault("name", Path(source).stem if source.endswith(".toml") else source)
    for key, value in (overrides or {}).items():
        if value is not None:
            settings.add(key, value, f"override {key}", from_file=False)
    recipe = _core(settings.core, source)  # core fields first: they say which plugins the run uses
    used = run_plugins(recipe.to_dict())
    recipe.plugins = _plugin_options(settings, used)
    return recipe


# --- writing ---------------------------------------------------------------------------


def recipe_to_toml(recipe: Recipe) -> str:
    """The recipe as TOML: core fields, then one table per plugin. ``None`` is written as ``""``
    for core fields (TOML has no null; leaving the key out would read back as the default, and
    ``split``'s default is not None) and left out of plugin tables (read back as the default)."""
    import tomli_w

    document: dict[str, Any] = {k: "" if v is None else v for k, v in recipe.to_dict().items() if k != "plugins"}
    for name, options in recipe.plugins.items():
        document[name] = {k: v for k, v in options.items() if v is not None}
    return "# resolved by structret: defaults <- recipe <- overrides\n" + tomli_w.dumps(document)


def write_recipe(recipe: Recipe, path: str | os.PathLike) -> None:
    Path(path).write_text(recipe_to_toml(recipe), encoding="utf-8")


def read_recipe(path: str | os.PathLike) -> Recipe:
    """A recipe written by ``write_recipe`` (every field, no defaults filled in from a preset)."""
    return resolve_recipe(str(path))


def changed_settings(saved: Recipe, given: Recipe, ignore: set[str] | frozenset[str] = frozenset()
                     ) -> list[tuple[str, Any, Any]]:
    """``(setting, saved value, given value)`` for every core field and plugin option that
    differs, plugin options named ``plugin.option``; fields in ``ignore`` left out."""

    def flat(recipe: Recipe) -> dict[str, Any]:
        values = {k: v for k, v in recipe.to_dict().items() if k != "plugins" and k not in ignore}
        for name, options in recipe.plugins.items():
            values.update({f"{name}.{k}": v for k, v in options.items()})
        return values

    a, b = flat(saved), flat(given)
    return [(k, a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
