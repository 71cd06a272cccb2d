"""loss_balance = initial: each objective's loss is divided by its own value at the first joint
step, so the weights share out the losses' starting sizes; the scales are checkpointed."""

from __future__ import annotations

import math

import pytest
import torch
from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from test_training import Interrupt, _recipe, _tensors, csn_train  # noqa: F401  (fixtures)

from structret.recipes import RecipeError, resolve_recipe
from structret.training import train


def _steps(recipe) -> list[dict[str, float]]:
    seen: list[dict[str, float]] = []
    train(recipe, callback=lambda step, values: seen.append(dict(values)))
    return seen


def test_the_first_steps_losses_become_the_scales(tmp_path, tiny_bert_dir, csn_train):
    recipe = _recipe(tmp_path, tiny_bert_dir, csn_train, objective="sda+0.5*mep", max_steps=3,
                     loss_balance="initial", **{"mep.lm_warmup": 0})
    steps = _steps(recipe)
    first = steps[0]
    # the first step is summed as it is (nothing to divide by yet) ...
    assert math.isclose(first["loss"], first["sda"] + 0.5 * first["mep"], rel_tol=1e-5)
    # ... every later one with each loss over its first value: near 1 + 0.5 while the losses barely move
    for later in steps[1:]:
        expected = later["sda"] / first["sda"] + 0.5 * later["mep"] / first["mep"]
        assert math.isclose(later["loss"], expected, rel_tol=1e-5)
        assert not math.isclose(later["loss"], later["sda"] + 0.5 * later["mep"], rel_tol=1e-2)


def test_without_balance_the_losses_are_summed_as_they_are(tmp_path, tiny_bert_dir, csn_train):
    recipe = _recipe(tmp_path, tiny_bert_dir, csn_train, objective="sda+0.5*mep", max_steps=2,
                     **{"mep.lm_warmup": 0})
    assert recipe.loss_balance == "none"
    for values in _steps(recipe):
        assert math.isclose(values["loss"], values["sda"] + 0.5 * values["mep"], rel_tol=1e-5)


def test_balance_changes_what_is_trained(tmp_path, tiny_bert_dir, csn_train):
    fields = dict(objective="sda+mep", max_steps=3, **{"mep.lm_warmup": 0})
    plain = train(_recipe(tmp_path / "plain", tiny_bert_dir, csn_train, **fields))
    balanced = train(_recipe(tmp_path / "balanced", tiny_bert_dir, csn_train, loss_balance="initial", **fields))
    a, b = _tensors(plain), _tensors(balanced)
    assert any(not torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("stop", [1, 3])
def test_resume_keeps_the_scales(tmp_path, stop, tiny_bert_dir, csn_train):
    """Interrupted after the scales were set (checkpoint at 2) or before (step 1, no checkpoint)."""
    fields = dict(objective="sda+mep", max_steps=4, checkpoint_every=2, keep_checkpoints=0,
                  loss_balance="initial", **{"mep.lm_warmup": 0})
    reference = train(_recipe(tmp_path / "whole", tiny_bert_dir, csn_train, **fields))
    cut = _recipe(tmp_path / "cut", tiny_bert_dir, csn_train, **fields)

    def interrupt(step, logs):
        if step == stop:
            raise Interrupt
    with pytest.raises(Interrupt):
        train(cut, callback=interrupt)
    resumed = train(cut, resume=True)
    expected, got = _tensors(reference), _tensors(resumed)
    assert all(torch.equal(expected[k], got[k]) for k in expected), \
        [k for k in expected if not torch.equal(expected[k], got[k])]


def test_an_unknown_balance_is_refused():
    with pytest.raises(RecipeError, match="loss_balance"):
        resolve_recipe(None, {"loss_balance": "equal"})
