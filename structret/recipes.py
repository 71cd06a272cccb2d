"""Recipes: a training run's every setting in one flat TOML table.

The packaged presets (``structret/recipes/*.toml``) reproduce the papers' pipelines;
a file path works the same way. Resolution order: the ``Recipe`` defaults, then the
preset or file, then overrides (the CLI flags). A run writes the resolved recipe to
``RUN/recipe.toml`` so it can be read back, resumed, or rerun exactly.

This module imports only the standard library, so ``structret --help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import typing
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

import tomllib

from structret.errors import StructretError

SIMILARITIES = ("dot", "cos")
DTYPES = ("fp32", "bf16")


class RecipeError(StructretError, ValueError):
    """A recipe cannot be found, read or resolved."""


class ObjectiveError(StructretError, ValueError):
    """An objective spec is malformed, or an objective cannot run on the chosen backbone."""


@dataclass
class Recipe:
    """Every setting of a training run. CLI flags map one to one onto these fields."""

    name: str = ""                    # the preset or file it came from (informational)
    description: str = ""             # one line for --list-recipes (informational)
    reproduces: str = ""              # the paper, table and row it reproduces, or "none: ..." (informational)
    objective: str = "sda"            # "sda+mep", weights as "sda+0.5*mep"
    backbone: str = "minilm"          # a registered backbone
    model: str | None = None          # hub id or local path overriding the backbone's weights
    backbone_options: str = ""        # factory options, "informed_layers=1,strict=false" (--backbone-option)
    data: str = ""                    # FORMAT:PATH (a registered reader) or tevatron:PATH
    split: str | None = "train"
    data_options: str = ""            # reader options, "locale=us,categories=cats.jsonl" (--data-option)
    output: str = ""                  # the run directory
    seed: int = 42
    lr: float = 5e-5
    batch_size: int = 32              # global: summed over processes
    epochs: int = 1
    max_steps: int = 0                # > 0: train this many steps instead of `epochs`
    warmup: float = 0.1               # fraction of the steps with a linear warm-up
    weight_decay: float = 0.0         # Hugging Face Trainer's default, which SANTA's OpenMatch runs used
    max_grad_norm: float = 1.0        # clip threshold (0 = off); HF Trainer's default, as above
    grad_cache_chunk: int = 0         # GradCache: encode N texts at a time, same gradients, less memory (0 = off)
    dtype: str = "fp32"               # "bf16" = autocast; off by default, CPUs without bf16 get slower
    query_max_len: int = 50
    passage_max_len: int = 240
    label_max_len: int = 35           # target tokens of seq2seq corruption (MEP labels)
    negatives: int = 0                # hard negatives per query (dr on Tevatron-format data)
    similarity: str = "dot"           # "dot" (SANTA: raw dot product) or "cos"
    temperature: float = 1.0          # scores are divided by it; SANTA uses none (1.0)
    extractor: str = "auto"           # mep entities: auto = python-tokenize / tree-sitter / title-overlap
    noise_density: float = 0.15       # span-mask: fraction of tokens corrupted (T5's setting)
    mean_span_length: float = 3.0     # span-mask: mean corrupted span (T5's setting)
    text_format: str = ""             # "" = each record's text(); "product" (SANTA), "aspects" (ATTEMPT)
    # products (ATTEMPT and its baselines)
    aspects: str = ""                 # aspect names, "brand,color" ("" = the objective's default)
    mlm_input: str = "content"        # mlm: "content" (BIBERT) or "aspects" (BIBERT-C: indicators + aspect text)
    content_mask_ratio: float = 0.15  # item content masked by aspect-mlm / mlm
    query_mask_ratio: float = 0.3     # query content (shorter, so masked more; ATTEMPT §4.3)
    aspect_mask_ratio: float | None = None  # aspect text: None = aspect-mlm's 0.6, mlm's content ratio
    mutual_weight: float = 1.0        # aspect-mlm: lambda of a2c + c2a (ATTEMPT Eq. 4)
    checkpoint_every: int = 500       # steps between checkpoints (0 = only the final model)
    keep_checkpoints: int = 2         # newest checkpoints kept (0 = keep all)
    log_every: int = 10               # steps between metrics lines

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def parse_options_field(text: str) -> dict[str, Any]:
    """``"informed_layers=1,strict=false"`` -> ``{"informed_layers": 1, "strict": False}`` (backbone_options, data_options)."""
    from structret.data import parse_options

    try:
        return parse_options([part for part in text.split(",") if part.strip()])
    except StructretError as exc:
        raise RecipeError(f"options {text!r}: {exc}; write KEY=VALUE pairs joined by commas") from None


def recipe_fields() -> list[str]:
    return [f.name for f in fields(Recipe)]


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


def check_plugins(recipe: Recipe) -> None:
    """Raise before any work if the recipe names a plugin that is not installed (objective,
    backbone, data format, extractor, text format) or gives its backbone an option it does not
    take. Names cost nothing; the backbone's options import its module."""
    from structret.data import parse_data_spec
    from structret.registry import get_registry

    registry = get_registry()
    parse_objectives(recipe.objective)
    registry.check("backbone", recipe.backbone)
    if recipe.data:
        registry.check("dataset", parse_data_spec(recipe.data)[0])
    if recipe.extractor != "auto":
        registry.check("extractor", recipe.extractor)
    if recipe.text_format:
        registry.check("linearizer", recipe.text_format)
    options = parse_options_field(recipe.backbone_options)
    if options:
        registry.check("backbone", recipe.backbone, options)


