"""The catalog recipes ship what issue 38's attempt-budget suite measured, and an index built with
their run fuses as the recipe says."""

from __future__ import annotations

import warnings

import pytest

from structret.recipes import resolve_recipe, run_plugins
from structret.suites.files import load_suite

# what a shipped recipe may say differently from the suite's cell: its name and words, and the fusion
# the suite chose on validation (the suite tunes it per run instead of reading it from the recipe)
OWN = {"name", "description", "reproduces", "fusion", "model"}


def _measured() -> tuple[dict, dict]:
    """The pretraining and fine-tuning the suite ran for its shipped row, resolved as its runner does."""
    suite = load_suite("attempt-budget")
    row = next(r for r in suite.rows if r.lexical and r.recipe)  # bm25 + ATTEMPT, the row chosen on validation
    data = suite.datasets[0]
    overrides = {**suite.backbone_set[data.standin_backbone], **data.standin_set, **row.set[data.key],
                 "backbone": data.standin_backbone}
    (variant,) = row.variants
    with warnings.catch_warnings():  # the suite's dr settings do not apply to the pretraining, which says so
        warnings.simplefilter("ignore")
        pre = resolve_recipe(row.recipe[data.key], {**overrides, **variant.set})
        kept = [name for name, entry in run_plugins(pre.to_dict()).items() if entry.kind in ("backbone", "linearizer")]
        carried = {f"{name}.{k}": v for name in kept for k, v in pre.options(name).items() if v is not None}
        fine = resolve_recipe(row.finetune[data.key], {**overrides, "backbone": pre.backbone,
                                                       "text_format": pre.text_format, **carried})
    return pre.to_dict(), fine.to_dict()


def _settings(recipe: dict) -> dict:
    assert recipe["max_steps"]  # which decides the run's length: epochs are then not read (Batches.total_steps)
    return {k: v for k, v in recipe.items() if k not in OWN | {"epochs"}}


@pytest.mark.parametrize("step, shipped", [(0, "minilm-catalog-pretrain"), (1, "minilm-catalog")])
def test_the_catalog_recipes_are_what_the_suite_measured(step, shipped):
    measured = _measured()[step]
    recipe = resolve_recipe(shipped).to_dict()
    assert _settings(recipe) == _settings(measured)
    assert recipe["backbone"] == "minilm" and recipe["text_format"] == "aspects"


def test_the_fine_tuning_recipe_carries_the_fusion_chosen_on_validation():
    from structret.search.fusion import parse

    fusion = resolve_recipe("minilm-catalog").fusion
    assert fusion and parse(fusion).spec == fusion


def test_an_index_of_a_trained_run_fuses_as_its_recipe_says(fresh_registry):
    import structret
    from structret.records import Dataset, ItemRecord, ReadStats

    items = {"vim": ItemRecord("vim", title="vim", content="a text editor", aspects={"section": ["editors"]}),
             "gimp": ItemRecord("gimp", title="gimp", content="an image program", aspects={"section": ["graphics"]})}
    data = Dataset("items", items, {}, {}, ReadStats())
    model = structret.load_model("minilm")
    default = structret.build_index(model, data, lexical="bm25", show_progress=False).fusion.spec
    model.recipe = {"fusion": "rrf:0.7" if not default.startswith("rrf") else "minmax:0.7"}
    assert structret.build_index(model, data, lexical="bm25", show_progress=False).fusion.spec == model.recipe["fusion"]
    given = structret.build_index(model, data, lexical="bm25", fusion="zscore:0.1", show_progress=False)
    assert given.fusion.spec == "zscore:0.1"  # a fusion asked for wins over the recipe's
    assert structret.build_index(model, data, show_progress=False).fusion is None  # no lexical side: nothing to fuse
