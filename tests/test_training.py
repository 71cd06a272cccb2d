"""The trainer: recipes, data order, the one-forward step, exact resume, two processes = one."""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from _tiny_models import _WORDS, build_tiny_bert, build_tiny_t5, tiny_bert_dir, one_torch_thread  # noqa: F401  (fixture)

from structret.recipes import Recipe, RecipeError, list_recipes, recipe_to_toml, resolve_recipe, write_recipe
from structret.records import Dataset, ItemRecord, ReadStats
from structret.training import (
    Batches,
    Example,
    TrainingError,
    TrainStep,
    build_objectives,
    create_backbone,
    examples_from_dataset,
    forward_backward,
    load_examples,
    make_accelerator,
    save_model,
    train,
)




def _function(rng: random.Random, i: int) -> dict:
    """A CodeSearchNet row: a small Python function and its tokenized docstring."""
    name, a, b = (rng.choice(_WORDS) for _ in range(3))
    doc = [rng.choice(_WORDS) for _ in range(rng.randint(3, 9))]
    body = rng.choice(["return {a} + {b}", "for x in {a}:\n        {b}.append(x)\n    return {b}",
                       "if {a} in {b}:\n        return {b}[{a}]"]).format(a=f"{a}_{i}", b=f"{b}_{i}")
    return {"repo": "tiny/repo", "path": f"m{i}.py", "func_name": f"{name}_{i}", "language": "python",
            "code": f"def {name}_{i}({a}_{i}, {b}_{i}):\n    {body}\n", "docstring_tokens": doc,
            "docstring": " ".join(doc), "partition": "train", "url": f"https://x/{i}"}


@pytest.fixture(scope="session")
def csn_train(tmp_path_factory) -> str:
    """40 functions written exactly as CodeSearchNet publishes them (jsonl.gz)."""
    path = tmp_path_factory.mktemp("csn") / "python_train_0.jsonl.gz"
    rng = random.Random(0)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(40):
            f.write(json.dumps(_function(rng, i)) + "\n")
    return f"codesearchnet:{path}"


@pytest.fixture(scope="session")
def tiny_t5_sentinels(tmp_path_factory) -> Path:
    """The tiny T5 with T5's 100 sentinel tokens, so sentinel MEP can run on it."""
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    root = tmp_path_factory.mktemp("tiny-t5-sentinels")
    plain = build_tiny_t5(root / "plain")
    tokenizer = AutoTokenizer.from_pretrained(plain)
    tokenizer.add_special_tokens({"additional_special_tokens": [f"<extra_id_{i}>" for i in range(100)]})
    torch.manual_seed(0)
    model = T5ForConditionalGeneration.from_pretrained(plain)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    return root / "model"


