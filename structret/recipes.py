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

Named recipes are registered by plugins (``register_recipes``: the built-in ``structret_papers``
ships the papers' pipelines); a file path works the same way. Resolution: the defaults, then the preset or file, then overrides
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

import os
from pathlib import Path
from typing import Any, Literal

import tomli_w
import tomllib
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from structret import defaults
from structret.errors import ObjectiveError, PluginError, RecipeError, RecipeWarning, StructretError  # noqa: F401  (importers)
from structret.registry.tables import (  # noqa: F401  (parse_objectives, parse_options_field: importers)
    Settings,
    parse_objectives,
    parse_options_field,
    plugin_options,
    run_plugins,
    used_text,
)
from structret.registry import get_registry


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
    objective: str = defaults.OBJECTIVE
    """Objectives joined by '+', with weights: "sda+mep", "sda+0.5*mep"."""
    backbone: str = defaults.BACKBONE
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
    dtype: Literal["fp32", "bf16", "auto"] = "fp32"
    """bf16 = autocast; auto = bf16 where it measured faster on this machine (structret.precision).
    fp32 by default, so that a recipe trains the same numbers on every machine."""
    query_max_len: int = Field(50, gt=0)
    """Tokens per query in training batches."""
    passage_max_len: int = Field(240, gt=0)
    """Tokens per document in training batches (encoding a corpus uses the backbone's max_length)."""
    label_max_len: int = Field(35, gt=0)
    """Target tokens of a seq2seq corruption objective's labels."""
    loss_balance: Literal["none", "initial"] = "none"
    """How objectives' losses meet before their weights apply: none = summed as they are (SANTA's
    Eq. 4); initial = each divided by its own value at the first joint step (after any LM-head
    warm-up), so the weights share out the losses' starting sizes and an untrained head's loss of
    about 8 does not outweigh a contrastive loss of about 0.5."""
    negatives: int = Field(0, ge=0)
    """Hard negatives per query (on data that carries them)."""
    checkpoint_every: int = Field(500, ge=0)
    """Steps between checkpoints (0 = only the final model)."""
    keep_checkpoints: int = Field(2, ge=0)
    """Newest checkpoints kept (0 = keep all)."""
    log_every: int = Field(10, ge=1)
    """Steps between metrics lines."""
    fusion: str = ""
    """How a lexical side fuses with the trained model (structret.search.fusion: "zscore:0.3", "rrf:0.5"), as
    chosen on validation for this recipe: what 'structret index SOURCE --model RUN' uses when no --fusion
    is given; "" = structret's default. It changes nothing in training."""
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each used plugin's options, every option with its value: {"mep": {"extractor": "auto"}}."""

    @field_validator("model", "split", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value  # TOML has no null: written as "", read back as None

    @field_validator("fusion")
    @classmethod
    def _fusion_spec(cls, value: str) -> str:
        method = value.partition(":")[0].strip()
        if value and method not in ("zscore", "minmax", "rrf"):  # the full check (structret.search.fusion) needs numpy
            raise ValueError(f"fusion {value!r}: write METHOD:WEIGHT with METHOD zscore, minmax or rrf, "
                             f"e.g. zscore:0.3 (structret.search.fusion)")
        return value

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


def recipe_fields() -> list[str]:
    return list(CORE_FIELDS)


def check_plugins(recipe: Recipe) -> None:
    """Raise before any work if the recipe names a plugin that is not installed or gives one an
    option it does not have (resolve_recipe has done both; this re-checks a Recipe built another way)."""
    used = run_plugins(recipe.to_dict(), CORE_FIELDS)
    for name, options in recipe.plugins.items():
        if name not in used:
            raise RecipeError(f"the recipe has options for '{name}', which this run does not use "
                              f"({used_text(used)})")
        used[name].validate_options(options)


# --- presets and files -----------------------------------------------------------------


def list_recipes() -> list[str]:
    """Names of the installed recipes (plugins register them: ``register_recipes``)."""
    return get_registry().names("recipe")


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
    try:  # the registry's own message: the closest name, every installed recipe, plugins that failed to load
        text = get_registry().get("recipe", name_or_path).read_text()
    except PluginError as exc:
        raise RecipeError(f"{exc} Or pass the path of a .toml file.") from None
    return _read_toml(text, f"recipe '{name_or_path}'"), name_or_path


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


def resolve_recipe(name_or_path: str | None = None, overrides: dict[str, Any] | None = None) -> Recipe:
    """Defaults <- preset or file <- ``overrides`` (``None`` values mean "not given").

    Override keys are core fields (dashes allowed: ``query-max-len``), ``plugin.option``, or an
    option alone (every plugin of this run that has it). An unknown key is an error naming the
    fields, this run's plugins' options and the closest match.
    """
    settings = Settings(CORE_FIELDS)
    source = "defaults"
    if name_or_path:
        loaded, source = load_recipe_values(name_or_path)
        for key, value in loaded.items():
            settings.add(key, value, source, from_file=True)
        settings.core.setdefault("name", Path(source).stem if source.endswith(".toml") else source)
    # plugins the file itself uses: their tables are dropped quietly when an override drops them
    # (santa-code with --objective sda), and with a warning when the file never used them
    own = _plugins_of(dict(settings.core))
    for key, value in (overrides or {}).items():
        if value is not None:
            settings.add(key, value, f"override {key}", from_file=False)
    recipe = _core(settings.core, source)  # core fields first: they say which plugins the run uses
    used = run_plugins(recipe.to_dict(), CORE_FIELDS)
    recipe.plugins = plugin_options(settings, used, quiet=own)
    return recipe


def _plugins_of(core: dict[str, Any]) -> set[str]:
    try:
        return set(run_plugins(Recipe(**core).to_dict(), CORE_FIELDS))
    except (StructretError, ValueError):  # the file alone may not resolve; the overrides may fix it
        return set()


# --- writing ---------------------------------------------------------------------------


def recipe_to_toml(recipe: Recipe) -> str:
    """The recipe as TOML: core fields, then one table per plugin. ``None`` is written as ``""``
    for core fields (TOML has no null; leaving the key out would read back as the default, and
    ``split``'s default is not None) and left out of plugin tables (read back as the default)."""
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
