"""ATTEMPT's aspect-content mutual prediction, and the MLM baselines it is compared with.

``aspect-mlm`` (Sun et al., CIKM 2023, Eq. 4): every item becomes up to three rows of one
batch, built from the :mod:`structret_products.linearizers` aspect layout::

    mlm   [CLS] t_c~ [SEP]                              content alone, content masked
    a2c   [CLS] [A1] t_a1 ... [SEP] [C] t_c~ [SEP]      aspects whole, content masked
    c2a   [CLS] [A1] t_a1~ ... [SEP] [C] t_c [SEP]      content whole, aspect text masked

    L = L_mlm + lambda (L_a2c + L_c2a),   each a token mean over its own view's masked tokens

How the rows are made follows ATTEMPT's released collator (``src/tevatron/data.py``,
``PreTrainCollator``), where the paper is silent:

* **Masking** is BERT's as Hugging Face's collator does it: each candidate token is
  chosen with probability ``ratio`` (a Bernoulli draw, so the ratio holds on average, not
  per row), and a chosen token becomes ``[MASK]`` 80% of the time, a random token 10%,
  itself 10%; all are predicted. Random tokens are drawn from the vocabulary minus the
  special tokens (Hugging Face draws from all of it), so no ``[SEP]`` or indicator is
  ever planted in the text.
* **Candidates** are only the tokens of the segment a view predicts: content in mlm and
  a2c, aspect text in c2a. ``[CLS]``, ``[SEP]``, padding, the indicators and a backbone's
  text prefix are never masked or replaced.
* **Each piece is tokenized alone** and the rows are assembled from ids; since the
  indicators and ``[SEP]`` are special tokens, this gives the same ids as tokenizing
  the layout's text (a test checks it).
* **Truncation** cuts the content (then, if still too long, aspect text from the last
  aspect back), never an indicator; all three views see the same content tokens, as in
  ATTEMPT, whose content view is the truncated content of the joint input.
* **The content view has no indicators**, not even ``[C]``: "MLM on the item content
  without any auxiliary information", and the code feeds it ``[CLS] content [SEP]``.
* **Ratios**: item content 0.15, query content 0.3, aspect text 0.6, lambda 1.0
  (Section 4.3).
* **Loss weighting**: the paper's Eq. 4 has three separate means. The released code puts
  all masked tokens of the three rows into one cross-entropy mean (so each view weighs as
  much as it has masked tokens). ``reduction="per-view"`` (default) gives Eq. 4;
  ``"pooled"`` gives the code's single mean (with lambda on the a2c/c2a tokens).
  ``corrupt`` returns ``label_weights``: weight / n_view on each masked token of a view,
  0 elsewhere, so ``sum(label_weights * token cross-entropy)`` is the loss.

Rows are built from the record's own fields (title, content, aspects), so the passage text
the trainer hands over (``record.text()``) is used only when there is no item or query record.

Queries: ATTEMPT pretrains on queries with their aspects too (content ratio 0.3). A
``Query`` passed as a record gets the query ratio and the backbone's query prefix.
A passage whose record is ``None`` (Tevatron lines, hard negatives) or not an item or query
gets one plain MLM row of its text at the item content ratio, counted.

Items whose aspects are all empty have nothing for c2a to predict: that row is left out
and counted. An item or query with no content tokens gets no mlm row (counted).

**Not a partner for a contrastive objective**: one passage becomes up to three rows, so
the vectors of the corrupted batch no longer line up with the queries. ATTEMPT pretrains
with these losses alone and fine-tunes afterwards.

``mlm`` is one row per passage: ``layout="content"`` is BIBERT (plain MLM on the content);
``layout="aspects"`` is BIBERT-C (the same MLM on ATTEMPT's concatenated input, aspect text
masked at the content ratio); adding ``aspect_mask_ratio=0.6`` is BIBERT-C(A) (aspect text
at its own, higher ratio). Indicators and special tokens are never masked in either.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import torch

from structret.plugin import ObjectiveDefaults
from structret.errors import PluginError
from structret.plugin import LMWarmupOptions, resolve_options
from structret.errors import ObjectiveError
from structret.records import ItemRecord, Query
from structret_products import options as opts
from structret_products.linearizers import (
    CONTENT_FIELDS,
    CONTENT_INDICATOR,
    VALUE_SEPARATOR,
    _check_aspects,
    _check_fields,
    aspect_text,
    content_text,
    indicator_token,
    indicator_tokens,
    record_aspects,
)

IGNORE = -100
_NAME_SEPARATORS = re.compile(r"[\W_]+")  # category_1 -> "category 1": the words an indicator starts as
DEFAULT_ASPECTS = ("brand", "color")  # what the esci reader fills in; MA-Amazon adds category levels
VIEWS = ("mlm", "a2c", "c2a")


@dataclass
class Row:
    """One corrupted row: ``input_ids`` (masked), ``original`` ids, ``labels`` (-100 = not
    predicted), and for every position its ``kinds``: ``special`` ([CLS]/[SEP]), ``prefix``,
    ``indicator``, ``aspect`` or ``content``. ``view`` is ``mlm``, ``a2c`` or ``c2a``."""

    view: str
    input_ids: list[int]
    original: list[int]
    labels: list[int]
    kinds: list[str]
    record_kind: str = "item"  # item, query or text (no record)

    @property
    def masked(self) -> int:
        return sum(label != IGNORE for label in self.labels)


@overload
def _ratio(name: str, value: Any) -> float: ...
@overload
def _ratio(name: str, value: Any, *, allow_none: bool) -> float | None: ...
def _ratio(name: str, value: Any, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ObjectiveError(f"{name} is a fraction in (0, 1), got {value!r}")
    return float(value)


def _check_mlm_backbone(name: str, backbone: Any) -> None:
    capabilities = set(getattr(backbone, "capabilities", ()))
    if "mlm" not in capabilities:
        has = ", ".join(sorted(capabilities)) or "none"
        raise ObjectiveError(
            f"{name} needs a backbone with a masked-LM head (capability 'mlm'); "
            f"'{getattr(backbone, 'name', backbone)}' has {has}. Use a BERT-like encoder (hf-encoder, bert-base)."
        )
    tokenizer = backbone.tokenizer
    missing = [t for t in ("mask", "cls", "sep", "pad") if getattr(tokenizer, f"{t}_token_id", None) is None]
    if missing:
        raise ObjectiveError(f"{name} needs a tokenizer with [MASK], [CLS], [SEP] and padding tokens; "
                             f"'{getattr(backbone, 'name', backbone)}''s has no {', '.join(missing)} token")


def _add_indicators(name: str, backbone: Any, tokens: list[str], words: dict[str, str] | None = None) -> None:
    """Add the indicator ``tokens``; with ``words`` ({token: text}), each token new to the
    vocabulary starts as the mean embedding of its text's word pieces instead of a random row."""
    add = getattr(backbone, "add_special_tokens", None)
    if not callable(add):
        raise ObjectiveError(
            f"{name} needs to add its indicator tokens ({', '.join(tokens)}) to the tokenizer of "
            f"'{getattr(backbone, 'name', backbone)}' and resize its embeddings, but that backbone has no "
            f"add_special_tokens(tokens) method."
        )
    new = [t for t in tokens if t not in backbone.tokenizer.get_vocab()]  # a trained run's stay as trained
    add(list(tokens))
    if words and new:
        start_as = getattr(backbone, "init_token_embeddings", None)
        if not callable(start_as):
            raise ObjectiveError(f"{name}: indicator_init = \"words\" needs a backbone with "
                                 f"init_token_embeddings({{token: text}}); '{getattr(backbone, 'name', backbone)}' "
                                 f"has none. Use indicator_init = \"random\".")
        start_as({t: words[t] for t in new})
    tokenizer = backbone.tokenizer
    ids = tokenizer.convert_tokens_to_ids(list(tokens))
    bad = [t for t, i in zip(tokens, ids) if i is None or i == tokenizer.unk_token_id]
    if bad:
        raise ObjectiveError(f"{name}: after add_special_tokens, '{getattr(backbone, 'name', backbone)}''s "
                             f"tokenizer still has no token {bad[0]}")


