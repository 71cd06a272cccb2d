"""Objectives: names and weights, capability checks, the contrastive loss, the one-forward head."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from _tiny_models import tiny_bert_dir, tiny_t5_dir, one_torch_thread  # noqa: F401  (fixtures)

from structret.errors import PluginError
from structret.recipes import ObjectiveError, parse_objectives, resolve_recipe
from structret.records import CodeRecord, ItemRecord
from structret.registry import get_registry
from structret.training import build_objectives




class _Encoder:
    """A stand-in backbone that only declares what it can do."""

    def __init__(self, name, capabilities):
        self.name, self.capabilities = name, frozenset(capabilities)


# --- parsing -----------------------------------------------------------------------------


def test_parse_names_and_weights():
    assert parse_objectives("sda") == [("sda", 1.0)]
    assert parse_objectives("sda+mep") == [("sda", 1.0), ("mep", 1.0)]
    assert parse_objectives(" sda + 0.5*mep ") == [("sda", 1.0), ("mep", 0.5)]
    assert parse_objectives("2*dr+1e-1*span-mask") == [("dr", 2.0), ("span-mask", 0.1)]


@pytest.mark.parametrize("spec, message", [
    ("", "no objective given"),
    ("sda+", "empty term"),
    ("x*mep", "'x' is not a number"),
    ("0*mep", "positive"),
    ("-1*mep", "positive"),
    ("sda+sda", "appears twice"),
])
def test_parse_errors_say_what_is_wrong(spec, message):
    with pytest.raises(ObjectiveError, match=message):
        parse_objectives(spec)


def test_unknown_objective_names_the_closest():
    with pytest.raises(PluginError) as err:
        parse_objectives("sda+mpe")
    assert "unknown objective 'mpe'" in str(err.value) and "Did you mean 'mep'?" in str(err.value)
    assert "span-mask" in str(err.value)  # the known ones are listed


def test_at_most_one_corruption_objective():
    with pytest.raises(ObjectiveError, match="at most one corruption objective") as err:
        build_objectives(resolve_recipe(None, {"objective": "sda+mep+span-mask"}))
    assert "mep and span-mask" in str(err.value)
    with pytest.raises(ObjectiveError, match="at most one contrastive objective"):
        build_objectives(resolve_recipe(None, {"objective": "sda+dr"}))


def test_recipe_fields_reach_objective_options():
    recipe = resolve_recipe(None, {"objective": "0.5*sda+span-mask", "similarity": "cos", "temperature": 0.05,
                                   "noise_density": 0.3})
    (sda, w1), (span, w2) = build_objectives(recipe)
    assert (sda.name, sda.similarity, sda.temperature, w1) == ("sda", "cos", 0.05, 0.5)
    assert (span.name, span.role, span.noise_density, span.mean_span_length, w2) == ("span-mask", "corruption", 0.3, 3.0, 1.0)


# --- capabilities --------------------------------------------------------------------------


def test_mep_on_an_encoder_only_backbone_says_why():
    mep = get_registry().create("objective", "mep")
    with pytest.raises(ObjectiveError) as err:
        mep.check(_Encoder("xyz", {"encoder"}))
    assert str(err.value).startswith(
        "mep needs a backbone that can predict tokens (seq2seq or mlm); 'xyz' can only encode."
    )
    span = get_registry().create("objective", "span-mask")
    with pytest.raises(ObjectiveError, match="span-mask needs a backbone that can predict tokens"):
        span.check(_Encoder("xyz", {"encoder"}))


def test_contrastive_needs_an_encoder():
    sda = get_registry().create("objective", "sda")
    with pytest.raises(ObjectiveError, match="sda needs a backbone that encodes texts.*'gen' declares only seq2seq"):
        sda.check(_Encoder("gen", {"seq2seq"}))
    sda.check(_Encoder("ok", {"encoder", "mlm"}))


def test_mep_needs_sentinel_tokens_on_seq2seq(tiny_t5_dir):
    from structret_backbones.t5 import T5Encoder

    with pytest.raises(ObjectiveError, match="mep cannot run on .*has no token '<extra_id_0>'"):
        get_registry().create("objective", "mep").check(T5Encoder(tiny_t5_dir))


def test_unit_vectors_with_raw_dot_products_warn(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    with pytest.warns(UserWarning, match='similarity = "cos"'):
        get_registry().create("objective", "sda").check(HFEncoder(tiny_bert_dir, normalize=True))


def test_mep_auto_extractor_follows_the_record():
    mep = get_registry().create("objective", "mep")
    assert mep.extractor_for(CodeRecord(id="1", code="x", language="python")) == "python-tokenize"
    assert mep.extractor_for(CodeRecord(id="1", code="x", language="go")) == "tree-sitter"
    assert mep.extractor_for(ItemRecord(id="1", title="t")) == "title-overlap"
    with pytest.raises(ObjectiveError, match="--extractor NAME"):
        mep.extractor_for(None)
    named = get_registry().create("objective", "mep", extractor="python-tokenize")
    assert named.extractor_for(None) == "python-tokenize"


# --- the contrastive loss ---------------------------------------------------------------------


def test_contrastive_loss_is_cross_entropy_over_dot_products():
    torch.manual_seed(0)
    q, p = torch.randn(3, 8), torch.randn(6, 8)  # 2 passages per query: positive, hard negative
    sda = get_registry().create("objective", "sda")
    expected = -sum(torch.log_softmax(q[i] @ p.T, dim=0)[2 * i] for i in range(3)) / 3
    torch.testing.assert_close(sda.loss(q, p), expected)
    cos = get_registry().create("objective", "dr", similarity="cos", temperature=0.1)
    scores = F.normalize(q, dim=-1) @ F.normalize(p, dim=-1).T / 0.1
    torch.testing.assert_close(cos.loss(q, p), F.cross_entropy(scores, torch.tensor([0, 2, 4])))


# --- the one-forward head ----------------------------------------------------------------------


@pytest.mark.parametrize("first_label", [0, 5, -100])
def test_t5_train_forward_vector_is_the_embedding(tiny_t5_dir, first_label):
    from structret_backbones.t5 import T5Encoder

    t5 = T5Encoder(tiny_t5_dir)
    t5.enable_lm()
    t5.lm_model.eval()
    batch = t5.tokenize(["def add a b return a b", "sort the list of numbers"])
    labels = torch.tensor([[first_label, 6, 1, -100], [7, 8, 9, 1]])
    vectors, loss = t5.train_forward(batch, labels)
    torch.testing.assert_close(vectors, t5.embed(batch), atol=1e-5, rtol=1e-5)
    assert loss.ndim == 0 and loss.requires_grad
    # the head shares every weight with the model that embeds queries
    assert t5.lm_model.encoder is t5.model.encoder and t5.lm_model.lm_head.weight is t5.model.shared.weight


def test_mlm_train_forward_vector_is_the_embedding(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    bert = HFEncoder(tiny_bert_dir, pooling="mean")
    bert.enable_lm()
    bert.lm_model.eval()
    assert bert.lm_model.bert is bert.model
    assert bert.lm_model.cls.predictions.decoder.weight is bert.model.embeddings.word_embeddings.weight
    batch = bert.tokenize(["def add a b return a b", "sort the list"])
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, 1] = batch["input_ids"][:, 1]
    vectors, loss = bert.train_forward(batch, labels)
    torch.testing.assert_close(vectors, bert.embed(batch), atol=1e-5, rtol=1e-5)
    assert loss.item() > 0
    assert bert.train_forward(batch)[1] is None  # no labels: just the vectors
    # projecting only the masked positions gives Hugging Face's own masked-LM loss
    reference = bert.lm_model(**{k: batch[k] for k in ("input_ids", "attention_mask")}, labels=labels).loss
    torch.testing.assert_close(loss, reference, atol=1e-5, rtol=1e-5)


def test_fresh_mlm_head_warns_once():
    from structret_backbones.hf import HFEncoder, minilm

    HFEncoder._warned_fresh_head = False
    encoder = minilm()  # sentence-transformers weights: no masked-LM head
    with pytest.warns(UserWarning, match="no weights for its MaskedLM head.*start random"):
        encoder.enable_lm()
    assert encoder.capabilities == {"encoder", "mlm"}


# --- corruption with the real masking and extractors ----------------------------------------


def test_mep_masks_every_entity_as_whole_words_on_mlm(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    mep = get_registry().create("objective", "mep")
    bert = HFEncoder(tiny_bert_dir)
    mep.check(bert)
    record = CodeRecord(id="1", code="def add(a, b): return a + b", language="python")
    batch = mep.corrupt([record.code, "x = 1"], [record, CodeRecord(id="2", code="x = 1", language="python")],
                        bert, max_length=32, label_max_length=16, rngs=[random.Random(0)] * 2)
    assert {"input_ids", "attention_mask", "labels"} <= set(batch)
    masked = batch["input_ids"] == bert.tokenizer.mask_token_id
    assert torch.equal(masked, batch["labels"] != -100)  # labels exactly where the masks are
    # add, a, b, a, b: the names are masked, 'def', 'return' and the operators are not
    words = bert.tokenizer.convert_ids_to_tokens(batch["labels"][0][masked[0]].tolist())
    assert words == ["add", "a", "b", "a", "b"]
    assert batch["attention_mask"][1].sum() < batch["attention_mask"][0].sum()  # padded, not truncated
    # counted, not lost: an unterminated string does not tokenize, so no entities, one failure
    broken = CodeRecord(id="3", code='x = """never closed', language="python")
    mep.corrupt([broken.code], [broken], bert, max_length=32, label_max_length=16, rngs=[random.Random(0)])
    report = mep.report()
    assert report["passages"] == 3 and report["passages without entities"] == 1
    assert report["tokens masked"] == 6 and report["unparsable for python-tokenize"] == 1


