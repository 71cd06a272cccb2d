"""The informed-transformer backbone and the parent-attention objective (Khan & Jang)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

# the lead adds the entry point; until then the package is imported from the source tree
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from _tiny_models import one_torch_thread, tiny_bert_dir  # noqa: E402,F401  (autouse: one torch thread here)

from structret.recipes import ObjectiveError  # noqa: E402
from structret.registry import PluginEntry, Registry  # noqa: E402
from structret_structure import plugin  # noqa: E402
from structret.parents import NO_PARENT, gold_attention, spread_parents  # noqa: E402
from structret_structure.model import InformedTransformer  # noqa: E402
from structret_structure.objective import ParentAttention  # noqa: E402

CODE = [
    "def add(a, b):\n    return a + b",
    "def read_input_file(path):\n    return open(path).read()",
    "def largest(values):\n    best = values[0]\n    for v in values:\n        if v > best:\n            best = v\n    return best",
    "def greet(name):\n    print('hello', name)",
    "def is_even(n):\n    return n % 2 == 0",
    "def area(width, height):\n    return width * height",
]
QUERIES = ["add two numbers", "read a file", "largest value in a list", "say hello", "is a number even", "area of a box"]
TINY = dict(vocab_size=400, dim=32, heads=4, layers=2, ffn_mult=2, max_length=128, dropout=0.0)


def tiny(**options) -> InformedTransformer:
    return InformedTransformer(texts=CODE + QUERIES, **{**TINY, **options})


def parent_mass(backbone: InformedTransformer, head: int = 0) -> float:
    """Mean attention mass that ``head`` of layer 0 puts on the gold parent, over tokens with one."""
    batch = backbone.tokenizer.batch(CODE)
    with torch.no_grad():
        backbone.model.eval()
        x = backbone.model.norm(backbone.model.tokens(batch["input_ids"])
                                + backbone.model.positions(torch.arange(batch["input_ids"].shape[1])))
        attention = backbone.model.layers[0].attention
        b, n, d = x.shape
        q, k, _ = attention.qkv(x).view(b, n, 3, attention.heads, d // attention.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d // attention.heads) ** 0.5
        scores = scores.masked_fill(~batch["attention_mask"][:, None, None, :].bool(), torch.finfo(scores.dtype).min)
        probs = scores.softmax(-1)[:, head]
    parents = batch["parents"]
    picked = parents >= 0
    return float(probs.gather(-1, parents.clamp(min=0).unsqueeze(-1)).squeeze(-1)[picked].mean())


def test_spread_parents_hand_example():
    # words: Module, FunctionDef, read_input (2 sub-tokens), arguments (3 sub-tokens)
    word_ids = [0, 1, 2, 2, 3, 3, 3]
    parents = [-1, 0, 1, 1]
    assert spread_parents(word_ids, parents) == [NO_PARENT, 0, 1, 1, 1, 1, 1]
    # a parent with several sub-tokens is pointed at by its first one
    assert spread_parents([0, 0, 0, 1, 1], [-1, 0]) == [NO_PARENT] * 3 + [0, 0]
    # a parent cut off by truncation (word 1 has no sub-token left) gives no parent
    assert spread_parents([0, 2], [-1, 0, 1]) == [NO_PARENT, NO_PARENT]


def test_subtokens_inherit_parent_first_subtoken():
    backbone = tiny()
    tokenizer = backbone.tokenizer
    sequence = tokenizer.linearizer.linearize(CODE[1], language="python")
    encoding = tokenizer.bpe.encode(sequence.tokens, is_pretokenized=True, add_special_tokens=False)
    assert len(encoding.ids) > len(sequence.tokens)  # some tokens really are split
    parents = tokenizer.batch([CODE[1]])["parents"][0].tolist()
    words = encoding.word_ids
    first = {w: words.index(w) for w in set(words)}
    for position, word in enumerate(words):
        parent_word = sequence.parents[word]
        assert parents[position] == (first[parent_word] if parent_word >= 0 else NO_PARENT)
    # the trainer's route (backbone.tokenize) gives the same rows; queries carry no parents
    documents = backbone.tokenize([CODE[1]], kind="document", max_length=128)
    assert documents["parents"][0, : len(parents)].tolist() == parents
    assert (backbone.tokenize([QUERIES[0]], kind="query", max_length=128)["parents"] == NO_PARENT).all()
    # max_length cuts, and a parent cut off with it is no target
    short = backbone.tokenize([CODE[1]], kind="document", max_length=5)["parents"]
    assert short.shape[1] == 5 and (short < 5).all()


def test_encode_shape_dtype_and_queries():
    backbone = tiny()
    assert {"encoder", "structure-attention"} <= backbone.capabilities
    documents = backbone.encode(CODE, batch_size=4)
    queries = backbone.encode(QUERIES, kind="query")
    assert documents.shape == (len(CODE), backbone.dim) and documents.dtype == np.float32
    assert queries.shape == (len(QUERIES), backbone.dim) and queries.dtype == np.float32
    assert np.isfinite(documents).all() and np.isfinite(queries).all()
    # one text alone or in a padded batch: the same vector
    np.testing.assert_allclose(backbone.encode(CODE[:1]), documents[:1], atol=1e-5)
    # code that does not parse is read as plain text, and counted
    assert backbone.encode(["def broken(:"]).shape == (1, backbone.dim)
    assert backbone.tokenizer.counts["code passages read as plain text (did not parse)"] == 1


def test_strict_attention_is_the_gold_tree():
    backbone = tiny(strict=True)
    batch = backbone.tokenizer.batch(CODE + QUERIES[:1])
    batch["parents"][-1, :] = NO_PARENT  # the query row: no parents, attends to itself
    backbone.embed(batch)
    informed = backbone.last_attention
    assert len(informed) == 1
    parents = batch["parents"]
    expected = gold_attention(parents)
    assert torch.equal(informed[0], expected)
    own = torch.arange(parents.shape[1])
    for row in range(parents.shape[0]):
        for q in range(parents.shape[1]):
            target = parents[row, q].item() if parents[row, q] >= 0 else q
            assert informed[0][row, q, target].item() == 1.0
    assert (expected.sum(-1) == 1).all() and torch.equal(expected[-1], torch.eye(len(own)))
    # and nothing to learn for the objective
    with pytest.raises(ObjectiveError, match="strict"):
        ParentAttention().check(backbone)


def test_parent_attention_supervises_head_zero_only():
    torch.manual_seed(0)
    backbone = tiny()
    objective = ParentAttention()
    objective.check(backbone)
    before, other_before = parent_mass(backbone, 0), parent_mass(backbone, 1)
    assert before < 0.2

    batch = backbone.tokenize(CODE, kind="document", max_length=128)

    def loss_of():
        backbone.embed(batch)
        loss, rows = objective.loss(backbone, batch)
        assert rows == (batch["parents"] >= 0).sum()
        return loss

    # the loss reaches only head 0's query/key projections in the informed layer
    loss_of().backward()
    attention = backbone.model.layers[0].attention
    width = backbone.dim // attention.heads
    grad = attention.qkv.weight.grad
    q_rows, k_rows = grad[: backbone.dim], grad[backbone.dim: 2 * backbone.dim]
    assert q_rows[:width].abs().sum() > 0 and k_rows[:width].abs().sum() > 0
    assert q_rows[width:].abs().sum() == 0 and k_rows[width:].abs().sum() == 0
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in backbone.model.layers[1].parameters())

    optimizer = torch.optim.Adam(backbone.model.parameters(), lr=3e-3)
    backbone.model.train()
    for _ in range(300):
        optimizer.zero_grad()
        loss_of().backward()
        optimizer.step()
    after = parent_mass(backbone, 0)
    assert after > 0.8, (before, after)
    # head 1 had no such loss: it is free to look anywhere, and does not learn the tree
    assert parent_mass(backbone, 1) < 0.5, other_before


def test_trains_inside_trainstep_as_an_auxiliary_loss():
    from structret.parents import parent_attention_loss
    from structret.training import TrainStep
    from structret_objectives.contrastive import dr

    backbone = tiny(dropout=0.0)
    objective = ParentAttention()
    step = TrainStep(backbone, [(dr(), 1.0), (objective, 0.5)])
    batch = {"query": backbone.tokenize(QUERIES, kind="query", max_length=32),
             "passage": backbone.tokenize(CODE, kind="document", max_length=128)}
    total, logs = step(batch)
    assert set(logs) == {"dr", "parent-attention", "loss"}
    assert torch.isclose(logs["loss"], logs["dr"] + 0.5 * logs["parent-attention"])
    # the auxiliary loss is the one of the passage forward the contrastive loss used
    backbone.embed(batch["passage"])
    alone, _ = parent_attention_loss(backbone.last_attention, batch["passage"]["parents"])
    assert torch.isclose(logs["parent-attention"], alone)
    total.backward()
    assert backbone.model.tokens.weight.grad is not None


def test_objective_refuses_backbone_without_informed_head():
    class Plain:
        name = "plain"
        capabilities = frozenset({"encoder"})

    with pytest.raises(ObjectiveError, match="structure-attention"):
        ParentAttention().check(Plain())


def test_save_load_round_trip_through_registry(tmp_path):
    registry = Registry()

    def register(kind):
        def add(name, target, *, aliases=(), help="", options=None):
            registry.add(PluginEntry(kind, name, target, tuple(aliases), help, "structure", "structret", options))
        return add

    plugin.register_backbones(register("backbone"))
    plugin.register_objectives(register("objective"))
    assert registry.create("objective", "parent-attention").name == "parent-attention"

    backbone = tiny(informed_layers=2, normalize=True)
    # perturb away from the initialization so a load that silently re-initializes would show
    with torch.no_grad():
        for p in backbone.model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    backbone.save_pretrained(tmp_path / "model")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (tmp_path / "model").iterdir()}

    loaded = registry.create("backbone", "informed-transformer", model=str(tmp_path / "model"))
    assert loaded.config == backbone.config and loaded.normalize
    np.testing.assert_array_equal(loaded.encode(CODE), backbone.encode(CODE))
    np.testing.assert_array_equal(loaded.encode(QUERIES, kind="query"), backbone.encode(QUERIES, kind="query"))
    # the gold tree can be switched on for a model trained without it
    strict = registry.create("backbone", "informed-transformer", model=str(tmp_path / "model"), strict=True)
    assert strict.config.strict and not loaded.config.strict


def test_missing_model_directory_says_what_to_do(tmp_path):
    from structret.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="initialize"):
        InformedTransformer(str(tmp_path))
    with pytest.raises(ModelLoadError, match="texts"):
        InformedTransformer()


def _structure_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "structret_structure.plugin" for ep in entry_points(group="structret"))


@pytest.fixture
def structure_registered(make_plugin):
    """The plugin visible to ``get_registry()``: through its real entry point once installed,
    through a stand-in distribution until then (both at once would register names twice)."""
    if not _structure_installed():
        make_plugin("structure-standin", "structure_standin",
                    "from structret_structure.plugin import register_backbones, register_objectives\n")


@pytest.mark.parametrize("objective", ["dr", "dr+0.5*parent-attention"])
def test_trainer_runs_it_end_to_end(tmp_path, structure_registered, objective):
    """structret.training as it is: passages tokenized by the trainer (dr alone) or by the objective."""
    import json

    from structret.recipes import resolve_recipe
    from structret.registry import get_registry
    from structret.training import train
    from structret_structure.model import initialize

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"query": q, "positive_passages": [{"text": c}]}) + "\n"
                            for q, c in zip(QUERIES, CODE)), encoding="utf-8")
    start = initialize(tmp_path / "init", CODE + QUERIES, **TINY)
    recipe = resolve_recipe(None, dict(objective=objective, backbone="informed-transformer", model=str(start),
                    data=f"tevatron:{data}", output=str(tmp_path / "run"), batch_size=3, max_steps=4, lr=1e-3,
                    checkpoint_every=0, log_every=2, query_max_len=32, passage_max_len=128))
    final = train(recipe)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = {"loss/dr", "loss/parent-attention"} if "parent" in objective else {"loss/dr"}
    assert logged == {k for k in rows[-1] if k.startswith("loss/")}
    trained = get_registry().create("backbone", "informed-transformer", model=str(final))
    assert trained.encode(CODE[:2]).shape == (2, TINY["dim"])
    assert not np.array_equal(trained.encode(CODE[:2]), InformedTransformer(str(start)).encode(CODE[:2]))


def test_the_linearizer_is_a_choice_and_is_saved(tmp_path):
    from structret_structure.model import InformedTransformer

    code = ["def add(a, b):\n    return a + b\n", "def neg(x):\n    return -x\n"] * 5
    raw = InformedTransformer(texts=code, linearizer="raw", vocab_size=300, dim=16, heads=2, layers=1)
    batch = raw.tokenizer.batch(code[:1], kind="document")
    assert (batch["parents"] == -1).all()  # raw tokens carry no tree
    dfs = InformedTransformer(texts=code, vocab_size=300, dim=16, heads=2, layers=1)
    assert (dfs.tokenizer.batch(code[:1], kind="document")["parents"] >= 0).any()
    raw.save_pretrained(tmp_path / "raw")
    assert InformedTransformer(tmp_path / "raw").tokenizer.linearizer_name == "raw"


# --- two encoders: the paper's query encoder and code encoder -----------------------------


def test_separate_query_encoder_trains_jointly_and_round_trips(tmp_path):
    from structret.errors import ModelLoadError
    from structret.training import TrainStep
    from structret_objectives.contrastive import dr

    backbone = tiny(query_encoder="separate")
    shared = tiny()
    assert backbone.query_encoder == "separate" and shared.query_encoder == "shared"
    # queries and documents go through different weights
    assert backbone.query_model is not None and backbone.query_model is not backbone.model
    assert not backbone.query_model.layers[0].attention.informed  # queries have no tree
    step = TrainStep(backbone, [(dr(), 1.0)])
    trained = {id(p) for p in step.parameters()}
    assert {id(p) for p in backbone.query_model.parameters()} <= trained  # the optimizer sees both towers
    total, _ = step({"query": backbone.tokenize(QUERIES, kind="query", max_length=32),
                     "passage": backbone.tokenize(CODE, kind="document", max_length=128)})
    total.backward()
    assert backbone.query_model.tokens.weight.grad.abs().sum() > 0
    assert backbone.model.tokens.weight.grad.abs().sum() > 0

    backbone.save_pretrained(tmp_path / "two")
    loaded = InformedTransformer(tmp_path / "two")
    assert loaded.query_encoder == "separate"
    np.testing.assert_array_equal(loaded.encode(QUERIES, kind="query"), backbone.encode(QUERIES, kind="query"))
    np.testing.assert_array_equal(loaded.encode(CODE), backbone.encode(CODE))
    with pytest.raises(ModelLoadError, match="query_encoder"):
        InformedTransformer(tmp_path / "two", query_encoder="shared")
    (tmp_path / "two" / "query_model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="incomplete"):
        InformedTransformer(tmp_path / "two")


# --- the informed head on a Hugging Face encoder ------------------------------------------


def hf(model_dir, **options):
    from structret_backbones.hf import HFEncoder

    return HFEncoder(str(model_dir), pooling="mean", **options)


def test_hf_informed_layers_add_the_capability_and_parents(tiny_bert_dir):
    plain, informed = hf(tiny_bert_dir), hf(tiny_bert_dir, informed_layers=1)
    assert "structure-attention" not in plain.capabilities
    assert "structure-attention" in informed.capabilities
    batch = informed.tokenize(CODE[:2], kind="document", max_length=64)
    parents = batch["parents"]
    assert parents.shape == batch["input_ids"].shape
    assert (parents[:, 0] == NO_PARENT).all()  # [CLS] has no parent
    assert (parents >= 0).sum() > 5 and (parents < batch["input_ids"].shape[1]).all()
    # each parent is an earlier position (pre-order) of a real token of the same row
    rows, cols = torch.nonzero(parents >= 0, as_tuple=True)
    assert (parents[rows, cols] < cols).all() and batch["attention_mask"][rows, parents[rows, cols]].all()
    assert "parents" not in informed.tokenize(QUERIES[:2], kind="query")  # queries have no tree
    # the informed head changes nothing of the forward itself: same vectors as plain attention
    plain_batch = dict(batch)
    plain_batch.pop("parents")
    with torch.no_grad():
        plain.model.eval(), informed.model.eval()
        torch.testing.assert_close(informed.embed(batch), plain.embed(plain_batch), atol=1e-5, rtol=1e-5)
    assert len(informed.last_attention) == 1
    assert torch.allclose(informed.last_attention[0].sum(-1), torch.ones(()))


def test_hf_strict_head_is_the_gold_tree_and_options_are_saved(tiny_bert_dir, tmp_path):
    from structret_backbones.hf import HFEncoder

    strict = hf(tiny_bert_dir, informed_layers=2, strict=True)
    batch = strict.tokenize(CODE[:3], kind="document", max_length=64)
    with torch.no_grad():
        strict.embed(batch)
    assert len(strict.last_attention) == 2
    for attention in strict.last_attention:
        assert torch.equal(attention, gold_attention(batch["parents"]))
    with pytest.raises(ObjectiveError, match="strict"):
        ParentAttention().check(strict)
    strict.save_pretrained(tmp_path / "strict")
    loaded = HFEncoder(str(tmp_path / "strict"), pooling="mean")
    assert loaded.informed_layers == 2 and loaded.strict
    np.testing.assert_allclose(loaded.encode(CODE), strict.encode(CODE), atol=1e-6)
    # and without strict the saved model's informed head attends freely: other vectors
    free = HFEncoder(str(tmp_path / "strict"), pooling="mean", strict=False)
    assert not np.allclose(free.encode(CODE), strict.encode(CODE), atol=1e-4)


def test_hf_parent_attention_supervises_head_zero_only(tiny_bert_dir):
    torch.manual_seed(0)
    backbone = hf(tiny_bert_dir, informed_layers=1)
    objective = ParentAttention()
    objective.check(backbone)
    model = backbone.model
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    batch = backbone.tokenize(CODE, kind="document", max_length=64)

    def loss_of():
        backbone.embed(batch)
        return objective.loss(backbone, batch)[0]

    model.train()
    loss_of().backward()
    attention = model.encoder.layer[0].attention.self
    width = model.config.hidden_size // model.config.num_attention_heads
    q, k = attention.query.weight.grad, attention.key.weight.grad
    assert q[:width].abs().sum() > 0 and k[:width].abs().sum() > 0
    assert q[width:].abs().sum() == 0 and k[width:].abs().sum() == 0  # head 1 is free
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.encoder.layer[1].parameters())

    first = float(loss_of())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        optimizer.zero_grad()
        loss_of().backward()
        optimizer.step()
    assert float(loss_of()) < 0.3 * first, first


@pytest.fixture
def structure_and_backbones_registered(make_plugin):
    if not _structure_installed():
        make_plugin("structure-standin", "structure_standin",
                    "from structret_structure.plugin import register_backbones, register_objectives\n")


@pytest.mark.parametrize("chunk", [0, 2])  # 2: gradient caching, parent-attention added chunk by chunk
def test_trainer_runs_an_informed_hf_encoder(tmp_path, tiny_bert_dir, structure_and_backbones_registered, chunk):
    import json

    from structret.recipes import Recipe, resolve_recipe
    from structret.registry import get_registry
    from structret.training import train

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"query": q, "positive_passages": [{"text": c}]}) + "\n"
                            for q, c in zip(QUERIES, CODE)), encoding="utf-8")
    recipe = resolve_recipe(None, dict(objective="dr+0.5*parent-attention", backbone="hf-encoder", model=str(tiny_bert_dir),
                    backbone_options="informed_layers=1,pooling=mean", data=f"tevatron:{data}",
                    output=str(tmp_path / "run"), batch_size=3, max_steps=4, lr=1e-3, checkpoint_every=2,
                    log_every=2, query_max_len=32, passage_max_len=64, grad_cache_chunk=chunk))
    final = train(recipe)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"loss/dr", "loss/parent-attention"} <= set(rows[-1])
    # each passage counted once, though gradient caching runs the loss in both of its passes
    assert json.loads((tmp_path / "run" / "counts.json").read_text())["parent-attention"]["passages"] == 4 * 3
    trained = get_registry().create("backbone", "hf-encoder", model=str(final))
    assert trained.informed_layers == 1 and "structure-attention" in trained.capabilities
    # the resolved recipe keeps the options, so the run can be resumed or rerun as it was
    saved = resolve_recipe(str(tmp_path / "run" / "recipe.toml")).plugins["hf-encoder"]
    assert (saved["informed_layers"], saved["pooling"]) == (1, "mean")