@pytest.fixture(scope="session")
def still_bert_dir(tmp_path_factory) -> Path:
    """The tiny BERT without dropout: runs with different process counts draw different noise."""
    directory = build_tiny_bert(tmp_path_factory.mktemp("still-bert"))
    config = json.loads((directory / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def _recipe(tmp_path: Path, model: Path, data: str, **fields) -> Recipe:
    values = {"backbone": "hf-encoder", "model": str(model), "data": data, "output": str(tmp_path / "run"), "batch_size": 4, "lr": 1e-3,
              "query_max_len": 16, "passage_max_len": 32, "label_max_len": 16, "log_every": 1, "seed": 7}
    return resolve_recipe(None, {**values, **fields})


# --- recipes ---------------------------------------------------------------------------------


def test_presets_carry_the_papers_settings():
    assert {"santa-code", "santa-code-span-mask", "santa-code-sda-only", "santa-code-mep-only", "santa-product"} <= set(list_recipes())
    code = resolve_recipe("santa-code")
    assert (code.objective, code.backbone, code.lr, code.batch_size, code.epochs, code.warmup) == ("sda+mep", "codet5-base", 5e-5, 128, 6, 0.1)
    assert (code.query_max_len, code.passage_max_len, code.label_max_len) == (50, 240, 35)
    assert code.plugins["sda"]["similarity"] == "dot" and code.plugins["mep"]["extractor"] == "auto"
    product = resolve_recipe("santa-product")
    assert (product.backbone, product.lr, product.batch_size, product.epochs) == ("t5-base", 1e-4, 16, 6)
    assert resolve_recipe("santa-code-span-mask").objective == "sda+span-mask"
    assert resolve_recipe("santa-code-mep-only").objective == "mep"


def test_overrides_and_their_errors(tmp_path):
    recipe = resolve_recipe("santa-code", {"lr": "1e-4", "batch-size": "8", "model": None, "split": ""})
    assert (recipe.lr, recipe.batch_size, recipe.backbone, recipe.model, recipe.split) == (1e-4, 8, "codet5-base", None, None)
    with pytest.raises(RecipeError) as err:
        resolve_recipe("santa-code", {"lrr": 1e-4})
    assert "unknown recipe field 'lrr'. Did you mean 'lr'?" in str(err.value) and "passage_max_len" in str(err.value)
    with pytest.raises(RecipeError, match="Did you mean 'santa-code'"):
        resolve_recipe("santa-cod")
    with pytest.raises(RecipeError, match="lr='fast': Input should be a valid number"):
        resolve_recipe(None, {"lr": "fast"})
    with pytest.raises(RecipeError, match="similarity='l2': Input should be 'dot' or 'cos'"):
        resolve_recipe(None, {"similarity": "l2"})
    bad = tmp_path / "bad.toml"
    bad.write_text('objective = "sda"\nbatchsize = 8\n')
    with pytest.raises(RecipeError, match=r"bad.toml: unknown recipe field 'batchsize'. Did you mean 'batch_size'"):
        resolve_recipe(str(bad))


def test_written_recipe_reads_back_the_same(tmp_path):
    recipe = resolve_recipe("santa-product", {"data": 'esci:/data/"quoted" é', "split": "", "output": str(tmp_path)})
    write_recipe(recipe, tmp_path / "recipe.toml")
    assert resolve_recipe(str(tmp_path / "recipe.toml")) == recipe
    assert 'split = ""' in recipe_to_toml(recipe)  # None survives as ""


# --- data ------------------------------------------------------------------------------------


def test_tevatron_lines_are_read_with_skip_and_count(tmp_path):
    lines = [
        {"query_id": "1", "query": "sort a list", "positive_passages": [{"docid": "a", "title": "Sort", "text": "sorted(x)"}],
         "negative_passages": [{"docid": "b", "title": "", "text": "open(f)"}, {"docid": "c"}]},
        "not json at all",
        {"query_id": "2", "query": "", "positive_passages": [{"docid": "a", "text": "x"}]},
        {"query_id": "3", "query": "no positives", "positive_passages": []},
        {"query_id": "4", "query": "read a file", "positive_passages": [{"docid": "d", "text": "open(f).read()"}]},
    ]
    path = tmp_path / "train.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    examples, stats = load_examples(f"tevatron:{path}")
    assert (stats.read, stats.used) == (5, 2)
    assert dict(stats.skipped) == {"not JSON": 1, "missing or empty 'query'": 1, "no positive passage with text": 1}
    assert "train.jsonl.gz:2" in stats.examples[0]
    first = examples[0]
    assert (first.queries, first.positives, first.negatives) == (["sort a list"], ["Sort sorted(x)"], ["open(f)"])
    assert (examples[1].queries, examples[1].positives, examples[1].negatives) == (["read a file"], ["open(f).read()"], [])


def test_tevatron_lines_are_a_dataset_with_qrels_and_hard_negatives(tmp_path):
    from structret.datasets import load_dataset

    lines = [
        {"query_id": "q", "query": " sort ", "positive_passages": [{"text": "a"}, {"text": "a"}],
         "negative_passages": [{"title": "T", "text": "n1"}, {"text": "n2"}]},
        {"query_id": "q", "query": "again", "positive_passages": [{"text": "b"}]},  # a repeated query id
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ds = load_dataset(f"tevatron:{path}")
    assert list(ds.queries) == ["q", "q (line 2)"] and ds.queries["q"].text == "sort"
    assert ds.qrels["q"] == {"q/pos/0": 1, "q/pos/1": 1}  # the same text twice stays twice
    assert [ds.corpus[d].text() for d in ds.negatives["q"]] == ["T n1", "n2"]
    assert "q (line 2)" not in ds.negatives


def test_examples_from_code_pairs_and_product_bullets(csn_train):
    examples, stats = load_examples(csn_train, "train")
    assert len(examples) == 40 and stats.used == 40
    assert examples[0].positives[0].startswith("def ") and examples[0].record.language == "python"
    items = {"p": ItemRecord(id="p", title="Mug", content="A blue mug", bullets=["holds tea", "blue"]),
             "q": ItemRecord(id="q", title="Cup", content="A cup")}
    dataset = Dataset(name="items", corpus=items, queries={}, qrels={}, stats=ReadStats())
    (example,) = examples_from_dataset(dataset)
    assert example.queries == ["holds tea", "blue"] and example.positives == ["Mug A blue mug"]  # record.text(), as retrieval encodes it
    assert dataset.stats.skipped["item without bullet points (no aligned text to train on)"] == 1


def test_batches_follow_the_seed_and_split_evenly_over_processes(tmp_path, tiny_bert_dir, csn_train):
    recipe = _recipe(tmp_path, tiny_bert_dir, csn_train, batch_size=8)
    backbone = create_backbone(recipe)
    examples, _ = load_examples(csn_train, "train")
    batches = Batches(examples, recipe, backbone, build_objectives(recipe))
    assert batches.steps_per_epoch == 5 and batches.total_steps == 5
    epoch0 = sum((batches.picks(s)[1] for s in range(5)), [])
    assert sorted(epoch0) == list(range(40)) and batches.picks(5)[0] == 1 and batches.picks(5)[1] != epoch0[:8]
    assert Batches(examples, recipe, backbone, build_objectives(recipe)).picks(3) == batches.picks(3)

    def rows(batch):
        return [ids[mask.bool()].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]

    whole = batches.local(2)
    halves = [batches.local(2, rank, 2) for rank in (0, 1)]
    for side in ("query", "passage"):
        assert rows(whole[side]) == rows(halves[0][side]) + rows(halves[1][side])


# --- the step ----------------------------------------------------------------------------------


def test_sda_steps_lower_the_loss(tmp_path, still_bert_dir, csn_train):
    from structret_backbones.hf import HFEncoder

    recipe = _recipe(tmp_path, still_bert_dir, csn_train, batch_size=8)
    # mean pooling: a random tiny BERT gives every text nearly the same [CLS] vector, so
    # the scores start uniform and the first steps barely move them
    backbone = HFEncoder(still_bert_dir, pooling="mean")
    objectives = build_objectives(recipe)
    step = TrainStep(backbone, objectives).train()
    optimizer = torch.optim.AdamW(step.parameters(), lr=1e-3)
    batch = Batches(load_examples(csn_train, "train")[0], recipe, backbone, objectives).local(0)
    losses = []
    for _ in range(6):
        loss, logs = step(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(logs["sda"].item())
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses
    assert losses[-1] < losses[0] - 0.3, losses


@pytest.mark.parametrize("which", ["t5", "bert"])
def test_sda_mep_encodes_each_passage_once(tmp_path, which, tiny_t5_sentinels, tiny_bert_dir, csn_train):
    model = tiny_t5_sentinels if which == "t5" else tiny_bert_dir
    recipe = _recipe(tmp_path, model, csn_train, objective="sda+mep", backbone="t5" if which == "t5" else "hf-encoder")
    backbone = create_backbone(recipe)
    objectives = build_objectives(recipe)
    backbone.enable_lm()
    batch = Batches(load_examples(csn_train, "train")[0], recipe, backbone, objectives).local(0)
    encoder = backbone.model.encoder if which == "t5" else backbone.model
    seen = []
    encoder.register_forward_hook(lambda module, args, kwargs, out: seen.append(kwargs.get("input_ids", args[0] if args else None)),
                                  with_kwargs=True)
    calls = []
    original = backbone.train_forward
    backbone.train_forward = lambda *a, **k: calls.append(1) or original(*a, **k)

    loss, logs = TrainStep(backbone, objectives)(batch)
    loss.backward()
    assert len(calls) == 1
    assert len(seen) == 2  # the queries once, the masked passages once
    assert sum(torch.equal(ids, batch["passage"]["input_ids"]) for ids in seen) == 1
    assert sum(torch.equal(ids, batch["query"]["input_ids"]) for ids in seen) == 1
    assert set(logs) == {"sda", "mep", "loss"} and logs["mep"] > 0
    torch.testing.assert_close(logs["loss"], logs["sda"] + logs["mep"])


# --- saving and resuming -------------------------------------------------------------------------


def test_saved_model_loads_and_encodes_like_the_trained_one(tmp_path, tiny_bert_dir, tiny_t5_sentinels, csn_train):
    from structret_backbones.hf import HFEncoder
    from structret_backbones.t5 import T5Encoder

    texts = ["def add(a, b): return a + b", "sort the list", "x"]
    for model, backbone_name, load in ((tiny_bert_dir, "hf-encoder", HFEncoder), (tiny_t5_sentinels, "t5", T5Encoder)):
        recipe = _recipe(tmp_path, model, csn_train, objective="sda+mep", backbone=backbone_name)
        backbone = create_backbone(recipe)
        objectives = build_objectives(recipe)
        backbone.enable_lm()
        step = TrainStep(backbone, objectives).train()
        optimizer = torch.optim.AdamW(step.parameters(), lr=1e-2)
        for s in range(2):
            step(Batches(load_examples(csn_train, "train")[0], recipe, backbone, objectives).local(s))[0].backward()
            optimizer.step()
            optimizer.zero_grad()
        save_model(tmp_path / backbone_name, backbone, {"kind": "model", "backbone": backbone_name})
        reloaded = load(tmp_path / backbone_name)
        trained = backbone.encode(texts)
        assert not np.allclose(trained, load(model).encode(texts), atol=1e-3)  # it did train
        np.testing.assert_allclose(reloaded.encode(texts), trained, atol=1e-6)
        assert json.loads((tmp_path / backbone_name / "structret.json").read_text())["backbone"] == backbone_name
    st = pytest.importorskip("sentence_transformers")
    # cls pooling, as the hf-encoder default the tiny BERT was trained with
    theirs = st.SentenceTransformer(str(tmp_path / "hf-encoder"), device="cpu").encode(texts)
    np.testing.assert_allclose(theirs, HFEncoder(tmp_path / "hf-encoder").encode(texts), atol=1e-5)


class Interrupt(Exception):
    pass


def _tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    if (model_dir / "lm_head.safetensors").is_file():
        tensors.update({f"head.{k}": v for k, v in load_file(str(model_dir / "lm_head.safetensors")).items()})
    return tensors


@pytest.mark.parametrize("which", ["bert", "bert, length chunks", "t5", "t5, grad cache"])
def test_resumed_run_ends_with_exactly_the_same_weights(tmp_path, which, tiny_bert_dir, tiny_t5_sentinels, csn_train):
    bert = which.startswith("bert")
    model = tiny_bert_dir if bert else tiny_t5_sentinels  # dropout on: RNG state must be restored
    fields = dict(objective="sda+mep", max_steps=6, checkpoint_every=2, keep_checkpoints=0,
                  backbone="hf-encoder" if bert else "t5",
                  grad_cache_chunk=3 if "cache" in which else 0)  # a cached run resumes exactly too
    if "chunks" in which:  # batches of 4 passages of up to 32 tokens: 2 or more chunks a step
        fields["hf-encoder.train_chunk_tokens"] = 48
    whole = _recipe(tmp_path / "whole", model, csn_train, **fields)
    cut = _recipe(tmp_path / "cut", model, csn_train, **fields)
    reference = train(whole)

    def stop_after_4(step, logs):
        if step == 4:
            raise Interrupt
    with pytest.raises(Interrupt):
        train(cut, callback=stop_after_4)
    run = Path(cut.output)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-000002", "checkpoint-000004"]
    with pytest.raises(TrainingError, match="pass --resume"):
        train(cut)
    with pytest.raises(TrainingError, match=r"different recipe: lr \(saved 0.001, given 0.002\)"):
        train(resolve_recipe(None, {**cut.to_dict(), "lr": 2e-3}), resume=True)
    resumed = train(cut, resume=True)

    expected, got = _tensors(reference), _tensors(resumed)
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected), [k for k in expected if not torch.equal(expected[k], got[k])]
    at_2 = _tensors(run / "checkpoint-000002")
    assert any(not torch.equal(expected[k], at_2[k]) for k in expected)  # steps 3-6 did change the weights

    def rows(path):
        return [{k: v for k, v in json.loads(line).items() if k != "examples_per_s"} for line in path.read_text().splitlines()]
    assert rows(run / "metrics.jsonl") == rows(Path(whole.output) / "metrics.jsonl")
    assert [r["step"] for r in rows(run / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(TrainingError, match="has finished"):
        train(cut, resume=True)


# --- two processes, gradient caching --------------------------------------------------------------


@contextlib.contextmanager
def _encoding_in_chunks(backbone, size: int):
    """The uncached step with each side encoded ``size`` rows at a time, all in one graph: the
    dropout masks gradient caching draws, and the exact gradients of the whole batch."""
    embed, train_forward = backbone.embed, backbone.train_forward

    def rows(batch, i):
        return {k: v[i:i + size] for k, v in batch.items()}

    def chunked_embed(batch, kind="document"):
        return torch.cat([embed(rows(batch, i), kind=kind) for i in range(0, len(batch["input_ids"]), size)])

    def chunked_train_forward(batch, labels=None):
        vectors, weighted, count = [], 0.0, 0
        for i in range(0, len(batch["input_ids"]), size):
            part = None if labels is None else labels[i:i + size]
            v, loss = train_forward(rows(batch, i), part)
            vectors.append(v)
            if part is not None and (part != -100).sum() > 0:  # the token mean over the whole batch
                weighted, count = weighted + loss * (part != -100).sum(), count + (part != -100).sum()
        return torch.cat(vectors), (None if labels is None else weighted / count)

    backbone.embed, backbone.train_forward = chunked_embed, chunked_train_forward
    try:
        yield
    finally:
        del backbone.embed, backbone.train_forward  # the instance attributes shadowed the methods


class _FSDP2Accelerator:
    """What accelerate does with a model under FSDP2 (``fsdp_version: 2``). accelerate itself
    runs FSDP on accelerators only: with ``cpu=True`` it quietly falls back to DDP."""

    device = torch.device("cpu")

    def __init__(self):
        self.process_index, self.num_processes = torch.distributed.get_rank(), torch.distributed.get_world_size()

    def unwrap_model(self, module):
        return module  # fully_shard changes the module in place

    @contextlib.contextmanager
    def no_sync(self, module):
        module.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            module.set_requires_gradient_sync(True)

    def backward(self, loss):
        loss.backward()


def _fsdp2(step: TrainStep, backbone):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (torch.distributed.get_world_size(),))
    for layer in backbone.model.encoder.layer:  # BertLayer: the transformer-based wrap policy's unit
        fully_shard(layer, mesh=mesh)
    fully_shard(step, mesh=mesh)  # the root: embeddings, pooler and the MLM head
    return step, _FSDP2Accelerator()


def _one_step(recipe: Recipe, examples: list[Example], chunk: int = 0, reference: int = 0, fsdp: bool = False) -> dict:
    """One forward and backward as the trainer does it (cached in chunks of ``chunk``, or
    uncached with ``reference``-row encodings); gradients as DDP (or FSDP2) leaves them."""
    accelerator = make_accelerator(recipe)
    torch.manual_seed(recipe.seed)
    backbone = create_backbone(recipe)
    objectives = build_objectives(recipe)
    backbone.enable_lm()
    batches = Batches(examples, recipe, backbone, objectives)
    step = TrainStep(backbone, objectives).train()
    module, accelerator = _fsdp2(step, backbone) if fsdp else (accelerator.prepare(step), accelerator)
    batch = batches.local(0, accelerator.process_index, accelerator.num_processes)
    torch.manual_seed(recipe.seed + 1)  # dropout starts from here in every variant
    with _encoding_in_chunks(backbone, reference) if reference else contextlib.nullcontext():
        logs = forward_backward(module, batch, accelerator, chunk)
    grads = {n.removeprefix("module."): p.grad for n, p in module.named_parameters() if p.grad is not None}
    grads = {n: g.full_tensor() if fsdp else g.clone() for n, g in grads.items()}  # FSDP: this process's shard
    return {"grads": grads, "logs": {k: float(v) for k, v in logs.items()}}


def _assert_same(got: dict, expected: dict, what: str) -> None:
    assert got["logs"].keys() == expected["logs"].keys(), what
    for key, value in expected["logs"].items():
        assert got["logs"][key] == pytest.approx(value, rel=1e-5), f"{what}: {key}"
    assert got["grads"].keys() == expected["grads"].keys() and len(expected["grads"]) > 20, what
    for name, grad in expected["grads"].items():
        # float32 sums run in another order on halves or chunks; a real error (a missing
        # world-size factor, local-only negatives, other dropout masks) is off by tens of percent
        assert (got["grads"][name] - grad).norm() <= 1e-5 * grad.norm() + 1e-8, f"{what}: {name}"
        torch.testing.assert_close(got["grads"][name], grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, n=name: f"{what}: {n}: {m}")


def _process(rank: int, world: int, port: int, runs: dict, examples: list[Example], out: str) -> None:
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    results = {name: _one_step(resolve_recipe(None, recipe), examples, **how) for name, (recipe, how) in runs.items()}
    if rank == 0:
        torch.save(results, out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sda_mep(tmp_path: Path, model: Path, data: str) -> Recipe:
    # sda+mep: global negatives, and an LM mean over tokens the two halves (and the chunks)
    # hold unequally. minilm's factory on the tiny weights = mean pooling, so the contrastive
    # gradient is not drowned by MEP's ([CLS] of a random tiny BERT scores every pair alike)
    return _recipe(tmp_path, model, data, objective="sda+mep", batch_size=8, backbone="minilm",
                   similarity="cos", temperature=0.05)


def test_two_processes_give_the_loss_and_gradients_of_one(tmp_path, still_bert_dir, tiny_bert_dir, csn_train):
    """DDP through accelerate, and FSDP2 (parameters and gradients sharded), on gloo; with
    and without gradient caching, whose 2-process gathering of global negatives is the point."""
    import torch.multiprocessing as mp

    still = _sda_mep(tmp_path, still_bert_dir, csn_train)  # no dropout: 1 and 2 processes draw different noise
    dropout = _sda_mep(tmp_path, tiny_bert_dir, csn_train)
    examples, _ = load_examples(csn_train, "train")
    runs = {  # 4 examples per process; chunks of 3 rows split the queries, passages and MEP tokens unevenly
        "uncached": (still.to_dict(), {}),
        "cached": (still.to_dict(), {"chunk": 3}),
        "dropout, cached": (dropout.to_dict(), {"chunk": 3}),
        "dropout, uncached": (dropout.to_dict(), {"reference": 3}),
        "FSDP2": (still.to_dict(), {"fsdp": True}),
        "FSDP2, cached": (still.to_dict(), {"fsdp": True, "chunk": 3}),
    }
    out = tmp_path / "two.pt"
    mp.spawn(_process, args=(2, _free_port(), runs, examples, str(out)), nprocs=2, join=True)
    two = torch.load(out, weights_only=True)
    one = _one_step(still, examples)

    assert one["logs"].keys() == {"sda", "mep", "loss"}
    _assert_same(two["uncached"], one, "2 processes")
    _assert_same(two["cached"], one, "2 processes, gradient caching")
    _assert_same(two["dropout, cached"], two["dropout, uncached"], "2 processes with dropout, gradient caching")
    _assert_same(two["FSDP2"], one, "2 processes, FSDP2")
    _assert_same(two["FSDP2, cached"], one, "2 processes, FSDP2, gradient caching")


@pytest.mark.parametrize("which", ["bert", "t5"])
def test_grad_cache_gives_the_gradients_of_the_whole_batch(tmp_path, which, tiny_bert_dir, tiny_t5_sentinels, csn_train,
                                                           monkeypatch):
    from structret.training import gradcache

    recipe = _sda_mep(tmp_path, tiny_bert_dir, csn_train)  # dropout 0.1 in the tiny BERT and T5
    if which == "t5":  # MEP on T5: sentinels in, spans out through the decoder
        recipe = resolve_recipe(None, {**recipe.to_dict(), "backbone": "t5", "model": str(tiny_t5_sentinels)})
    examples, _ = load_examples(csn_train, "train")
    uncached = _one_step(recipe, examples)
    # one chunk holds everything: the same forwards in the same order, the same masks
    _assert_same(_one_step(recipe, examples, chunk=8), uncached, "one chunk")
    # chunks of 3 draw other masks than one forward of 8: compared with the uncached step
    # encoding 3 at a time in one graph
    cached = _one_step(recipe, examples, chunk=3)
    _assert_same(cached, _one_step(recipe, examples, reference=3), "chunks of 3")

    # and the RNG handling is what makes it so: a replay with fresh dropout masks is off
    monkeypatch.setattr(gradcache.RandState, "replay", lambda self: contextlib.nullcontext())
    careless = _one_step(recipe, examples, chunk=3)
    off = max(float((careless["grads"][n] - g).norm() / g.norm()) for n, g in cached["grads"].items() if g.norm() > 0)
    assert off > 1e-2, off


def test_train_command_takes_grad_cache_chunk(tmp_path, tiny_bert_dir, csn_train):
    from click.testing import CliRunner

    from structret.cli import cli

    def run(*args):
        return CliRunner().invoke(cli, ["train", "--backbone", "hf-encoder", "--model", str(tiny_bert_dir), "--data",
                                        csn_train, "--set", "max_steps=1", "--set", "batch_size=4", "--set",
                                        "query_max_len=16", "--set", "passage_max_len=32", *args])

    done = run("--objective", "sda", "--grad-cache-chunk", "3", "--out", str(tmp_path / "run"))
    assert done.exit_code == 0, done.output
    assert resolve_recipe(str(tmp_path / "run" / "recipe.toml")).grad_cache_chunk == 3
    refused = run("--objective", "mep", "--grad-cache-chunk", "3", "--out", str(tmp_path / "mep"))
    assert refused.exit_code != 0 and "has no contrastive objective" in refused.output, refused.output


def test_grad_cache_needs_a_contrastive_objective(tmp_path, tiny_bert_dir, csn_train):
    from structret.training.gradcache import GradCacheError

    with pytest.raises(GradCacheError, match=r"'mep' has no contrastive objective.*grad_cache_chunk = 0"):
        train(_recipe(tmp_path, tiny_bert_dir, csn_train, objective="mep", grad_cache_chunk=2))
    with pytest.raises(RecipeError, match="grad_cache_chunk=-1: Input should be greater than or equal to 0"):
        _recipe(tmp_path, tiny_bert_dir, csn_train, grad_cache_chunk=-1)


# --- other runs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [0, 5])  # 5: chunks cut through the groups of a query's passages
def test_dr_with_hard_negatives_on_tevatron_lines(tmp_path, tiny_bert_dir, chunk):
    rng = random.Random(1)
    path = tmp_path / "train.jsonl"
    with path.open("w") as f:
        for i in range(8):
            words = [rng.choice(_WORDS) for _ in range(6)]
            f.write(json.dumps({"query_id": str(i), "query": " ".join(words[:3]),
                                "positive_passages": [{"docid": f"p{i}", "title": "", "text": " ".join(words)}],
                                "negative_passages": [{"docid": f"n{i}{j}", "text": rng.choice(_WORDS)} for j in range(3)]}) + "\n")
    recipe = _recipe(tmp_path, tiny_bert_dir, f"tevatron:{path}", objective="dr", negatives=2, max_steps=2,
                     grad_cache_chunk=chunk)
    final = train(recipe)
    rows = [json.loads(line) for line in (Path(recipe.output) / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["loss/dr"] > 0 for r in rows)
    assert (final / "model.safetensors").is_file() and json.loads((final / "structret.json").read_text())["step"] == 2


def test_runs_that_cannot_start_say_why(tmp_path, tiny_bert_dir, csn_train):
    with pytest.raises(TrainingError, match="no training data"):
        train(_recipe(tmp_path, tiny_bert_dir, ""))
    with pytest.raises(TrainingError, match="fewer than one batch of 64"):
        train(_recipe(tmp_path, tiny_bert_dir, csn_train, batch_size=64))
    with pytest.raises(TrainingError, match="has no hard negatives"):
        train(_recipe(tmp_path, tiny_bert_dir, csn_train, negatives=1))


def test_a_run_directory_is_a_system_and_a_model(tmp_path, tiny_bert_dir, fresh_registry):
    import shutil

    from structret.models import trained_model
    from structret.search.system import DenseRetriever, make_retriever

    from structret.artifacts import write_checksums

    final = tmp_path / "run" / "final"
    shutil.copytree(tiny_bert_dir, final)
    (final / "structret.json").write_text('{"backbone": "hf-encoder"}')
    write_checksums(final)  # as 'structret train' seals final/; without it the model is refused
    assert trained_model(str(tmp_path / "run")) == ("hf-encoder", str(final), {}, {})
    assert trained_model(str(final)) == ("hf-encoder", str(final), {}, {})
    assert trained_model(str(tmp_path)) is None
    retriever = make_retriever(str(tmp_path / "run"), show_progress=False)
    assert isinstance(retriever, DenseRetriever) and retriever.backbone.name == str(final)
    # and a run directory is where a new run (fine-tuning after pretraining) starts from
    from structret.recipes import resolve_recipe
    from structret.training import create_backbone

    assert create_backbone(resolve_recipe(None, dict(backbone="hf-encoder", model=str(tmp_path / "run")))).name == str(final)


def test_a_damaged_checkpoint_stops_resume_with_what_to_do(tmp_path, tiny_bert_dir, csn_train):
    recipe = _recipe(tmp_path / "run", tiny_bert_dir, csn_train, objective="sda", max_steps=4, checkpoint_every=2)

    def stop_after_2(step, logs):
        if step == 2:
            raise Interrupt
    with pytest.raises(Interrupt):
        train(recipe, callback=stop_after_2)
    weights = Path(recipe.output) / "checkpoint-000002" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(TrainingError, match=r"model.safetensors has 100 bytes .* Delete .*checkpoint-000002"):
        train(recipe, resume=True)


def test_mep_contrastive_input_unmasked_embeds_the_clean_passage(tmp_path, tiny_bert_dir, csn_train):
    """contrastive_input = unmasked (issue 16's variant): the LM loss reads the corrupted passage,
    sda a second forward of the clean one; GradCache keeps the gradients of the whole batch."""
    recipe = _recipe(tmp_path, tiny_bert_dir, csn_train, objective="sda+mep", batch_size=8, backbone="minilm",
                     similarity="cos", temperature=0.05, **{"mep.contrastive_input": "unmasked"})
    examples, _ = load_examples(csn_train, "train")
    backbone = create_backbone(recipe)
    backbone.enable_lm()
    batch = Batches(examples, recipe, backbone, build_objectives(recipe)).local(0)
    mask = backbone.tokenizer.mask_token_id
    assert (batch["corrupted"]["input_ids"] == mask).any() and not (batch["passage"]["input_ids"] == mask).any()
    assert batch["labels"].shape[0] == batch["passage"]["input_ids"].shape[0] == 8
    masked = _one_step(resolve_recipe(None, {**recipe.to_dict(), "mep.contrastive_input": "masked"}), examples)
    unmasked = _one_step(recipe, examples)
    assert unmasked["logs"]["sda"] != pytest.approx(masked["logs"]["sda"])  # another input to the contrastive loss
    _assert_same(_one_step(recipe, examples, chunk=8), unmasked, "one chunk, unmasked")
