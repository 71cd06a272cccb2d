"""Scores by the dataset's own protocol, and training runs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structret import defaults
from structret.datasets import dataset_split
from structret.models import Model, load_model
from structret.errors import StructretError
from structret.records import Dataset
from structret.registry import get_registry
from structret.search.system import DenseRetriever, HybridRetriever


def evaluate(model: Model | str, data: Dataset | str, *, split: str | None = "test", limit: int | None = None,
             batch_size: int = 32, show_progress: bool = True) -> dict[str, float]:
    """``model`` scored on ``data`` with the dataset's own protocol, as ``structret bench``
    scores it: ``{measure name: value}`` (values in [0, 1]; a measure the data is too small for,
    such as CSN-999 below 1000 pairs, is left out).

    ``model``: a Model, or any system name bench accepts (``bm25``, a backbone, a run
    directory). ``data``: a Dataset, or a ``"FORMAT:PATH"`` spec read with ``split``.
    ``limit``: only the first N queries or pairs.
    """
    from structret.evaluation import evaluate as evaluate_system

    dataset = dataset_split(data, split)
    system: Any = model
    if isinstance(model, Model):
        system = DenseRetriever(model.backbone, batch_size=batch_size, show_progress=show_progress,
                                text_format=model.text_format)
    scores = evaluate_system(system, dataset, limit=limit, batch_size=batch_size, show_progress=show_progress)
    return {measure: value for measure, value in scores.items() if not math.isnan(value)}


def tune_fusion(model: Model, data: Dataset | str, *, split: str | None = "valid", lexical: str = defaults.LEXICAL,
                limit: int | None = None, batch_size: int = 32, show_progress: bool = True,
                measure: str | None = None) -> dict[str, Any]:
    """Choose how ``lexical`` fuses with ``model`` (structret.search.fusion) on ``data``'s ``split`` --
    validation data, never what you report -- by ``measure`` (default: the protocol's first,
    ties broken by the next): every method x weight of ``structret.search.fusion.grid()``. Returns ``{"fusion": spec, "measure",
    "scores": {spec: value}, "queries"}``; pass ``result["fusion"]`` to ``build_index(...,
    lexical=lexical, fusion=...)``."""
    from structret.evaluation import tune_fusion as tune

    dataset = dataset_split(data, split)
    dense = DenseRetriever(model.backbone, batch_size=batch_size, show_progress=show_progress,
                           text_format=model.text_format)
    hybrid = HybridRetriever(get_registry().create("retriever", lexical), dense)
    _, result = tune(hybrid, dataset, limit=limit, show_progress=show_progress, measure=measure)
    result["split"] = split
    return result


@dataclass
class Run:
    """A finished training run: its directory, and the final model in it."""

    path: Path
    final: Path  # the final model directory (PATH/final)
    # the resolved recipe as the run records it (a dict, as Model.recipe of its model holds it)
    recipe: dict[str, Any] = field(default_factory=dict)

    def load_model(self, **options: Any) -> Model:
        """The trained model, with the run's backbone, weights and text format."""
        return load_model(str(self.path), **options)


def train(recipe: str | None = None, *, data: str | Dataset | None = None, out: str | None = None,
          objective: str | None = None, backbone: str | None = None, model: str | None = None,
          resume: bool = False, verify: bool = True, settings: dict[str, Any] | None = None,
          **fields: Any) -> Run:
    """Train ``recipe`` (a shipped preset such as ``minilm-code``, a .toml file, or None for
    the defaults), overridden by the keyword arguments, into the run directory ``out``.

    ``data``: a ``"FORMAT:PATH"`` spec (or a Dataset from ``structret.load_dataset``).
    ``fields``: any recipe field (``max_steps=100``, ``batch_size=16``, ``lr=2e-5``);
    ``settings``: the same as a dict, whose keys may be dotted (``{"mep.extractor": ...}``)
    as ``--set`` takes them. ``resume=True`` continues the run in ``out`` (its recipe.toml
    when ``recipe`` is None). Raises RecipeError / PluginError before any work for an
    unknown field, plugin or option; TrainingError for what stops a run.
    """
    from structret.recipes import check_plugins, resolve_recipe

    overrides: dict[str, Any] = {"objective": objective, "backbone": backbone, "model": model, "output": out}
    if isinstance(data, Dataset):
        data, split, options = _spec_of(data)
        overrides["split"] = split
        if options:
            overrides["data_options"] = ",".join(f"{key}={value}" for key, value in options.items())
    overrides["data"] = data
    overrides.update(fields)
    overrides.update(settings or {})
    if resume and recipe is None and out and (Path(out) / "recipe.toml").exists():
        recipe = str(Path(out) / "recipe.toml")
    resolved = resolve_recipe(recipe, overrides)
    check_plugins(resolved)
    from structret.training import train as run_training  # torch: only once the recipe is known to be sound

    final = run_training(resolved, resume=resume, verify=verify)
    return Run(Path(resolved.output), Path(final), resolved.to_dict())


def _spec_of(dataset: Dataset) -> tuple[str, str | None, dict]:
    if dataset.source is None:
        raise StructretError(f"train reads its data itself, from a FORMAT:PATH spec; the dataset "
                             f"'{dataset.name}' was not loaded with structret.load_dataset, so its spec is unknown. "
                             f"Pass data='FORMAT:PATH'.")
    return dataset.source


def list_recipes() -> list[Any]:
    """The installed recipes (every plugin's ``register_recipes``), resolved (``structret.recipes.Recipe``:
    name, description, the paper table it ``reproduces``, every field)."""
    from structret.recipes import list_recipes as shipped, resolve_recipe

    return [resolve_recipe(name) for name in shipped()]
