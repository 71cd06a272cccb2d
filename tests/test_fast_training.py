"""What makes training fast on a CPU computes what the plain path computes: length chunks, the
attention kernel structret picks, fused AdamW; and the dropout options do what they say."""

from __future__ import annotations

import pytest
import torch

from _tiny_models import corpus, tiny_bert_dir  # noqa: F401  (fixture)
from structret.errors import ModelLoadError
from structret_backbones import attention
from structret_backbones._loading import LengthChunks
from structret_backbones.hf import HFEncoder

# lengths from a few tokens to past max_length, so chunks differ in rows and length
TEXTS = corpus(n=14, seed=3) + ["x", "def add(a, b): return a + b", " ".join(["sort"] * 60)]


def _still(encoder: HFEncoder) -> HFEncoder:
    """Training mode without dropout: the chunked and the whole-batch forward then compute the same."""
    encoder.model.train()
    for module in encoder.model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return encoder


def _grads(encoder: HFEncoder) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in encoder.model.named_parameters() if p.grad is not None}


def test_chunks_group_rows_of_like_length_and_restore_the_batch_order(tiny_bert_dir):
    encoder = HFEncoder(tiny_bert_dir, max_length=64)
    batch = encoder.tokenize(TEXTS, kind="document")
    chunks = LengthChunks.of(dict(batch), 96)
    assert chunks is not None and len(chunks.batches) > 2
    lengths = batch["attention_mask"].sum(1)
    seen = []
    for part in chunks.batches:
        rows = part["attention_mask"].sum(1)
        # each chunk is padded only to its own longest row (to a multiple of 8), within the budget
        assert part["input_ids"].shape[1] == min(batch["input_ids"].shape[1], -(-int(rows.max()) // 8) * 8)
        assert part["input_ids"].numel() <= 96 or len(rows) == 1
        seen += rows.tolist()
    assert sorted(seen, reverse=True) == seen == sorted(lengths.tolist(), reverse=True)  # longest first
    restored = chunks.restore([part["attention_mask"].sum(1) for part in chunks.batches])
    assert torch.equal(restored, lengths)  # row i of the batch is row i again


def test_no_chunks_where_they_would_change_nothing_or_cut_real_tokens(tiny_bert_dir):
    encoder = HFEncoder(tiny_bert_dir, max_length=64)
    batch = dict(encoder.tokenize(TEXTS, kind="document"))
    assert LengthChunks.of(batch, 0) is None  # train_chunk_tokens = 0: off
    assert LengthChunks.of(batch, 10_000) is None  # one chunk is the batch itself
    left = {k: v.flip(1) for k, v in batch.items()}  # padded on the left: cutting at the end would drop tokens
    assert LengthChunks.of(left, 96) is None


def test_a_chunked_training_forward_gives_the_whole_batch_vectors_and_gradients(tiny_bert_dir):
    chunked = _still(HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, train_chunk_tokens=96))
    whole = _still(HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, train_chunk_tokens=0))
    batch = dict(chunked.tokenize(TEXTS, kind="document"))
    assert chunked._chunks(batch) is not None and whole._chunks(batch) is None
    a, b = chunked.embed(batch), whole.embed(batch)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    weights = torch.linspace(-1, 1, a.numel()).reshape(a.shape)
    (a * weights).sum().backward()
    (b * weights).sum().backward()
    ga, gb = _grads(chunked), _grads(whole)
    assert ga.keys() == gb.keys()
    for name in ga:
        torch.testing.assert_close(ga[name], gb[name], atol=1e-4, rtol=1e-3)  # summation order apart
    chunked.model.eval()  # encoding is never chunked here: encode() sorts the whole corpus itself
    assert chunked._chunks(batch) is None