# --- presets and files -----------------------------------------------------------------


def list_recipes() -> list[str]:
    """Names of the presets shipped in the package."""
    folder = resources.files("structret") / "recipes"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def _read_toml(text: str, where: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{where}: not valid TOML ({exc})") from None
    tables = [key for key, value in data.items() if isinstance(value, dict)]
    if tables:
        raise RecipeError(f"{where}: recipes are one flat table, but [{tables[0]}] is a sub-table; "
                          f"write its settings at the top level")
    return data


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


def _unknown_field(key: str, where: str) -> RecipeError:
    names = recipe_fields()
    close = difflib.get_close_matches(key, names, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return RecipeError(f"{where}: unknown recipe field '{key}'.{hint} Fields: {', '.join(names)}.")


def _convert(key: str, value: Any, where: str) -> Any:
    """``value`` as the field's type; strings (``--set lr=1e-4``) are parsed."""
    hint = typing.get_type_hints(Recipe)[key]
    optional = type(None) in typing.get_args(hint)
    base = next((t for t in typing.get_args(hint) if t is not type(None)), hint)
    if optional and (value is None or value == ""):
        return None  # TOML has no null: written as "", read back as None
    if value is None:
        raise RecipeError(f"{where}: {key} cannot be empty")
    if isinstance(value, str) and base is not str:
        text = value.strip()
        if base is bool:
            value = {"true": True, "false": False}.get(text.lower(), text)
        else:
            try:
                value = base(text)
            except ValueError:
                raise RecipeError(f"{where}: {key}={value!r} is not {'an integer' if base is int else 'a number'}") from None
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if base is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, base) or (base is not bool and isinstance(value, bool)):
        raise RecipeError(f"{where}: {key} must be {base.__name__}, got {value!r}")
    return value


def _validate(recipe: Recipe) -> None:
    positive = ("lr", "batch_size", "query_max_len", "passage_max_len", "label_max_len",
                "temperature", "mean_span_length")
    for key in positive:
        if not getattr(recipe, key) > 0:
            raise RecipeError(f"{key} must be positive, got {getattr(recipe, key)}")
    at_least_zero = ("epochs", "max_steps", "weight_decay", "max_grad_norm", "grad_cache_chunk", "negatives",
                     "checkpoint_every", "keep_checkpoints", "seed")
    for key in at_least_zero:
        if getattr(recipe, key) < 0:
            raise RecipeError(f"{key} cannot be negative, got {getattr(recipe, key)}")
    if recipe.epochs == 0 and recipe.max_steps == 0:
        raise RecipeError("epochs and max_steps are both 0: set one of them")
    if recipe.log_every < 1:
        raise RecipeError(f"log_every must be at least 1, got {recipe.log_every}")
    if not 0 <= recipe.warmup < 1:
        raise RecipeError(f"warmup is a fraction of the steps in [0, 1), got {recipe.warmup}")
    if not 0 < recipe.noise_density < 1:
        raise RecipeError(f"noise_density is a fraction in (0, 1), got {recipe.noise_density}")
    parse_options_field(recipe.backbone_options)
    parse_options_field(recipe.data_options)
    for key, choices in (("similarity", SIMILARITIES), ("dtype", DTYPES)):
        if getattr(recipe, key) not in choices:
            raise RecipeError(f"{key}={getattr(recipe, key)!r} is not supported; choose one of {', '.join(choices)}")


def resolve_recipe(name_or_path: str | None = None, overrides: dict[str, Any] | None = None) -> Recipe:
    """Defaults <- preset or file <- ``overrides`` (``None`` values mean "not given").

    Keys may use dashes (``query-max-len``), as on the command line. An unknown field
    is an error naming the fields and the closest match.
    """
    values: dict[str, Any] = {}
    source = "defaults"
    if name_or_path:
        loaded, source = load_recipe_values(name_or_path)
        for key, value in loaded.items():
            if key not in recipe_fields():
                raise _unknown_field(key, source)
            values[key] = _convert(key, value, source)
        values.setdefault("name", Path(source).stem if source.endswith(".toml") else source)
    for raw_key, value in (overrides or {}).items():
        key = raw_key.replace("-", "_")
        if key not in recipe_fields():
            raise _unknown_field(raw_key, "override")
        if value is not None:
            values[key] = _convert(key, value, f"override {raw_key}")
    recipe = Recipe(**values)
    _validate(recipe)
    return recipe


# --- writing ---------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    # a JSON string is a TOML basic string, as long as non-ASCII stays raw (TOML has no \ud83d pairs)
    return json.dumps(value, ensure_ascii=False)


def recipe_to_toml(recipe: Recipe) -> str:
    """The recipe as TOML (tomllib reads, but cannot write; the table is flat, so this is enough).

    ``None`` is written as ``""`` (TOML has no null; leaving the key out would read back
    as the default, and ``split``'s default is not None).
    """
    lines = ["# resolved by structret: defaults <- recipe <- command-line overrides"]
    lines += [f"{key} = {_toml_value('' if value is None else value)}" for key, value in recipe.to_dict().items()]
    return "\n".join(lines) + "\n"


def write_recipe(recipe: Recipe, path: str | os.PathLike) -> None:
    Path(path).write_text(recipe_to_toml(recipe), encoding="utf-8")


def read_recipe(path: str | os.PathLike) -> Recipe:
    """A recipe written by ``write_recipe`` (every field, no defaults filled in from a preset)."""
    return resolve_recipe(str(path))