def test_mep_entity_rate_masks_a_drawn_share_of_distinct_entities(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    from structret.errors import PluginError

    bert = HFEncoder(tiny_bert_dir)
    code = "def search(value, key, index): return value * key + index + value"  # words of the tiny vocabulary
    record = CodeRecord(id="1", code=code, language="python")

    def masked_words(rate, seed):
        mep = get_registry().create("objective", "mep", entity_rate=rate)
        batch = mep.corrupt([code], [record], bert, max_length=48, label_max_length=16, rngs=[random.Random(seed)])
        labels = batch["labels"][0]
        return bert.tokenizer.convert_ids_to_tokens(labels[labels != -100].tolist()), mep.report()

    everything, _ = masked_words(1.0, 0)
    assert everything == ["search", "value", "key", "index", "value", "key", "index", "value"]
    draws = {seed: masked_words(0.5, seed) for seed in range(12)}
    for words, report in draws.values():
        # a drawn name is masked at every occurrence, as one sentinel stands for all of them
        assert all(words.count(w) == everything.count(w) for w in set(words))
        assert report["entities left unmasked (entity_rate)"] == 4 - len(set(words))
    assert len({tuple(w) for w, _ in draws.values()}) > 2  # the share varies with the passage's rng
    assert masked_words(0.5, 3)[0] == draws[3][0]  # and is the same for the same rng
    with pytest.raises(PluginError, match="entity_rate=0: Input should be greater than 0"):
        get_registry().create("objective", "mep", entity_rate=0)


def test_mep_on_products_masks_description_words_shared_with_the_title(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    from structret.linearization import TextFormat

    mep = get_registry().create("objective", "mep")
    item = ItemRecord(id="p", title="Sorted list python book", content="a book to sort a python list")
    # the record's own text and SANTA's product template ("title : ... text : ...") alike
    for text in (TextFormat().document(item), TextFormat("product").document(item)):
        found = mep.entities(text, item)
        assert [e.text for e in found] == ["book", "python", "list"]
        assert all(text[e.start:e.end] == e.text and e.start > text.index(item.content) - 1 for e in found)
        mep.corrupt([text], [item], HFEncoder(tiny_bert_dir), max_length=64, label_max_length=16,
                    rngs=[random.Random(0)])
    assert TextFormat("product").document(item) == "title : Sorted list python book text : a book to sort a python list"


def test_span_mask_is_seeded_per_passage(tiny_bert_dir):
    from structret_backbones.hf import HFEncoder

    span = get_registry().create("objective", "span-mask")
    bert = HFEncoder(tiny_bert_dir)
    text = " ".join(["sort the list of numbers and return the value"] * 4)

    def run(seed):
        return span.corrupt([text], [None], bert, max_length=64, label_max_length=16, rngs=[random.Random(seed)])

    one, again, other = run(1), run(1), run(2)
    assert torch.equal(one["input_ids"], again["input_ids"]) and not torch.equal(one["input_ids"], other["input_ids"])
    share = (one["labels"] != -100).sum().item() / (one["attention_mask"].sum().item() - 2)
    assert 0.1 < share < 0.2  # T5's 15% noise over the non-special tokens
