"""Corruption objectives: the passage is corrupted, the backbone predicts what was taken out.

The corrupted passage is also the one the contrastive objective encodes (SANTA runs one
forward for both losses), so ``corrupt`` returns the whole passage batch: input ids,
attention mask and ``labels`` (-100 where nothing is predicted).

Each objective has a variant per capability: ``seq2seq`` backbones (T5, CodeT5) generate
the removed pieces after sentinels; ``mlm`` backbones (BERT-like) predict ``[MASK]``ed
tokens in place. The masking itself lives in ``structret_objectives.masking``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

import numpy as np
import torch

from structret.plugin import ObjectiveDefaults, check_entities
from structret.plugin import LMWarmupOptions, resolve_options
from structret.errors import ObjectiveError
from structret.records import CodeRecord, Entity, ItemRecord
from structret_objectives import masking
from structret_objectives import options as opts

_VARIANTS = ("seq2seq", "mlm")  # preference order when a backbone has both
SENTINELS = 100  # <extra_id_0> ... <extra_id_99>, as T5 and CodeT5 have
IGNORE = -100  # label positions the loss skips
_WHAT = {"encoder": "encode", "seq2seq": "generate text", "mlm": "fill in masked tokens",
         "structure-attention": "attend along structure"}


def _variant(name: str, backbone: Any) -> str:
    capabilities = set(getattr(backbone, "capabilities", ()))
    for variant in _VARIANTS:
        if variant in capabilities:
            return variant
    can = " or ".join(_WHAT.get(c, c) for c in sorted(capabilities)) or "nothing we know of"
    raise ObjectiveError(
        f"{name} needs a backbone that can predict tokens (seq2seq or mlm); "
        f"'{backbone.name}' can only {can}. Use a T5-family backbone, or a BERT-like one "
        f"whose architecture has a masked-LM head in transformers."
    )


def _check_tokenizer(name: str, variant: str, backbone: Any) -> None:
    tokenizer = backbone.tokenizer
    if variant == "seq2seq":
        try:  # T5 and CodeT5 tokenizers have 100; MEP uses up to 100 distinct entities
            masking.sentinel_token_ids(tokenizer, SENTINELS)
        except ValueError as exc:
            raise ObjectiveError(f"{name} cannot run on '{backbone.name}': {exc}") from None
    elif tokenizer.mask_token_id is None or not getattr(tokenizer, "is_fast", False):
        raise ObjectiveError(
            f"{name} on '{backbone.name}' needs a fast tokenizer with a mask token (masking follows "
            f"character offsets); load the model's tokenizer.json."
        )


def _collate(rows: list[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad one-example dicts into tensors: ids with ``pad_id``, labels with -100, masks with 0."""
    width = max(len(row["input_ids"]) for row in rows)
    label_width = max(len(row["labels"]) for row in rows)
    fill = {"input_ids": pad_id, "labels": IGNORE}
    batch = {}
    for key in rows[0]:
        size = label_width if key == "labels" else width
        batch[key] = torch.tensor([list(row[key]) + [fill.get(key, 0)] * (size - len(row[key])) for row in rows])
    return batch


def _shift(entities: Sequence[Entity], offset: int) -> list[Entity]:
    return [Entity(e.start + offset, e.end + offset, e.text, e.kind) for e in entities]