class _Layouts(ObjectiveDefaults):
    """Token-id pieces of the aspect layout, and BERT masking over chosen pieces."""

    name = ""
    role = "corruption"
    needs = frozenset({"mlm"})

    def __init__(self, aspects: Iterable[str], content_fields: Iterable[str], content_mask_ratio: float,
                 query_mask_ratio: float, indicator_init: str = "random",
                 lm_warmup_options: LMWarmupOptions | None = None):
        if indicator_init not in ("random", "words"):
            raise ObjectiveError(f"{self.name}: indicator_init is 'random' or 'words', got {indicator_init!r}")
        self.indicator_init = indicator_init
        self.lm_warmup_options = lm_warmup_options or LMWarmupOptions()  # structret.training.warmup
        try:
            checked = _check_aspects(aspects)
            self.content_fields = _check_fields(content_fields)
        except PluginError as exc:  # the linearizer's checks, said as an objective
            raise ObjectiveError(f"{self.name}: {exc}") from None
        if checked is None:
            raise ObjectiveError(
                f"{self.name} needs a fixed aspects list (its indicator tokens are added to the tokenizer "
                f"before training starts), e.g. aspects = [\"brand\", \"color\"]"
            )
        self.aspects = checked
        self.content_mask_ratio = _ratio("content_mask_ratio", content_mask_ratio)
        self.query_mask_ratio = _ratio("query_mask_ratio", query_mask_ratio)
        self.counts: Counter = Counter()
        self._vocab: tuple[int, np.ndarray] | None = None

    def special_tokens(self) -> list[str]:
        """The indicator tokens, ``[C]`` last: what ``check`` adds to the backbone's tokenizer."""
        return indicator_tokens(self.aspects)

    def indicator_words(self) -> dict[str, str] | None:
        """What each indicator starts as with ``indicator_init = "words"``: its aspect's name
        (``[CATEGORY_1]`` <- "category 1"), ``[C]`` <- "content"; None for random rows."""
        if self.indicator_init != "words":
            return None
        words = {indicator_token(a): _NAME_SEPARATORS.sub(" ", a).strip() for a in self.aspects}
        return {**words, CONTENT_INDICATOR: "content"}

    # --- pieces -----------------------------------------------------------------------

    def _ids(self, tokenizer: Any, text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _prefix(self, backbone: Any, kind: str) -> list[int]:
        prefixes = getattr(getattr(backbone, "tokenize", None), "prefixes", None) or {}
        return self._ids(backbone.tokenizer, prefixes.get(kind, ""))

    def pieces(self, record: Any, tokenizer: Any) -> tuple[list[tuple[str, list[int]]], list[int]]:
        """``(aspect part, content ids)``: the aspect part is ``(kind, ids)`` pieces
        ``[A1] t_a1 ... [SEP] [C]`` (kinds ``indicator``, ``aspect``, ``special``)."""
        own = record_aspects(record)
        for name in own:
            if name not in self.aspects:
                self.counts["aspects left out (not in the aspects list)"] += 1
        part: list[tuple[str, list[int]]] = []
        for name in self.aspects:
            part.append(("indicator", [tokenizer.convert_tokens_to_ids(indicator_token(name))]))
            part.append(("aspect", self._ids(tokenizer, aspect_text(own.get(name), VALUE_SEPARATOR))))
        part.append(("special", [tokenizer.sep_token_id]))
        part.append(("indicator", [tokenizer.convert_tokens_to_ids(CONTENT_INDICATOR)]))
        content = self._ids(tokenizer, content_text(record, self.content_fields) or "")
        return part, content

    def _fit(self, part: list[tuple[str, list[int]]], content: list[int], budget: int):
        """Cut content, then aspect text from the last aspect back, to ``budget`` tokens; never an indicator."""
        over = sum(len(ids) for _, ids in part) + len(content) - budget
        if over <= 0:
            return part, content
        self.counts["rows truncated"] += 1
        cut = min(over, len(content))
        content, over = content[:len(content) - cut], over - cut
        part = [(kind, list(ids)) for kind, ids in part]
        for kind, ids in reversed(part):
            if over <= 0:
                break
            if kind == "aspect":
                cut = min(over, len(ids))
                del ids[len(ids) - cut:]
                over -= cut
        if over > 0:
            raise ObjectiveError(
                f"{self.name}: max_length is too short for the {len(self.aspects)} aspect indicators plus "
                f"[CLS], [SEP], [C] and [SEP]; raise passage_max_len"
            )
        return part, content

    # --- masking ----------------------------------------------------------------------

    def _random_vocab(self, tokenizer: Any) -> np.ndarray:
        size = len(tokenizer)
        if self._vocab is None or self._vocab[0] != size:
            special = set(tokenizer.all_special_ids)
            self._vocab = (size, np.array([i for i in range(size) if i not in special], dtype=np.int64))
        return self._vocab[1]

    def row(self, view: str, pieces: list[tuple[str, list[int]]], ratios: dict[str, float], tokenizer: Any,
            rng: np.random.Generator, record_kind: str) -> Row:
        """``[CLS] pieces [SEP]``, tokens of each kind in ``ratios`` masked BERT-style at its ratio."""
        original, kinds = [tokenizer.cls_token_id], ["special"]
        for kind, ids in pieces:
            original += ids
            kinds += [kind] * len(ids)
        original.append(tokenizer.sep_token_id)
        kinds.append("special")
        ids, labels = list(original), [IGNORE] * len(original)
        probability = np.array([ratios.get(k, 0.0) for k in kinds])
        chosen = np.flatnonzero(rng.random(len(kinds)) < probability)
        vocab = self._random_vocab(tokenizer)
        for i, draw in zip(chosen, rng.random(len(chosen))):
            labels[i] = original[i]
            if draw < 0.8:
                ids[i] = tokenizer.mask_token_id
            elif draw < 0.9:
                ids[i] = int(vocab[rng.integers(len(vocab))])
        return Row(view, ids, original, labels, kinds, record_kind)

    # --- the batch --------------------------------------------------------------------

    def _passages(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, max_length: int,
                  rngs: Sequence[random.Random]):
        """Per passage: text, record, its RNG, its kind, the backbone's prefix ids, its content
        mask ratio and the token budget left for aspects and content."""
        for text, record, seed in zip(texts, records, rngs, strict=True):
            kind = self._record_kind(record)
            prefix = self._prefix(backbone, "query" if kind == "query" else "document")
            ratio = self.query_mask_ratio if kind == "query" else self.content_mask_ratio
            yield (text, record, np.random.default_rng(seed.getrandbits(64)), kind, prefix, ratio,
                   max_length - 2 - len(prefix))

    def _record_kind(self, record: Any) -> str:
        if isinstance(record, Query):
            return "query"
        if isinstance(record, ItemRecord):
            return "item"
        self.counts["passages without an item record (plain MLM on the text)"] += 1
        return "text"

    def rows(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
             rngs: Sequence[random.Random]) -> list[Row]:
        raise NotImplementedError

    def label_weights(self, rows: list[Row]) -> list[list[float]] | None:
        return None

    def corrupt(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
                label_max_length: int, rngs: Sequence[random.Random]) -> dict[str, torch.Tensor]:
        """The corrupted rows as a padded batch with ``labels`` (and ``label_weights`` when
        the loss is not a plain token mean). ``label_max_length`` is unused: labels sit in place."""
        tokenizer = backbone.tokenizer
        rows = self.rows(texts, records, backbone, max_length=max_length, rngs=rngs)
        if not rows:
            raise ObjectiveError(f"{self.name}: no passage of this batch had any text to mask")
        for row in rows:
            self.counts[f"rows {row.view}"] += 1
            self.counts[f"tokens masked {row.view}"] += row.masked
        width = max(len(r.input_ids) for r in rows)
        pad = width - np.array([len(r.input_ids) for r in rows])
        batch = {
            "input_ids": torch.tensor([r.input_ids + [tokenizer.pad_token_id] * p for r, p in zip(rows, pad)]),
            "attention_mask": torch.tensor([[1] * len(r.input_ids) + [0] * p for r, p in zip(rows, pad)]),
        }
        if "token_type_ids" in getattr(tokenizer, "model_input_names", ()):
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        batch["labels"] = torch.tensor([r.labels + [IGNORE] * p for r, p in zip(rows, pad)])
        weights = self.label_weights(rows)
        if weights is not None:
            batch["label_weights"] = torch.tensor([w + [0.0] * p for w, p in zip(weights, pad)], dtype=torch.float32)
        return batch


class AspectMLM(_Layouts):
    """ATTEMPT's pretraining objective (see the module docstring)."""

    name = "aspect-mlm"
    standalone = True  # up to three rows per passage: its vectors match no query

    def __init__(
        self,
        aspects: Iterable[str] = DEFAULT_ASPECTS,
        content_mask_ratio: float = 0.15,
        query_mask_ratio: float = 0.3,
        aspect_mask_ratio: float = 0.6,
        mutual_weight: float = 1.0,
        reduction: str = "per-view",
        content_fields: Iterable[str] = CONTENT_FIELDS,
        indicator_init: str = "random",
        lm_warmup_options: LMWarmupOptions | None = None,
    ):
        super().__init__(aspects, content_fields, content_mask_ratio, query_mask_ratio, indicator_init,
                         lm_warmup_options)
        self.aspect_mask_ratio = _ratio("aspect_mask_ratio", aspect_mask_ratio)
        if isinstance(mutual_weight, bool) or not isinstance(mutual_weight, (int, float)) or mutual_weight < 0:
            raise ObjectiveError(f"mutual_weight (lambda of Eq. 4) is a number >= 0, got {mutual_weight!r}")
        self.mutual_weight = float(mutual_weight)
        if reduction not in ("per-view", "pooled"):
            raise ObjectiveError(f"reduction is 'per-view' (the paper's Eq. 4) or 'pooled' (its code), "
                                 f"got {reduction!r}")
        self.reduction = reduction

    def check(self, backbone: Any) -> None:
        _check_mlm_backbone(self.name, backbone)
        _add_indicators(self.name, backbone, self.special_tokens(), self.indicator_words())

    def rows(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
             rngs: Sequence[random.Random]) -> list[Row]:
        tokenizer = backbone.tokenizer
        rows: list[Row] = []
        for text, record, rng, kind, prefix, ratio, budget in self._passages(texts, records, backbone,
                                                                             max_length, rngs):
            if kind == "text":
                content = self._ids(tokenizer, text)[:max(budget, 0)]
                if content:
                    rows.append(self.row("mlm", [("prefix", prefix), ("content", content)], {"content": ratio},
                                         tokenizer, rng, kind))
                else:
                    self.counts["mlm rows left out (no content)"] += 1
                continue
            self.counts[f"{kind}s"] += 1
            part, content = self._fit(*self.pieces(record, tokenizer), budget)
            joint = [("prefix", prefix), *part, ("content", content)]
            if content:
                rows.append(self.row("mlm", [("prefix", prefix), ("content", content)], {"content": ratio},
                                     tokenizer, rng, kind))
                rows.append(self.row("a2c", joint, {"content": ratio}, tokenizer, rng, kind))
            else:
                self.counts["mlm and a2c rows left out (no content)"] += 1
            if any(ids for k, ids in part if k == "aspect"):
                rows.append(self.row("c2a", joint, {"aspect": self.aspect_mask_ratio}, tokenizer, rng, kind))
            else:
                self.counts["c2a rows left out (no aspect text)"] += 1
        return rows

    def label_weights(self, rows: list[Row]) -> list[list[float]]:
        """1/n_mlm on masked mlm tokens, lambda/n_view on masked a2c and c2a tokens
        (``pooled``: 1/n and lambda/n with n = all masked tokens); 0 elsewhere."""
        n: Counter[str] = Counter()
        for row in rows:
            n[row.view] += row.masked
        total = sum(n.values())
        coefficient = {"mlm": 1.0, "a2c": self.mutual_weight, "c2a": self.mutual_weight}
        out = []
        for row in rows:
            count = total if self.reduction == "pooled" else n[row.view]
            w = coefficient[row.view] / count if count else 0.0
            out.append([w if label != IGNORE else 0.0 for label in row.labels])
        return out

    def __repr__(self) -> str:
        return (f"aspect-mlm(aspects={list(self.aspects)}, content_mask_ratio={self.content_mask_ratio}, "
                f"query_mask_ratio={self.query_mask_ratio}, aspect_mask_ratio={self.aspect_mask_ratio}, "
                f"mutual_weight={self.mutual_weight}, reduction={self.reduction!r})")


class MaskedLM(_Layouts):
    """BIBERT (``layout="content"``), BIBERT-C (``layout="aspects"``) and BIBERT-C(A)
    (``layout="aspects"``, ``aspect_mask_ratio``): one row per passage, a plain token mean."""

    name = "mlm"

    def __init__(
        self,
        layout: str = "content",
        content_mask_ratio: float = 0.15,
        query_mask_ratio: float = 0.3,
        aspect_mask_ratio: float | None = None,
        aspects: Iterable[str] = DEFAULT_ASPECTS,
        content_fields: Iterable[str] = CONTENT_FIELDS,
        indicator_init: str = "random",
        lm_warmup_options: LMWarmupOptions | None = None,
    ):
        if layout not in ("content", "aspects"):
            raise ObjectiveError(f"mlm: layout is 'content' (BIBERT) or 'aspects' (BIBERT-C), got {layout!r}")
        super().__init__(aspects, content_fields, content_mask_ratio, query_mask_ratio, indicator_init,
                         lm_warmup_options)
        self.layout = layout
        self.aspect_mask_ratio = _ratio("aspect_mask_ratio", aspect_mask_ratio, allow_none=True)
        if layout == "content" and self.aspect_mask_ratio is not None:
            raise ObjectiveError("mlm: aspect_mask_ratio needs layout = \"aspects\" (BIBERT-C(A)); the "
                                 "content layout has no aspect text")

    def check(self, backbone: Any) -> None:
        _check_mlm_backbone(self.name, backbone)
        if self.layout == "aspects":
            _add_indicators(self.name, backbone, self.special_tokens(), self.indicator_words())

    def rows(self, texts: Sequence[str], records: Sequence[Any], backbone: Any, *, max_length: int,
             rngs: Sequence[random.Random]) -> list[Row]:
        tokenizer = backbone.tokenizer
        rows: list[Row] = []
        for text, record, rng, kind, prefix, ratio, budget in self._passages(texts, records, backbone,
                                                                             max_length, rngs):
            if kind == "text" or self.layout == "content":
                source = text if kind == "text" else content_text(record, self.content_fields) or ""
                pieces = [("prefix", prefix), ("content", self._ids(tokenizer, source)[:max(budget, 0)])]
                ratios = {"content": ratio}
            else:
                part, content = self._fit(*self.pieces(record, tokenizer), budget)
                pieces = [("prefix", prefix), *part, ("content", content)]
                ratios = {"content": ratio, "aspect": self.aspect_mask_ratio or ratio}
            rows.append(self.row("mlm", pieces, ratios, tokenizer, rng, kind))
        return rows

    def __repr__(self) -> str:
        return (f"mlm(layout={self.layout!r}, content_mask_ratio={self.content_mask_ratio}, "
                f"query_mask_ratio={self.query_mask_ratio}, aspect_mask_ratio={self.aspect_mask_ratio})")


# The registry hands each factory its validated options (structret_products.options); Python code
# may give single ones as keywords instead. The options are an LMWarmupOptions: the trainer's
# LM-head warm-up reads their lm_warmup* fields.
def aspect_mlm(options: opts.AspectMLM | None = None, **given: Any) -> AspectMLM:
    options = resolve_options(opts.AspectMLM, options, given, what="objective 'aspect-mlm'")
    return AspectMLM(options.aspects, options.content_mask_ratio, options.query_mask_ratio, options.aspect_mask_ratio,
                     options.mutual_weight, options.reduction, options.content_fields, options.indicator_init, options)


def mlm(options: opts.MaskedLM | None = None, **given: Any) -> MaskedLM:
    options = resolve_options(opts.MaskedLM, options, given, what="objective 'mlm'")
    return MaskedLM(options.mlm_input, options.content_mask_ratio, options.query_mask_ratio, options.aspect_mask_ratio,
                    options.aspects, options.content_fields, options.indicator_init, options)
