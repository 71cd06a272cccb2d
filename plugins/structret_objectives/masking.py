"""What the masked-prediction objectives hide from the model, and what they ask it to recover.

Three families, all pure functions (no model, no training state):

* **Sentinel MEP** (SANTA on T5/CodeT5): :func:`sentinel_mask` works on text and character
  spans, so any T5-style tokenizer can encode the result; :func:`tokenize_seq2seq` does
  that with SANTA's lengths.
* **Whole-entity MLM** (MEP on BERT-like encoders): :func:`whole_entity_mlm` masks every
  sub-token of every occurrence of each masked entity.
* **Random spans** (SANTA's span-mask ablation, Table 3): :func:`random_spans_mask` is
  T5's noise mask; :func:`span_corrupt` turns it into a T5 source/target pair and
  :func:`random_span_mlm` into an MLM example.

How SANTA builds its MEP examples (OpenMatch/SANTA ``processing/Code/build_code_entity.py``,
``processing/Product/build_product_entity.py``; training side in OpenMatch/OpenMatch
``scripts/santa/trainer.py`` and ``scripts/santa/data_collator.py``):

* distinct entities (by exact text) get ``<extra_id_0>``, ``<extra_id_1>`` ... in
  first-seen order and every occurrence is replaced; at most ``len(sentinels) - 1`` = 99
  distinct entities are masked, the rest stay in the text, so the closing sentinel exists;
* the target is ``' '.join([<extra_id_0>, e0, <extra_id_1>, e1, ..., <extra_id_N>])``;
* source, target and query are tokenized with the tokenizer's own special tokens (T5 appends
  ``</s>``), truncated to 240 / 35 / 50 tokens, padded to those lengths, and target padding
  becomes -100.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from structret.records import Entity

SENTINEL = "<extra_id_{}>"
IGNORE_INDEX = -100  # what PyTorch's cross-entropy skips


# --------------------------------------------------------------------------- entity spans


def resolve_spans(text: str, entities: Iterable[Entity]) -> list[Entity]:
    """The entity occurrences that get masked, sorted by start and never overlapping.

    Every span must be exactly ``text[start:end]`` (an extractor that ran on another
    string is a bug worth hearing about). Where spans overlap, the one that starts first
    wins, and of two starting together the longer one; the loser is dropped for that
    position only, so its other occurrences are still masked. Keeping the outer span
    means nothing of it leaks into the source around a sentinel.
    """
    checked = []
    for e in entities:
        if not (0 <= e.start < e.end <= len(text)):
            raise ValueError(
                f"entity {e.text!r} has span [{e.start}, {e.end}) outside the text (length {len(text)}) "
                "or empty; entity spans are character offsets into the text being masked"
            )
        if text[e.start:e.end] != e.text:
            raise ValueError(
                f"entity {e.text!r} at [{e.start}, {e.end}) does not match the text there "
                f"({text[e.start:e.end]!r}); were the entities extracted from a different string?"
            )
        checked.append(e)
    checked.sort(key=lambda e: (e.start, -e.end))
    kept: list[Entity] = []
    for e in checked:
        if not kept or e.start >= kept[-1].end:
            kept.append(e)
    return kept


def _distinct_in_order(spans: Sequence[Entity]) -> list[str]:
    return list(dict.fromkeys(e.text for e in spans))


def sample_entities(
    entities: Sequence[Entity], ratio: float, *, seed: int | random.Random | None = None
) -> list[Entity]:
    """All occurrences of a random ``ratio`` of the distinct entities (by text).

    ``round(ratio * distinct)`` entities are chosen, at least one when there is any,
    uniformly and without regard to how often each occurs. (SANTA's non-Python code
    data keeps a random half of the identifiers, a tenth for JavaScript; it samples
    occurrences, so frequent names are likelier to be kept. Here every name has the
    same chance, so the ratio means the same thing for every document.)
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"mask_ratio must be in (0, 1], got {ratio}")
    distinct = _distinct_in_order(sorted(entities, key=lambda e: e.start))
    if not distinct:
        return []
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    k = max(1, int(np.round(ratio * len(distinct))))
    chosen = set(rng.sample(distinct, k))
    return [e for e in entities if e.text in chosen]


# --------------------------------------------------------------------------- sentinel MEP


@dataclass(frozen=True)
class MaskedText:
    """A sentinel-masked text and the sequence T5 must generate from it."""

    source: str
    target: str
    mapping: dict[str, int] = field(default_factory=dict)  # entity text -> sentinel index
    masked: int = 0  # distinct entities replaced by sentinels
    left_unmasked: int = 0  # distinct entities beyond the sentinel cap, left in the text
    sentinel: str = SENTINEL