def test_a_chunked_masked_lm_forward_gives_the_whole_batch_loss(tiny_bert_dir):
    chunked = _still(HFEncoder(tiny_bert_dir, max_length=64, train_chunk_tokens=96))
    whole = _still(HFEncoder(tiny_bert_dir, max_length=64, train_chunk_tokens=0))
    for encoder in (chunked, whole):
        torch.manual_seed(0)
        encoder.enable_lm()
        _still(encoder)
    whole.lm_model.load_state_dict(chunked.lm_model.state_dict())
    batch = dict(chunked.tokenize(TEXTS, kind="document"))
    generator = torch.Generator().manual_seed(1)
    labels = batch["input_ids"].masked_fill(torch.rand(batch["input_ids"].shape, generator=generator) > 0.3, -100)
    labels = labels.masked_fill(batch["attention_mask"] == 0, -100)
    (va, la), (vb, lb) = chunked.train_forward(batch, labels), whole.train_forward(batch, labels)
    torch.testing.assert_close(va, vb, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(la, lb, atol=1e-5, rtol=1e-4)
    la.backward()
    lb.backward()
    for name, grad in _grads(chunked).items():
        torch.testing.assert_close(grad, _grads(whole)[name], atol=1e-4, rtol=1e-3)


def test_dropout_options_set_the_model_config_before_it_is_built(tiny_bert_dir):
    encoder = HFEncoder(tiny_bert_dir, attention_dropout=0.0, hidden_dropout=0.05)
    config = encoder.model.config
    assert config.attention_probs_dropout_prob == 0.0 and config.hidden_dropout_prob == 0.05
    rates = {name: m.p for name, m in encoder.model.named_modules() if isinstance(m, torch.nn.Dropout)}
    assert rates and all(p == 0.05 for name, p in rates.items() if not name.endswith("attention.self.dropout"))
    assert all(p == 0.0 for name, p in rates.items() if name.endswith("attention.self.dropout"))
    untouched = HFEncoder(tiny_bert_dir).model.config
    assert untouched.attention_probs_dropout_prob == untouched.hidden_dropout_prob == 0.1  # the checkpoint's


def test_a_dropout_option_the_architecture_has_no_setting_for_is_refused():
    from structret_backbones.hf import _configure
    from structret_backbones.options import HFEncoder as Options

    class Config:
        model_type = "nodrop"
        is_encoder_decoder = False

    with pytest.raises(ModelLoadError, match="has no hidden dropout setting.*leave hidden_dropout unset"):
        _configure(Options(hidden_dropout=0.0))(Config(), "some/model")
    _configure(Options())(Config(), "some/model")  # unset: nothing to set, nothing refused


def test_attention_auto_runs_the_fp32_kernel_only_when_training_in_bf16(tiny_bert_dir, monkeypatch):
    auto = _still(HFEncoder(tiny_bert_dir, pooling="mean", max_length=64))
    plain = _still(HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, attention="sdpa"))
    assert auto.model.config._attn_implementation == attention.IMPLEMENTATION
    assert plain.model.config._attn_implementation == "sdpa"
    dtypes = []
    from transformers.integrations import sdpa_attention

    real = sdpa_attention.sdpa_attention_forward

    def spy(module, query, *args, **kwargs):
        dtypes.append(query.dtype)
        return real(module, query, *args, **kwargs)

    monkeypatch.setattr(sdpa_attention, "sdpa_attention_forward", spy)
    batch = dict(auto.tokenize(TEXTS, kind="document"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = auto.embed(batch)
        assert dtypes == [torch.float32, torch.float32]  # both layers' attention, in fp32
        b = plain.embed(batch)  # transformers' own sdpa, in bf16 (it does not pass through the spy)
        dtypes.clear()
        with torch.no_grad():  # encoding: bf16's own kernel is the faster one there
            auto.embed(batch)
        assert set(dtypes) == {torch.bfloat16}
    torch.testing.assert_close(a, b, atol=2e-2, rtol=0)  # bf16 rounding apart, the same vectors
    (a.sum() + b.sum()).backward()


def test_attention_eager_and_a_refused_name(tiny_bert_dir):
    assert HFEncoder(tiny_bert_dir, attention="eager").model.config._attn_implementation == "eager"
    from structret.errors import OptionError

    with pytest.raises(OptionError, match="attention"):
        HFEncoder(tiny_bert_dir, attention="flash")


def test_the_trainer_steps_with_fused_adamw_on_a_cpu():
    from structret.training.loop import make_optimizer

    weight = torch.nn.Parameter(torch.ones(3, 3))
    optimizer = make_optimizer([{"params": [weight], "weight_decay": 0.0}], 1e-2)
    assert optimizer.defaults["fused"] is True
    weight.grad = torch.ones(3, 3)
    optimizer.step()
    assert torch.all(weight < 1)
