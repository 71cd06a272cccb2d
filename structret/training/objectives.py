"""The recipe's objectives, built and checked to fit together."""

from __future__ import annotations

from typing import Any, Sequence

from structret.recipes import ObjectiveError, Recipe, parse_objectives
from structret.registry import get_registry

def build_objectives(recipe: Recipe) -> list[tuple[Any, float]]:
    """The recipe's objectives, each with its options (the recipe's table for it); the registry has
    checked each against the objective rules (its name keys an nn.ModuleDict, its role picks what
    the step calls)."""
    registry = get_registry()
    built = []
    for name, weight in parse_objectives(recipe.objective):
        objective = registry.create("objective", name, **recipe.options(registry.get("objective", name).name))
        built.append((objective, weight))
    names = [o.name for o, _ in built]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # heads, logs and loss scales are keyed by name: one would count the other's loss
        raise ObjectiveError(f"'{recipe.objective}': more than one objective is named {', '.join(twice)} "
                             f"(registered as {', '.join(n for n, _ in parse_objectives(recipe.objective))}); "
                             f"each objective of a run needs a name of its own (its 'name' attribute).")
    alone = [o.name for o, _ in built if o.standalone]
    if alone and len(built) > 1:
        raise ObjectiveError(f"'{recipe.objective}': {alone[0]} turns each passage into several rows, so it runs "
                             f"alone (pretraining); fine-tune with a contrastive objective in a second run.")
    for role in ("contrastive", "corruption"):
        same = [o.name for o, _ in built if o.role == role]
        if len(same) > 1:
            why = ("each corrupts the passage its own way, and the passage is encoded once"
                   if role == "corruption" else "they would score the same pairs twice")
            raise ObjectiveError(f"'{recipe.objective}' combines {' and '.join(same)}: at most one {role} "
                                 f"objective per run ({why}).")
    return built


def with_role(objectives: Sequence[tuple[Any, float]], role: str) -> tuple[Any, float] | None:
    """The first ``(objective, weight)`` with ``role``, or None."""
    return next(((o, w) for o, w in objectives if o.role == role), None)
