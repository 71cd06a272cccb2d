"""LoRA adapters on the hf-encoder backbones (structret_backbones.lora): only the adapter trains,
runs save it beside the base weights, resume exactly, load back, merge and export; gradient
caching and two processes give the gradients of one uncached step, as for full fine-tuning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _tiny_models import one_torch_thread, tiny_bert_dir  # noqa: F401  (fixtures)
from test_training import (  # noqa: F401  (fixtures and the step helpers of the full fine-tuning tests)
    Interrupt,
    _assert_same,
    _free_port,
    _one_step,
    _process,
    _recipe,
    _sda_mep,
    _tensors,
    csn_train,
    still_bert_dir,
)

from structret.errors import ModelLoadError
from structret.recipes import resolve_recipe
from structret.training import load_examples, train

pytest.importorskip("peft")

TEXTS = ["def add(a, b): return a + b", "sort the list", "x"]
WIDE = "query,key,value,dense"  # every linear layer of the tiny BERT: enough adapted tensors to compare


def _lora(recipe, **options):
    """``recipe`` with a LoRA adapter on its backbone."""
    values = recipe.to_dict()
    plugins = values.get("plugins") or {}
    values["plugins"] = {**plugins, recipe.backbone: {**plugins.get(recipe.backbone, {}), **options}}
    return resolve_recipe(None, values)


def test_only_the_adapter_trains_and_it_starts_as_the_plain_model(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    plain = HFEncoder(tiny_bert_dir)
    adapted = HFEncoder(tiny_bert_dir, lora_r=4, lora_dropout=0.1)
    assert adapted.adapter == {"r": 4, "alpha": 8.0, "dropout": 0.1, "targets": ["query", "value"]}  # peft's BERT default
    assert "lora" in adapted.capabilities and "lora" not in plain.capabilities
    trained = [n for n, p in adapted.training_module.named_parameters() if p.requires_grad]
    assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)
    assert len(trained) == 2 * 2 * 2  # 2 layers x (query, value) x (A, B)
    # lora_B starts at zero: the same vectors, but not the same fingerprint (the adapter is part of the model)
    np.testing.assert_allclose(adapted.encode(TEXTS), plain.encode(TEXTS), atol=1e-6)
    before = adapted.fingerprint()
    assert before != plain.fingerprint()
    with torch.no_grad():
        for name, p in adapted.model.named_parameters():
            if ".lora_B." in name:
                p.fill_(1.0)
    assert adapted.fingerprint() != before
    assert not np.allclose(adapted.encode(TEXTS), plain.encode(TEXTS), atol=1e-4)
    wide = HFEncoder(tiny_bert_dir, lora_r=2, lora_alpha=2, lora_targets=WIDE)
    assert wide.adapter["alpha"] == 2.0 and wide.adapter["targets"] == sorted(WIDE.split(","))


def test_lora_options_that_cannot_work_say_why(tiny_bert_dir, monkeypatch):
    import sys

    from structret.registry import get_registry
    from structret_backbones.hf import HFEncoder

    with pytest.raises(ModelLoadError, match="lora_alpha given without lora_r"):
        HFEncoder(tiny_bert_dir, lora_alpha=16)
    with pytest.raises(ModelLoadError, match="lora_targets=nope.*not found"):
        HFEncoder(tiny_bert_dir, lora_r=4, lora_targets="nope")
    with pytest.raises(Exception, match="lora_r"):
        get_registry().get("backbone", "hf-encoder").validate_options({"lora_r": -1})
    monkeypatch.setitem(sys.modules, "peft", None)  # as if not installed
    with pytest.raises(ModelLoadError, match=r"needs peft.*pip install 'structret\[lora\]'"):
        HFEncoder(tiny_bert_dir, lora_r=4)


def test_a_lora_run_resumes_to_exactly_the_same_adapter(tmp_path, tiny_bert_dir, csn_train, one_torch_thread):
    from safetensors.torch import load_file

    fields = dict(objective="sda", max_steps=6, checkpoint_every=2, keep_checkpoints=0, lr=1e-2)
    options = dict(lora_r=4, lora_dropout=0.1)  # adapter dropout too: the RNG state must be restored
    whole = _lora(_recipe(tmp_path / "whole", tiny_bert_dir, csn_train, **fields), **options)
    cut = _lora(_recipe(tmp_path / "cut", tiny_bert_dir, csn_train, **fields), **options)
    reference = train(whole)

    def stop_after_4(step, logs):
        if step == 4:
            raise Interrupt
    with pytest.raises(Interrupt):
        train(cut, callback=stop_after_4)
    resumed = train(cut, resume=True)

    def adapter(directory: Path):
        return load_file(str(directory / "lora" / "adapter_model.safetensors"))
    expected, got = adapter(reference), adapter(resumed)
    assert expected.keys() == got.keys() and len(expected) == 8
    assert all(torch.equal(expected[k], got[k]) for k in expected)
    at_2 = adapter(Path(cut.output) / "checkpoint-000002")
    assert any(not torch.equal(expected[k], at_2[k]) for k in expected)  # steps 3-6 did train it
    # the base weights are saved under their own names, untouched by training
    base = {k.removeprefix("bert."): v for k, v in _tensors(tiny_bert_dir).items()}  # saved as BertForMaskedLM
    saved = {k: v for k, v in _tensors(resumed).items() if not k.startswith("pooler.")}  # not in the tiny checkpoint
    assert set(saved) <= set(base) and not any("lora" in k for k in saved)
    assert all(torch.equal(saved[k], base[k]) for k in saved)


def test_a_lora_run_loads_back_merges_and_exports(tmp_path, tiny_bert_dir, csn_train, one_torch_thread):
    from structret.models import load_model
    from structret.exporting import export_run
    from structret_backbones.hf import HFEncoder

    recipe = _lora(_recipe(tmp_path, tiny_bert_dir, csn_train, objective="sda", max_steps=3, lr=5e-2), lora_r=4)
    final = train(recipe)
    model = load_model(str(tmp_path / "run"))
    assert model.backbone.adapter is not None
    vectors = model.encode(TEXTS)
    assert not np.allclose(vectors, HFEncoder(tiny_bert_dir).encode(TEXTS), atol=1e-3)  # the adapter is applied
    with pytest.raises(ModelLoadError, match="holds a LoRA adapter.*lora_r=0 to merge"):
        HFEncoder(final, lora_r=8)
    merged = HFEncoder(final, lora_r=0)  # asked for a plain model: the adapter is folded in, all of it trains
    assert merged.adapter is None and all(p.requires_grad for p in merged.model.parameters())
    np.testing.assert_allclose(merged.encode(TEXTS), vectors, atol=1e-5)

    lines: list[str] = []
    st = export_run(tmp_path / "run", "sentence-transformers", tmp_path / "st", echo=lines.append)
    assert any(line.startswith("LoRA adapter (r=4, alpha=8, on query,value) merged") for line in lines), lines
    assert not (st / "lora").exists()
    # a plain checkpoint: transformers alone (no peft) gives the run's vectors
    plain = HFEncoder(st)
    assert plain.adapter is None
    np.testing.assert_allclose(plain.encode(TEXTS), vectors, atol=1e-5)
    onnx = export_run(tmp_path / "run", "onnx", tmp_path / "onnx", echo=lines.append)
    np.testing.assert_allclose(load_model(str(onnx)).encode(TEXTS), vectors, atol=1e-4)
    assert json.loads((final / "structret.json").read_text())["recipe"]["plugins"]["hf-encoder"]["lora_r"] == 4


def test_grad_cache_with_lora_gives_the_gradients_of_the_whole_batch(tmp_path, tiny_bert_dir, csn_train,
                                                                    one_torch_thread):
    recipe = _lora(_sda_mep(tmp_path, tiny_bert_dir, csn_train), lora_r=2, lora_targets=WIDE, lora_dropout=0.1)
    examples, _ = load_examples(csn_train, "train")
    uncached = _one_step(recipe, examples)
    assert all(".lora_" in n or ".cls." in n for n in uncached["grads"])  # the adapter, and MEP's head
    _assert_same(_one_step(recipe, examples, chunk=8), uncached, "LoRA, one chunk")
    _assert_same(_one_step(recipe, examples, chunk=3), _one_step(recipe, examples, reference=3), "LoRA, chunks of 3")


def test_two_processes_with_lora_give_the_gradients_of_one(tmp_path, still_bert_dir, csn_train):
    import torch.multiprocessing as mp

    still = _lora(_sda_mep(tmp_path, still_bert_dir, csn_train), lora_r=2, lora_targets=WIDE)
    examples, _ = load_examples(csn_train, "train")
    runs = {"uncached": (still.to_dict(), {}), "cached": (still.to_dict(), {"chunk": 3})}
    out = tmp_path / "two.pt"
    mp.spawn(_process, args=(2, _free_port(), runs, examples, str(out)), nprocs=2, join=True)
    two = torch.load(out, weights_only=True)
    one = _one_step(still, examples)
    assert any(".lora_A." in n for n in one["grads"]) and not any("attention.self.query.base_layer" in n
                                                                  for n in one["grads"])
    _assert_same(two["uncached"], one, "2 processes, LoRA")
    _assert_same(two["cached"], one, "2 processes, LoRA, gradient caching")
