"""LM-head warm-up (structret.training.warmup): the head trains alone first, with the encoder
frozen; auto does so only for a head the checkpoint lacks; resumable like every other step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from _tiny_models import build_tiny_bert, tiny_bert_dir  # noqa: F401  (fixture)
from test_training import Interrupt, _recipe, _tensors, csn_train, tiny_t5_sentinels  # noqa: F401  (fixtures)

from structret.cli import cli
from structret.errors import PluginError
from structret.registry import get_registry
from structret.training import TrainingError, train


@pytest.fixture(scope="session")
def headless_bert_dir(tmp_path_factory) -> Path:
    """The tiny BERT saved as a plain BertModel: no MaskedLM head weights, as MiniLM ships."""
    from transformers import BertModel

    root = tmp_path_factory.mktemp("headless-bert")
    full = build_tiny_bert(root / "full")
    torch.manual_seed(0)
    BertModel.from_pretrained(full).save_pretrained(root / "model")  # its pooler drawn once, here
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (full / name).is_file():
            shutil.copy(full / name, root / "model" / name)
    return root / "model"


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _encoder(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(directory / "model.safetensors"))


def _head(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(directory / "lm_head.safetensors"))


def test_the_backbone_says_whether_its_head_is_new(tiny_bert_dir, headless_bert_dir):
    from structret_backbones.hf import HFEncoder

    fresh, loaded = HFEncoder(headless_bert_dir), HFEncoder(tiny_bert_dir)
    with pytest.warns(UserWarning, match="no weights for its MaskedLM head"):
        HFEncoder._warned_fresh_head = False
        fresh.enable_lm()
    loaded.enable_lm()
    assert fresh.lm_head_is_new and not loaded.lm_head_is_new
    head = {id(p) for p in fresh.lm_head_parameters()}
    assert head and id(fresh.model.get_input_embeddings().weight) not in head  # the tied matrix is the encoder's
    assert not head & {id(p) for p in fresh.model.parameters()}


def test_warmup_trains_the_head_alone_and_its_loss_falls(tmp_path, headless_bert_dir, csn_train):
    warm = 16
    recipe = _recipe(tmp_path, headless_bert_dir, csn_train, objective="sda+mep", max_steps=2, checkpoint_every=1,
                     keep_checkpoints=0, **{"mep.lm_warmup_auto_steps": warm, "mep.lm_warmup_lr": 2e-2})
    assert recipe.plugins["mep"]["lm_warmup"] == "auto"
    final = train(recipe)
    run = Path(recipe.output)
    original = _encoder(headless_bert_dir)
    after_1, after_warm = run / "checkpoint-000001", run / f"checkpoint-{warm:06d}"
    for checkpoint in (after_1, after_warm):  # every encoder weight bit-identical through the warm-up
        saved = _encoder(checkpoint)
        assert saved.keys() == original.keys()
        assert all(torch.equal(saved[k], original[k]) for k in original), \
            [k for k in original if not torch.equal(saved[k], original[k])]
    early, late = _head(after_1), _head(after_warm)
    assert any(not torch.equal(early[k], late[k]) for k in early)  # while the head changed
    trained = _encoder(final)  # the run's own steps then train the encoder
    assert any(not torch.equal(trained[k], original[k]) for k in original)

    rows = _rows(run)
    assert [r["phase"] for r in rows] == ["lm-warmup"] * warm + ["train"] * 2
    assert [r["step"] for r in rows] == list(range(1, warm + 3))
    warmup = rows[:warm]
    assert all("loss/sda" not in r and r["lr"] == 2e-2 for r in warmup)  # the corruption loss alone, its own lr
    assert "lm_warmup_seconds" in warmup[-1] and warmup[-1]["lm_warmup_seconds"] > 0
    assert "loss/sda" in rows[-1]
    losses = [r["loss/mep"] for r in warmup]
    # a random head starts near ln(vocabulary); a few steps on the bias alone bring it well down
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.2, losses
    assert json.loads((final / "structret.json").read_text())["step"] == warm + 2


def test_auto_skips_a_head_the_checkpoint_has(tmp_path, tiny_bert_dir, capfd, csn_train):
    recipe = _recipe(tmp_path, tiny_bert_dir, csn_train, objective="mep", max_steps=2)
    train(recipe)
    assert [r["phase"] for r in _rows(Path(recipe.output))] == ["train", "train"]
    assert "lm warm-up: none (lm_warmup = auto: the checkpoint has its LM head)" in capfd.readouterr().err


def test_a_number_forces_warmup_and_zero_turns_it_off(tmp_path, tiny_bert_dir, headless_bert_dir, csn_train):
    forced = _recipe(tmp_path / "forced", tiny_bert_dir, csn_train, objective="mlm", max_steps=1,
                     **{"mlm.lm_warmup": 2})
    train(forced)
    assert [r["phase"] for r in _rows(Path(forced.output))] == ["lm-warmup", "lm-warmup", "train"]
    off = _recipe(tmp_path / "off", headless_bert_dir, csn_train, objective="mep", max_steps=1,
                  **{"mep.lm_warmup": "0"})
    train(off)
    assert [r["phase"] for r in _rows(Path(off.output))] == ["train"]


def test_a_head_tied_to_the_embeddings_has_nothing_to_warm_up(tmp_path, tiny_t5_sentinels, csn_train):
    from structret_backbones.t5 import T5Encoder

    model = tiny_t5_sentinels  # tie_word_embeddings: the output matrix is the input one
    t5 = T5Encoder(model)
    t5.enable_lm()
    assert t5.lm_head_parameters() == [] and not t5.lm_head_is_new
    recipe = _recipe(tmp_path, model, csn_train, backbone="t5", objective="span-mask", max_steps=1,
                     **{"span-mask.lm_warmup": 3})
    with pytest.raises(TrainingError, match=r"nothing to warm up. Set span-mask.lm_warmup = 0"):
        train(recipe)


@pytest.mark.parametrize("stop", [3, 5])  # inside the warm-up (resumes from step 2), just after it (from 4)
def test_resume_around_the_warmup_is_exact(tmp_path, stop, headless_bert_dir, csn_train):
    fields = dict(objective="sda+mep", max_steps=2, checkpoint_every=2, keep_checkpoints=0,
                  **{"mep.lm_warmup_auto_steps": 4, "mep.lm_warmup_lr": 2e-2})
    whole = _recipe(tmp_path / "whole", headless_bert_dir, csn_train, **fields)
    cut = _recipe(tmp_path / "cut", headless_bert_dir, csn_train, **fields)
    reference = train(whole)

    def interrupt(step, logs):
        if step == stop:
            raise Interrupt
    with pytest.raises(Interrupt):
        train(cut, callback=interrupt)
    # the checkpoint holds the head now, so auto alone would skip the rest of the warm-up
    resumed = train(cut, resume=True)
    expected, got = _tensors(reference), _tensors(resumed)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected), \
        [k for k in expected if not torch.equal(expected[k], got[k])]

    def rows(run):
        return [{k: v for k, v in r.items() if k not in ("examples_per_s", "lm_warmup_seconds")} for r in _rows(run)]
    assert rows(Path(cut.output)) == rows(Path(whole.output))
    assert [r["phase"] for r in rows(Path(cut.output))] == ["lm-warmup"] * 4 + ["train"] * 2


def test_plugins_lists_the_warmup_options():
    for objective in ("mep", "span-mask", "mlm", "aspect-mlm"):
        result = CliRunner().invoke(cli, ["plugins", "--options", objective])
        assert result.exit_code == 0, result.output
        assert "lm_warmup  ('auto' | int, default 'auto')" in result.output
        assert "lm_warmup_auto_steps  (int, default 200)" in result.output
        assert "lm_warmup_lr  (float, default 0.001)" in result.output
    listing = CliRunner().invoke(cli, ["plugins", "--kind", "objective"])
    named = [line.split()[1] for line in listing.output.splitlines() if "LM-head warm-up" in line]
    assert sorted(named) == ["aspect-mlm", "mep", "mlm", "span-mask"]


@pytest.mark.parametrize("value", [-1, "soon", 2.5, True])
def test_a_bad_warmup_is_refused_naming_the_option(value):
    with pytest.raises(PluginError) as error:
        get_registry().create("objective", "mep", lm_warmup=value)
    assert "lm_warmup=" in str(error.value) and "Its options: extractor" in str(error.value)


def test_a_bad_warmup_on_the_command_line_is_refused(tmp_path, tiny_bert_dir, csn_train):
    result = CliRunner().invoke(cli, ["train", "--objective", "sda+mep", "--backbone", "hf-encoder",
                                      "--model", str(tiny_bert_dir), "--data", csn_train, "--out", str(tmp_path / "r"),
                                      "--set", "mep.lm_warmup=later"])
    assert result.exit_code != 0
    assert "lm_warmup='later'" in result.output and "lm_warmup_auto_steps" in result.output


def _warmup_step(recipe_values: dict, examples: list) -> dict:
    """One warm-up forward and backward as the trainer runs it (DDP when started by torchrun
    or mp.spawn): the head's gradients, and the names of parameters that got any other."""
    from structret.recipes import resolve_recipe
    from structret.training import Batches, TrainStep, build_objectives, create_backbone, make_accelerator
    from structret.training import warmup

    recipe = resolve_recipe(None, recipe_values)
    accelerator = make_accelerator(recipe)
    torch.manual_seed(recipe.seed)
    backbone = create_backbone(recipe)
    objectives = build_objectives(recipe)
    backbone.enable_lm()
    step = TrainStep(backbone, objectives).train()
    warm, _ = warmup.prepare(objectives, backbone, step, 0.0, None)
    module = accelerator.prepare(step)
    warm.begin(0, "test", loud=False)
    batch = Batches(examples, recipe, backbone, objectives).local(0, accelerator.process_index,
                                                                  accelerator.num_processes)
    torch.manual_seed(recipe.seed + 1)
    loss, logs = module(batch, mode="lm-warmup")
    accelerator.backward(loss)
    head = {id(p) for p in warm.head}
    named = [(n.removeprefix("module."), p) for n, p in module.named_parameters()]
    return {"head": {n: p.grad.clone() for n, p in named if id(p) in head},
            "others": sorted(n for n, p in named if id(p) not in head and p.grad is not None and p.grad.any()),
            "logs": {k: float(v) for k, v in logs.items()}}