class EntityMasking(ObjectiveDefaults):
    """Masked entity prediction (SANTA 3.2.2).

    seq2seq: each distinct entity becomes one sentinel everywhere it occurs (first-seen
    order, at most 99 so the closing sentinel exists); the labels list ``<extra_id_i> entity_i``. mlm: every token of
    every entity occurrence becomes ``[MASK]`` and is predicted in place.
    Entities come from a named extractor; ``auto`` picks SANTA's per kind of record:
    Python code -> python-tokenize, other code -> tree-sitter, products -> title-overlap.
    """

    name = "mep"
    role = "corruption"
    needs = frozenset(_VARIANTS)  # any one of these capabilities

    def __init__(self, extractor: str = "auto", entity_rate: float = 1.0,
                 lm_warmup_options: LMWarmupOptions | None = None, contrastive_input: str = "masked"):
        if not 0 < entity_rate <= 1:
            raise ObjectiveError(f"mep: entity_rate is the share of entities masked, in (0, 1]; got {entity_rate}")
        self.contrastive_input = _contrastive_input(self.name, contrastive_input)
        self.extractor = extractor
        self.entity_rate = entity_rate
        # the trainer's LM-head warm-up (structret.training.warmup)
        self.lm_warmup_options = lm_warmup_options or LMWarmupOptions()
        self._extractors: dict[str, Any] = {}
        self._used: dict[str, str] = {}  # language ('' for none) -> extractor: what the run records
        # what was masked, and what could not be: the trainer reports these at the end
        self.counts: Counter = Counter()

    def check(self, backbone: Any) -> None:
        variant = _variant(self.name, backbone)
        _check_tokenizer(self.name, variant, backbone)  # the extractor's name: checked by its options model

    def extractor_for(self, record: Any) -> str:
        if self.extractor != "auto":
            return self.extractor
        if isinstance(record, CodeRecord):
            return "python-tokenize" if record.language.lower() == "python" else "tree-sitter"
        if isinstance(record, ItemRecord):
            return "title-overlap"
        raise ObjectiveError(
            "mep with extractor = \"auto\" needs to know what each passage is (code with a language, or a "
            "product), but these training examples carry only text (Tevatron-format lines, or hard "
            "negatives). Name an extractor: --extractor NAME (structret plugins --kind extractor lists them)."
        )

    def entities(self, text: str, record: Any) -> list[Entity]:
        """Entity spans into ``text``, the passage made from ``record``."""
        name = self.extractor_for(record)
        self._used.setdefault(str(getattr(record, "language", "") or "").lower(), name)
        if name not in self._extractors:
            from structret.plugin import get_registry

            self._extractors[name] = get_registry().create("extractor", name)
        extractor = self._extractors[name]
        if isinstance(record, ItemRecord) and hasattr(extractor, "extract_record") and text.endswith(record.content):
            # product extractors read the title beside the description (SANTA's rule) and
            # give spans into the description, which ends the passage
            return _shift(extractor.extract_record(record), len(text) - len(record.content))
        return check_entities(name, text, extractor.extract(text, language=getattr(record, "language", None) or None))

    def corrupt(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
                label_max_length: int, rngs: Sequence[random.Random]) -> dict[str, torch.Tensor]:
        """Every entity masked (SANTA's paper), or with ``entity_rate`` < 1 a share of the distinct
        entities, drawn with each passage's own ``rngs`` entry (so resumed and multi-process runs
        mask alike)."""
        tokenizer = backbone.tokenizer
        prefix = backbone.tokenize.prefixes["document"]
        seq2seq = _variant(self.name, backbone) == "seq2seq"
        rows = []
        for text, record, rng in zip(texts, records, rngs, strict=True):
            # entities are found in the text itself, then moved past the backbone's prefix
            found = _shift(self._sampled(self.entities(text, record), rng), len(prefix))
            self.counts["passages"] += 1
            self.counts["passages without entities"] += not found
            if seq2seq:
                masked = masking.sentinel_mask(prefix + text, found, max_sentinels=SENTINELS)
                self.counts["entities masked"] += masked.masked
                self.counts["entities left unmasked (sentinel cap)"] += masked.left_unmasked
                rows.append(masking.tokenize_seq2seq(masked, tokenizer, max_source=max_length, max_target=label_max_length))
            else:
                row = masking.whole_entity_mlm(prefix + text, found, tokenizer, max_length=max_length)
                self.counts["tokens masked"] += sum(label != -100 for label in row["labels"])
                rows.append(row)
        return _collate(rows, tokenizer.pad_token_id)

    def _sampled(self, entities: list[Entity], rng: random.Random) -> list[Entity]:
        """Each distinct entity (every occurrence of one name goes together, as one sentinel
        stands for all of them) kept with probability ``entity_rate``."""
        if self.entity_rate >= 1:
            return entities
        names = dict.fromkeys(e.text for e in entities)  # first-seen order: the draws do not depend on sets
        kept = {name for name in names if rng.random() < self.entity_rate}
        self.counts["entities left unmasked (entity_rate)"] += len(names) - len(kept)
        return [e for e in entities if e.text in kept]

    def entity_extractors(self) -> dict[str, str]:
        """The extractor of each language the passages had ('' for products), as used (contracts.OPTIONAL)."""
        if not self._used and self.extractor != "auto":
            return {"": self.extractor}  # resumed after the last step: nothing was masked in this process
        return dict(self._used)

    def report(self) -> dict[str, int]:
        """Counts so far, with the texts each extractor could not parse (skipped, never raised)."""
        counts = dict(self.counts)
        for name, extractor in self._extractors.items():
            failed = sum(getattr(extractor, "failures", {}).values())
            if failed:
                counts[f"unparsable for {name}"] = failed
        return counts

    def __repr__(self) -> str:
        return f"mep(extractor={self.extractor!r}, entity_rate={self.entity_rate})"