def _check_sentinel_format(sentinel: str) -> None:
    if "{}" not in sentinel or sentinel.format(0) == sentinel.format(1):
        raise ValueError(f"sentinel must be a format string with one '{{}}' for the index, got {sentinel!r}")


def sentinel_mask(
    text: str, entities: Sequence[Entity], *, max_sentinels: int = 100, sentinel: str = SENTINEL
) -> MaskedText:
    """Replace every occurrence of each distinct entity by that entity's sentinel.

    ``def sum_two_numbers(a, b): return a + b`` with entities sum_two_numbers, a, b, a, b:
    source ``def <extra_id_0>(<extra_id_1>, <extra_id_2>): return <extra_id_1> + <extra_id_2>``,
    target ``<extra_id_0> sum_two_numbers <extra_id_1> a <extra_id_2> b <extra_id_3>``.

    Occurrences are the spans the extractor gave (overlaps resolved by
    :func:`resolve_spans`); the text is not searched for more, since a plain string match
    would also hit ``a`` inside ``data`` or inside comments and strings. Only the entity
    characters are replaced: the text around a sentinel keeps its own spacing (SANTA
    masked space-joined CodeSearchNet tokens, so its sentinels always had spaces around
    them; T5 tokenizers split sentinels out either way). The target is spaced exactly as
    SANTA's, one space between every sentinel and entity, and ends with a closing
    sentinel as T5 targets do. Only ``max_sentinels - 1`` distinct entities are masked so
    that the closing sentinel exists; the rest stay in the text and are counted in
    ``left_unmasked``. With no entity the target is just ``<extra_id_0>``: callers may
    want to skip such examples (SANTA drops code without identifiers).
    """
    _check_sentinel_format(sentinel)
    if max_sentinels < 1:
        raise ValueError(f"max_sentinels must be at least 1 (the closing sentinel), got {max_sentinels}")
    spans = resolve_spans(text, entities)
    distinct = _distinct_in_order(spans)
    kept = distinct[: max_sentinels - 1]
    mapping = {name: i for i, name in enumerate(kept)}

    pieces, pos = [], 0
    for e in spans:
        if e.text in mapping:
            pieces += [text[pos:e.start], sentinel.format(mapping[e.text])]
            pos = e.end
    pieces.append(text[pos:])

    target = []
    for name, i in mapping.items():
        target += [sentinel.format(i), name]
    target.append(sentinel.format(len(mapping)))
    return MaskedText(
        source="".join(pieces),
        target=" ".join(target),
        mapping=mapping,
        masked=len(mapping),
        left_unmasked=len(distinct) - len(mapping),
        sentinel=sentinel,
    )


def _tokenizer_name(tokenizer) -> str:
    return getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__


def sentinel_token_ids(tokenizer, count: int, *, sentinel: str = SENTINEL) -> list[int]:
    """Ids of sentinels 0..count-1, each of which must be one known token of ``tokenizer``."""
    _check_sentinel_format(sentinel)
    tokens = [sentinel.format(i) for i in range(count)]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    unk = getattr(tokenizer, "unk_token_id", None)
    missing = [t for t, i in zip(tokens, ids) if i is None or i == unk]
    if missing:
        raise ValueError(
            f"tokenizer {_tokenizer_name(tokenizer)!r} has no token {missing[0]!r} "
            f"({len(missing)} of {count} sentinels missing): sentinel masking needs a T5-style "
            "tokenizer (t5, codet5) with <extra_id_N> tokens; for a BERT-like encoder use "
            "whole-entity MLM instead"
        )
    return list(ids)


def tokenize_seq2seq(masked: MaskedText, tokenizer, *, max_source: int = 240, max_target: int = 35) -> dict:
    """Encode a :class:`MaskedText` as SANTA's trainer does: ``input_ids``, ``attention_mask``, ``labels``.

    Both sides get the tokenizer's special tokens (``</s>`` for T5; ``<s> ... </s>`` for
    CodeT5's tokenizer), are truncated to their lengths with the end token kept, and
    padded to exactly those lengths; padded label positions are -100. Lists of ints, one
    example; stack them for a batch. Like SANTA, truncation is not reconciled: a sentinel
    cut off the end of a long source still has its entity in the target.
    """
    if tokenizer.pad_token_id is None:
        raise ValueError(f"tokenizer {_tokenizer_name(tokenizer)!r} has no pad token; seq2seq examples are padded")
    ids = sentinel_token_ids(tokenizer, masked.masked + 1, sentinel=masked.sentinel)
    src = tokenizer(masked.source, max_length=max_source, truncation=True, padding="max_length")
    tgt = tokenizer(masked.target, max_length=max_target, truncation=True, padding="max_length")
    if ids[0] not in tgt["input_ids"]:
        # the token exists but the tokenizer does not split it out of running text
        raise ValueError(
            f"tokenizer {_tokenizer_name(tokenizer)!r} does not encode {masked.sentinel.format(0)!r} as one "
            "token in text; add the sentinels as special tokens"
        )
    labels = [i if keep else IGNORE_INDEX for i, keep in zip(tgt["input_ids"], tgt["attention_mask"])]
    return {"input_ids": list(src["input_ids"]), "attention_mask": list(src["attention_mask"]), "labels": labels}