def _warmup_process(rank: int, world: int, port: int, recipe_values: dict, examples: list, out: str) -> None:
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    result = _warmup_step(recipe_values, examples)
    if rank == 0:
        torch.save(result, out)


def test_two_processes_warm_up_as_one(tmp_path, headless_bert_dir, csn_train):
    """DDP: the warm-up loss is the global token mean (world-size scaling as in every step),
    and no process sends the frozen encoder a gradient."""
    import torch.multiprocessing as mp
    from test_training import _free_port

    from structret.training import load_examples

    values = _recipe(tmp_path, headless_bert_dir, csn_train, objective="sda+mep", batch_size=8,
                     **{"mep.lm_warmup": 1}).to_dict()
    config = json.loads((headless_bert_dir / "config.json").read_text())  # no dropout: 1 and 2 processes alike
    still = tmp_path / "still"
    shutil.copytree(headless_bert_dir, still)
    (still / "config.json").write_text(json.dumps({**config, "hidden_dropout_prob": 0.0,
                                                   "attention_probs_dropout_prob": 0.0}))
    values["model"] = str(still)
    examples, _ = load_examples(csn_train, "train")
    out = tmp_path / "two.pt"
    mp.spawn(_warmup_process, args=(2, _free_port(), values, examples, str(out)), nprocs=2, join=True)
    two, one = torch.load(out, weights_only=True), _warmup_step(values, examples)
    assert one["others"] == [] and two["others"] == []
    assert one["logs"].keys() == {"mep", "loss"} and two["logs"]["mep"] == pytest.approx(one["logs"]["mep"], rel=1e-5)
    assert one["head"].keys() == two["head"].keys() and one["head"]
    for name, grad in one["head"].items():
        torch.testing.assert_close(two["head"][name], grad, rtol=1e-4, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
