"""MADRAL (Kong et al., KDD 2022), ATTEMPT's baseline: aspect slots in the hf-encoder backbone
(structret_backbones.aspects) and the aspect-predict objective that trains them
(structret_products.classification), on tiny random models."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from _tiny_models import one_torch_thread, tiny_bert_dir, tiny_t5_dir  # noqa: F401  (fixtures)
from test_aspects import _catalog  # a six-package Debian catalog with section and use aspects
from structret.errors import ModelLoadError, StructretError
from structret.records import ItemRecord
from structret.registry import get_registry
from structret.testing import check_plugin
from structret.training.examples import Example

TEXTS = ["a red mug by acme", "a blue lamp for the desk, made by globex with care and a long description"]


def _encoder(model, **options):
    return get_registry().create("backbone", "hf-encoder", model=str(model), **options)


def test_without_slots_the_vectors_are_todays(tiny_bert_dir):
    from transformers import AutoModel, AutoTokenizer

    backbone = _encoder(tiny_bert_dir, pooling="mean")
    assert backbone.aspect_slots == () and "aspect-slots" not in backbone.capabilities
    tokenizer, model = AutoTokenizer.from_pretrained(tiny_bert_dir), AutoModel.from_pretrained(tiny_bert_dir).eval()
    with torch.no_grad():
        batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        expected = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    np.testing.assert_allclose(backbone.encode(TEXTS, kind="document"), expected, atol=1e-5)


def test_slots_follow_the_first_token_count_toward_max_length_and_stay_out_of_the_mean(tiny_bert_dir):
    backbone = _encoder(tiny_bert_dir, pooling="mean", aspect_slots="brand,color", max_length=12)
    assert backbone.aspect_slots == ("brand", "color") and "aspect-slots" in backbone.capabilities
    ids = backbone.tokenizer.convert_tokens_to_ids(["[ASPECT:brand]", "[ASPECT:color]"])
    # a new slot starts as its name's words
    table = backbone.model.get_input_embeddings().weight
    pieces = backbone.tokenizer("brand", add_special_tokens=False)["input_ids"]
    torch.testing.assert_close(table[ids[0]], table[pieces].mean(0))
    for kind in ("query", "document"):
        batch = backbone.tokenize(TEXTS, kind=kind)
        assert batch["input_ids"][:, 1:3].tolist() == [ids, ids]
        assert int(batch["attention_mask"].sum(1).max()) == 12  # the long text is cut with the slots counted
    batch = backbone.tokenize(TEXTS, kind="document")
    with torch.no_grad():
        hidden = backbone.model(**batch).last_hidden_state
        vectors = backbone.embed(batch)
    text = batch["attention_mask"].clone()
    text[:, 1:3] = 0
    pooled = (hidden * text.unsqueeze(-1)).sum(1) / text.sum(1, keepdim=True)
    # an untrained fusion: the pooled text plus the mean of the two aspect states
    torch.testing.assert_close(vectors, pooled + hidden[:, 1:3].mean(1), atol=1e-5, rtol=1e-5)
    assert backbone.last_aspect_states.shape == (2, 2, backbone.dim)
    # a batch without its slots is refused in one sentence, not read at the wrong positions
    plain = backbone.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with pytest.raises(ModelLoadError, match="without its aspect slot tokens"):
        backbone.embed(plain)


def test_a_saved_model_reloads_with_its_slots_and_the_same_vectors(tiny_bert_dir, tmp_path):
    backbone = _encoder(tiny_bert_dir, pooling="mean", normalize=True, aspect_slots="brand,color")
    with torch.no_grad():  # as if trained: the fusion and the slots moved away from their start
        backbone.aspect_fusion.weights.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
        backbone.model.get_input_embeddings().weight[backbone.aspect_slot_ids] += 0.5
    before = {kind: backbone.encode(TEXTS, kind=kind) for kind in ("query", "document")}
    backbone.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config["structret_aspects"] == {"aspect_slots": ["brand", "color"]}
    assert (tmp_path / "saved" / "aspect_fusion.safetensors").is_file()
    assert not (tmp_path / "saved" / "modules.json").exists()  # sentence-transformers could not fuse
    reloaded = _encoder(tmp_path / "saved", pooling="mean", normalize=True)
    assert reloaded.aspect_slots == ("brand", "color")
    for kind, vectors in before.items():
        np.testing.assert_array_equal(reloaded.encode(TEXTS, kind=kind), vectors)
    with pytest.raises(ModelLoadError, match="trained with aspect_slots brand,color"):
        _encoder(tmp_path / "saved", aspect_slots="brand")
    (tmp_path / "saved" / "aspect_fusion.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="no aspect_fusion.safetensors"):
        _encoder(tmp_path / "saved")


@pytest.mark.parametrize("dtype", ["bf16", "bf16-weights"])
def test_slots_encode_in_bf16_with_the_fusion_kept_fp32(tiny_bert_dir, dtype):
    exact = _encoder(tiny_bert_dir, pooling="mean", normalize=True, aspect_slots="brand,color", dtype="fp32")
    low = _encoder(tiny_bert_dir, pooling="mean", normalize=True, aspect_slots="brand,color", dtype=dtype)
    low.aspect_fusion.load_state_dict(exact.aspect_fusion.state_dict())
    ref, vectors = exact.encode(TEXTS), low.encode(TEXTS)
    assert not np.array_equal(ref, vectors) and (ref * vectors).sum(1).min() > 0.999
    assert {p.dtype for p in low.aspect_fusion.parameters()} == {torch.float32}


def test_slots_and_the_informed_head_are_not_combined(tiny_bert_dir):
    with pytest.raises(ModelLoadError, match="cannot be combined"):
        _encoder(tiny_bert_dir, informed_layers=1, aspect_slots="brand")


ITEMS = [ItemRecord(f"i{i}", title=f"{brand} {color} {thing}", content=f"a {thing} by {brand}, colour {color}",
                    aspects={"brand": [brand], "color": [color]})
         for i, (brand, color, thing) in enumerate(
             (b, c, t) for b in ("acme", "globex") for c in ("red", "blue") for t in ("mug", "lamp"))]


def _accuracy(objective, backbone, batch, targets) -> float:
    with torch.no_grad():
        vectors = backbone.embed(batch)
        right = []
        for aspect in objective.aspects:
            logits = objective.module[aspect](objective.features(backbone, vectors, aspect))
            right += (logits.argmax(-1) == targets[aspect].argmax(-1)).tolist()
    return sum(right) / len(right)


def test_aspect_predict_learns_the_aspects_on_their_slots(tiny_bert_dir, one_torch_thread):
    torch.manual_seed(0)
    objective = get_registry().create("objective", "aspect-predict", aspects="brand,color", min_count=1)
    backbone = _encoder(tiny_bert_dir, pooling="mean")
    objective.check(backbone)  # a backbone without slots is given one per aspect
    assert backbone.aspect_slots == ("brand", "color")
    texts = [item.text() for item in ITEMS]
    objective.setup([Example([t], [t], record=item) for t, item in zip(texts, ITEMS)], backbone)
    batch = backbone.tokenize(texts, kind="document", max_length=32)
    targets = objective.targets(ITEMS)
    before = _accuracy(objective, backbone, batch, targets)
    parameters = list(backbone.training_module.parameters()) + list(objective.module.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=3e-3)
    backbone.model.train()
    losses = []
    for _ in range(40):
        vectors, _ = backbone.train_forward(batch)
        loss, count = objective.loss(backbone, batch, vectors, targets)
        assert int(count) == 2 * len(ITEMS)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    backbone.model.eval()
    assert losses[-1] < 0.3 * losses[0], losses
    after = _accuracy(objective, backbone, batch, targets)
    assert after >= 0.9 and after > before, (before, after)  # chance is 0.5 per aspect


def _recipe(tmp_path, catalog, model, name, **more):
    from structret.recipes import resolve_recipe

    values = dict(objective="mlm+aspect-predict", backbone="hf-encoder", model=str(model),
                  data=f"debian-packages:{catalog}", split="all", aspects="section,use", output=str(tmp_path / name),
                  batch_size=3, max_steps=6, lr=1e-3, checkpoint_every=2, keep_checkpoints=0, log_every=1,
                  passage_max_len=64)
    values.update(more)
    if "aspect" not in values["objective"]:
        del values["aspects"]
    return resolve_recipe(None, values)


def test_madral_pretrains_resumes_exactly_and_finetuning_keeps_and_trains_the_fusion(tmp_path, tiny_bert_dir,
                                                                                     one_torch_thread):
    from safetensors.torch import load_file

    from structret.training import train

    catalog = _catalog(tmp_path / "Packages")

    class Stop(Exception):
        pass

    whole = train(_recipe(tmp_path, catalog, tiny_bert_dir, "whole"))
    rows = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["loss/aspect-predict"] > 0 for r in rows)
    heads = load_file(str(tmp_path / "whole" / "checkpoint-000004" / "trainer" / "objective_heads.safetensors"))
    assert set(heads) == {f"aspect-predict.{a}.{p}" for a in ("section", "use") for p in ("weight", "bias")}

    def stop_at_4(step, logs):
        if step == 4:
            raise Stop
    with pytest.raises(Stop):
        train(_recipe(tmp_path, catalog, tiny_bert_dir, "cut"), callback=stop_at_4)
    resumed = train(_recipe(tmp_path, catalog, tiny_bert_dir, "cut"), resume=True)
    for name in ("model.safetensors", "aspect_fusion.safetensors"):
        expected, got = load_file(str(whole / name)), load_file(str(resumed / name))
        assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)

    pretrained = _encoder(whole)
    assert pretrained.aspect_slots == ("section", "use")
    # fine-tuning (attempt-finetune's dr) from the run: the slots come along and the fusion learns
    tuned = train(_recipe(tmp_path, catalog, whole, "tuned", objective="dr", lr=1e-2, max_steps=4,
                          checkpoint_every=0))
    backbone = _encoder(tuned)
    assert backbone.aspect_slots == ("section", "use")
    assert float(backbone.aspect_fusion.weights.weight.detach().abs().sum()) > 0
    texts = ["command line json processor", "retrieves files from the web"]
    trained = backbone.encode(texts)
    with torch.no_grad():
        backbone.aspect_fusion.weights.weight.zero_()
        backbone.aspect_fusion.weights.bias.zero_()
    assert np.abs(backbone.encode(texts) - trained).max() > 1e-4


def _train_cli(tmp_path, catalog, objective, *args):
    from structret.cli import cli

    result = CliRunner().invoke(cli, ["train", "--objective", objective, "--data",
                                      f"debian-packages:{catalog}", "--split", "all", "--out", str(tmp_path / "run"),
                                      "--set", "aspects=section,use", "--set", "batch_size=2",
                                      "--set", "max_steps=1", *args])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.replace("\r", "\n").splitlines() if "Error:" in line]


def test_aspect_predict_on_a_backbone_without_slots_is_one_clear_error(tmp_path, tiny_t5_dir):
    errors = _train_cli(tmp_path, _catalog(tmp_path / "Packages"), "dr+aspect-predict", "--backbone", "t5", "--model", str(tiny_t5_dir))
    assert len(errors) == 1 and "aspect-predict needs a backbone with aspect slots" in errors[0], errors


def test_slots_that_do_not_cover_the_aspects_are_one_clear_error(tmp_path, tiny_bert_dir):
    errors = _train_cli(tmp_path, _catalog(tmp_path / "Packages"), "mlm+aspect-predict", "--backbone", "hf-encoder",
                        "--model", str(tiny_bert_dir), "--set", "hf-encoder.aspect_slots=section")
    assert len(errors) == 1 and "do not cover use" in errors[0], errors


def test_aspect_predict_keeps_its_contract_and_is_listed():
    from structret.cli import cli
    from structret.recipes import list_recipes, resolve_recipe

    assert check_plugin("objective", "aspect-predict")["backbone"]
    assert "aspect-predict" in CliRunner().invoke(cli, ["plugins"]).output
    assert {"madral", "madral-c"} <= set(list_recipes())
    for name, text_format in (("madral", ""), ("madral-c", "aspects")):
        recipe = resolve_recipe(name, {"backbone": "minilm", "aspects": "section,role"})
        assert recipe.objective == "mlm+aspect-predict" and recipe.text_format == text_format
        assert recipe.plugins["aspect-predict"]["aspects"] == ["section", "role"]  # the slots follow aspects


def test_the_attempt_suite_runs_madral_rows():
    import tomllib

    from structret.registry import get_registry

    suite = tomllib.loads(get_registry().get("suite", "attempt").read_text())
    rows = {row["label"]: row for row in suite["rows"]}
    for label, recipe in (("MADRAL", "madral"), ("MADRAL-C", "madral-c")):
        assert rows[label]["recipe"] == recipe and rows[label]["finetune"] == "attempt-finetune"
        assert "paper_only" not in rows[label]


def test_aspect_predict_options_are_checked():
    with pytest.raises(StructretError, match="min_count"):
        get_registry().create("objective", "aspect-predict", min_count=0)
    assert repr(get_registry().create("objective", "aspect-predict", aspects="a,b")) == \
        "aspect-predict(aspects=['a', 'b'], min_count=2)"


def test_madral_c_reads_the_aspects_layout_after_its_slots(tmp_path, tiny_bert_dir, one_torch_thread):
    from structret.training import train

    catalog = _catalog(tmp_path / "Packages")
    final = train(_recipe(tmp_path, catalog, tiny_bert_dir, "c", text_format="aspects", mlm_input="aspects",
                          max_steps=2, checkpoint_every=0))
    backbone = _encoder(final)
    assert backbone.aspect_slots == ("section", "use")
    vocab = backbone.tokenizer.get_vocab()
    ids = backbone.tokenize(["[SECTION] web [USE] [SEP] [C] wget"], kind="document")["input_ids"][0].tolist()
    assert ids[1:4] == [vocab["[ASPECT:section]"], vocab["[ASPECT:use]"], vocab["[SECTION]"]]


def test_a_backbone_option_whose_value_holds_commas_is_one_option(tmp_path, tiny_bert_dir):
    """The README's --backbone-option aspect_slots=brand,color: a comma starts a new option only before KEY=."""
    from structret.cli import cli
    from structret.registry.tables import parse_options_field

    assert parse_options_field("aspect_slots=section,use,max_length=32") == {"aspect_slots": "section,use",
                                                                            "max_length": "32"}
    result = CliRunner().invoke(cli, ["train", "--objective", "dr+aspect-predict", "--backbone", "hf-encoder",
                                      "--model", str(tiny_bert_dir), "--backbone-option", "aspect_slots=section,use",
                                      "--backbone-option", "max_length=32", "--data",
                                      f"debian-packages:{_catalog(tmp_path / 'Packages')}", "--split", "all",
                                      "--out", str(tmp_path / "run"), "--set", "aspects=section,use",
                                      "--set", "batch_size=2", "--set", "max_steps=1"])
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "run" / "final" / "config.json").read_text())
    assert config["structret_aspects"] == {"aspect_slots": ["section", "use"]}
