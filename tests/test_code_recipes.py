"""The code recipes ship what issue 38's learning curves (benchmarks/learning_curves.py) trained at their
largest budget, and the fusion each carries is one ``structret index`` can parse."""

from __future__ import annotations

import pytest
from _scripts import load_script

from structret.search.fusion import grid, parse
from structret.recipes import resolve_recipe

# what a shipped recipe says that the curves' runs do not: its name and words, and the fusion chosen on
# validation (each curve run tunes its own and records it)
OWN = {"name", "description", "reproduces", "fusion"}


@pytest.fixture(scope="module")
def curves():
    return load_script("learning_curves.py")


def _settings(recipe) -> dict:
    return {k: v for k, v in recipe.to_dict().items() if k not in OWN}


@pytest.mark.parametrize("shipped, system", [("minilm-code", "sda"), ("minilm-code-hardneg", "sda-bm25neg")])
def test_a_code_recipe_is_the_curve_it_was_chosen_from(curves, shipped, system):
    largest = max(curves.BUDGETS)
    measured = resolve_recipe(None, {**curves.BASE, **curves.SYSTEMS[system].settings, "max_steps": largest})
    assert _settings(resolve_recipe(shipped)) == _settings(measured)


@pytest.mark.parametrize("shipped", ["minilm-code", "minilm-code-hardneg"])
def test_a_code_recipe_carries_a_fusion_from_the_grid_it_was_tuned_on(shipped):
    fusion = resolve_recipe(shipped).fusion
    assert fusion and parse(fusion).spec in {f.spec for f in grid()}