# --------------------------------------------------------------------------- whole-entity MLM


def whole_entity_mlm(
    text: str,
    entities: Sequence[Entity],
    tokenizer,
    *,
    max_length: int = 256,
    mask_ratio: float | None = None,
    seed: int | None = None,
) -> dict:
    """MEP for an MLM encoder: every token touching a masked entity becomes the mask token.

    A token is masked when its character offsets overlap an entity occurrence, so an
    identifier split into several word pieces is hidden whole, in every occurrence, and
    the model cannot recover it from a visible piece or a visible repeat. Masked tokens
    all become the mask token (no BERT 80/10/10), as sentinels replace entities outright
    in the seq2seq variant. Special tokens are never masked. By default every entity is
    masked, like the seq2seq variant; ``mask_ratio`` masks a seeded random share of the
    distinct entities instead (:func:`sample_entities`). Returns the tokenizer's fields
    (``input_ids``, ``attention_mask``, ...) unpadded, plus ``labels``: the original id at
    masked positions, -100 elsewhere (all -100 when no entity survives truncation; skip
    such examples, their loss is undefined).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer {_tokenizer_name(tokenizer)!r} is not a fast tokenizer: whole-entity masking needs "
            "character offsets (return_offsets_mapping); load it with use_fast=True"
        )
    if tokenizer.mask_token_id is None:
        raise ValueError(f"tokenizer {_tokenizer_name(tokenizer)!r} has no mask token, so it cannot do MLM")
    spans = resolve_spans(text, entities)
    if mask_ratio is not None:
        spans = sample_entities(spans, mask_ratio, seed=seed)
    enc = tokenizer(
        text, max_length=max_length, truncation=True,
        return_offsets_mapping=True, return_special_tokens_mask=True,
    )
    # spans never overlap, so their ends are sorted too and one bisect finds the candidate
    ends = [e.end for e in spans]
    input_ids, labels = list(enc["input_ids"]), [IGNORE_INDEX] * len(enc["input_ids"])
    for i, ((start, end), special) in enumerate(zip(enc["offset_mapping"], enc["special_tokens_mask"])):
        if special or end <= start:
            continue
        j = bisect.bisect_right(ends, start)
        if j < len(spans) and spans[j].start < end:
            labels[i] = input_ids[i]
            input_ids[i] = tokenizer.mask_token_id
    out: dict[str, Any] = {k: list(v) for k, v in enc.items() if k not in ("offset_mapping", "special_tokens_mask")}
    out["input_ids"], out["labels"] = input_ids, labels
    return out


# --------------------------------------------------------------------------- random spans (T5)


def _random_segmentation(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """Lengths of a uniformly random split of ``num_items`` into ``num_segments`` non-empty runs."""
    cuts = np.sort(rng.choice(num_items - 1, size=num_segments - 1, replace=False)) + 1
    return np.diff(np.concatenate([[0], cuts, [num_items]]))


def random_spans_mask(
    length: int, *, noise_density: float = 0.15, mean_span_length: float = 3.0, rng
) -> np.ndarray:
    """T5's noise mask: ``length`` booleans, True for tokens to corrupt.

    As ``random_spans_noise_mask`` in T5's preprocessors (and its numpy port in
    transformers' ``run_t5_mlm_flax.py``): noise tokens = round(length * noise_density)
    clamped to [1, length - 1]; noise spans = max(1, round(noise tokens / mean_span_length));
    noise and non-noise tokens are each split uniformly at random into that many
    non-empty runs, interleaved starting with non-noise. So the first token is never
    noise, noise spans are never adjacent, and the last span is always noise. Rounding
    is half-to-even like numpy's and TensorFlow's. Lengths below 2 are computed as 2
    and cut back, as T5 does. One guard T5 lacks: spans are capped at the non-noise
    count, which only binds when noise_density is above about one half, where T5's
    segmentation would fail. ``rng`` is a ``numpy.random.Generator`` or a seed.
    """
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    if not 0.0 <= noise_density < 1.0:
        raise ValueError(f"noise_density must be in [0, 1), got {noise_density}")
    if mean_span_length <= 0:
        raise ValueError(f"mean_span_length must be positive, got {mean_span_length}")
    rng = np.random.default_rng(rng)
    if length == 0 or noise_density == 0.0:
        return np.zeros(length, dtype=bool)
    n = max(length, 2)
    num_noise = min(max(int(np.round(n * noise_density)), 1), n - 1)
    num_nonnoise = n - num_noise
    num_spans = min(max(int(np.round(num_noise / mean_span_length)), 1), num_nonnoise)
    noise_lengths = _random_segmentation(num_noise, num_spans, rng)
    nonnoise_lengths = _random_segmentation(num_nonnoise, num_spans, rng)
    run_lengths = np.stack([nonnoise_lengths, noise_lengths], axis=1).reshape(-1)
    mask = np.repeat(np.tile([False, True], num_spans), run_lengths)
    return mask[:length]


def noise_spans(mask: Sequence[bool] | np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of True in ``mask``, in order."""
    m = np.concatenate([[False], np.asarray(mask, dtype=bool), [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(m))
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2])]