class SpanMasking(ObjectiveDefaults):
    """Random span corruption (T5: 15% of tokens in spans of mean length 3, each span one
    sentinel) on seq2seq backbones; the same spans ``[MASK]``ed in place on mlm backbones."""

    name = "span-mask"
    role = "corruption"
    needs = frozenset(_VARIANTS)

    def __init__(self, noise_density: float = 0.15, mean_span_length: float = 3.0,
                 lm_warmup_options: LMWarmupOptions | None = None, contrastive_input: str = "masked"):
        self.contrastive_input = _contrastive_input(self.name, contrastive_input)
        if not 0 < noise_density < 1:
            raise ObjectiveError(f"span-mask: noise_density is a fraction in (0, 1), got {noise_density}")
        if not mean_span_length >= 1:
            raise ObjectiveError(f"span-mask: mean_span_length must be at least 1, got {mean_span_length}")
        self.noise_density = noise_density
        self.mean_span_length = mean_span_length
        self.lm_warmup_options = lm_warmup_options or LMWarmupOptions()  # structret.training.warmup

    def check(self, backbone: Any) -> None:
        _check_tokenizer(self.name, _variant(self.name, backbone), backbone)

    def corrupt(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
                label_max_length: int, rngs: Sequence[random.Random]) -> dict[str, torch.Tensor]:
        """Targets are not cut to ``label_max_length``: the noise density already fixes their
        length (about 0.2 x the passage's tokens), and a cut target teaches nothing."""
        tokenizer = backbone.tokenizer
        prefix = backbone.tokenize.prefixes["document"]
        seq2seq = _variant(self.name, backbone) == "seq2seq"
        spans = {"noise_density": self.noise_density, "mean_span_length": self.mean_span_length}
        rows = []
        for text, rng in zip(texts, rngs, strict=True):
            noise_rng = np.random.default_rng(rng.getrandbits(64))
            if seq2seq:
                # content only: the end token is appended after corruption, never masked
                ids = tokenizer(prefix + text, add_special_tokens=False, truncation=True,
                                max_length=max_length - 1)["input_ids"]
                mask = masking.random_spans_mask(len(ids), rng=noise_rng, **spans)
                sentinels = masking.sentinel_token_ids(tokenizer, len(masking.noise_spans(mask)) + 1)
                source, target = masking.span_corrupt(ids, mask, sentinels, eos_id=tokenizer.eos_token_id)
                rows.append({"input_ids": source.tolist(), "attention_mask": [1] * len(source), "labels": target.tolist()})
            else:
                encoded = tokenizer(prefix + text, truncation=True, max_length=max_length, return_special_tokens_mask=True)
                masked, labels = masking.random_span_mlm(
                    encoded["input_ids"], encoded["special_tokens_mask"], tokenizer.mask_token_id, rng=noise_rng, **spans
                )
                row = {k: list(v) for k, v in encoded.items() if k != "special_tokens_mask"}
                row["input_ids"], row["labels"] = masked.tolist(), labels.tolist()
                rows.append(row)
        return _collate(rows, tokenizer.pad_token_id)

    def __repr__(self) -> str:
        return f"span-mask(noise_density={self.noise_density}, mean_span_length={self.mean_span_length})"


# The registry hands each factory its validated options (structret_objectives.options); Python code
# may give single ones as keywords instead. The options are an LMWarmupOptions: the trainer's
# LM-head warm-up reads their lm_warmup* fields.
def mep(options: opts.EntityMasking | None = None, **given: Any) -> EntityMasking:
    options = resolve_options(opts.EntityMasking, options, given, what="objective 'mep'")
    return EntityMasking(options.extractor, options.entity_rate, options, options.contrastive_input)


def span_mask(options: opts.SpanMasking | None = None, **given: Any) -> SpanMasking:
    options = resolve_options(opts.SpanMasking, options, given, what="objective 'span-mask'")
    return SpanMasking(options.noise_density, options.mean_span_length, options, options.contrastive_input)


def _contrastive_input(name: str, value: str) -> str:
    if value not in ("masked", "unmasked"):
        raise ObjectiveError(f"{name}: contrastive_input is 'masked' (SANTA's one forward) or 'unmasked' "
                             f"(a second forward of the clean passage), got {value!r}")
    return value