def span_corrupt(
    input_ids: Sequence[int] | np.ndarray,
    mask: Sequence[bool] | np.ndarray,
    sentinel_ids: Sequence[int],
    *,
    eos_id: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """T5 span corruption: each noise span becomes one sentinel in the source; the target
    lists ``sentinel_i`` followed by span i's tokens, then a closing sentinel.

    ``sentinel_ids[i]`` is the id of ``<extra_id_i>`` (see :func:`sentinel_token_ids`);
    one more than the number of spans is needed. The closing sentinel is always written,
    so span-mask targets have the same shape as SANTA's entity targets and the ablation
    differs only in what is masked. (T5's own preprocessors write a sentinel for every
    non-noise run, and as their masks end in noise, their targets end without one.)

    EOS: ``input_ids`` must be content only, without the tokenizer's end token, so the
    mask never hides it; pass ``eos_id`` to append it to both source and target, as T5
    does after corruption.
    """
    ids = np.asarray(input_ids, dtype=np.int64)
    noise = np.asarray(mask, dtype=bool)
    if ids.ndim != 1 or noise.shape != ids.shape:
        raise ValueError(f"input_ids and mask must be 1-D of the same length, got {ids.shape} and {noise.shape}")
    if eos_id is not None and len(ids) and ids[-1] == eos_id:
        raise ValueError(
            "input_ids end with the EOS token: mask the content without it and pass eos_id to re-append it"
        )
    spans = noise_spans(noise)
    if len(sentinel_ids) < len(spans) + 1:
        raise ValueError(
            f"{len(spans)} noise spans need {len(spans) + 1} sentinels (one closing), only {len(sentinel_ids)} given"
        )
    source: list[np.ndarray | list[int]]  # slices of the ids and single tokens, joined at the end
    target: list[np.ndarray | list[int]]
    source, target, pos = [], [], 0
    for i, (start, end) in enumerate(spans):
        source += [ids[pos:start], [sentinel_ids[i]]]
        target += [[sentinel_ids[i]], ids[start:end]]
        pos = end
    source.append(ids[pos:])
    target.append([sentinel_ids[len(spans)]])
    if eos_id is not None:
        source.append([eos_id])
        target.append([eos_id])
    return np.concatenate(source).astype(np.int64), np.concatenate(target).astype(np.int64)


def random_span_mlm(
    input_ids: Sequence[int] | np.ndarray,
    special_mask: Sequence[int] | np.ndarray,
    mask_token_id: int,
    *,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    rng,
) -> tuple[np.ndarray, np.ndarray]:
    """Span masking for an MLM encoder: T5's random spans over the non-special tokens,
    each masked token replaced by ``mask_token_id``; returns ``(masked_ids, labels)`` with
    labels -100 outside the spans.

    ``special_mask`` marks positions never to mask (CLS, SEP, padding: a tokenizer's
    ``special_tokens_mask``). Spans are laid over the remaining positions in order, so
    they are contiguous in the sequence when special tokens sit only at its ends.
    """
    ids = np.asarray(input_ids, dtype=np.int64)
    special = np.asarray(special_mask, dtype=bool)
    if ids.ndim != 1 or special.shape != ids.shape:
        raise ValueError(
            f"input_ids and special_mask must be 1-D of the same length, got {ids.shape} and {special.shape}"
        )
    candidates = np.flatnonzero(~special)
    noise = random_spans_mask(len(candidates), noise_density=noise_density, mean_span_length=mean_span_length, rng=rng)
    positions = candidates[noise]
    labels = np.full_like(ids, IGNORE_INDEX)
    labels[positions] = ids[positions]
    masked = ids.copy()
    masked[positions] = mask_token_id
    return masked, labels
