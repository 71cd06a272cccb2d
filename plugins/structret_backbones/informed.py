"""Khan & Jang's informed head on a Hugging Face encoder (``hf-encoder --option informed_layers=1``).

In the first ``informed_layers`` layers, head 0's attention is computed explicitly, kept
for the ``parent-attention`` loss, or (``strict``) replaced by the gold one-hot parent
rows; every other head and layer runs transformers' own SDPA kernel. This goes through
transformers' ``AttentionInterface``, so it works for any encoder whose attention modules
dispatch through it and carry a ``layer_idx`` (BERT, RoBERTa, MiniLM, ... in transformers 5).

Documents are linearized (dfs-parent by default) before tokenization; every word-piece
inherits its AST token's parent (``structret.parents.spread_parents``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from structret.errors import ModelLoadError
from structret_backbones import attention
from structret_backbones._loading import PrefixedTokenizer
from structret.plugin import NO_PARENT, gold_attention, spread_parents

IMPLEMENTATION = "structret_informed"


@dataclass
class InformedCall:
    """What one forward's attention functions share: passed to the model as a keyword,
    which transformers hands on to every attention call."""

    layers: int
    strict: bool
    parents: torch.Tensor | None
    attentions: list[torch.Tensor] = field(default_factory=list)


def informed_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                       informed: InformedCall | None = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    if informed is None or module.layer_idx >= informed.layers:
        return attention.sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = (query @ key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:  # SDPA's mask: True = may attend
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = scores.softmax(-1)
    if informed.strict:
        parents = informed.parents
        if parents is None:  # queries: no tree, so each token attends to itself
            parents = torch.full(probs.shape[:1] + probs.shape[2:3], NO_PARENT, device=probs.device)
        probs = torch.cat([gold_attention(parents).to(probs.dtype).unsqueeze(1), probs[:, 1:]], dim=1)
    informed.attentions.append(probs[:, 0])  # before dropout: what the head predicts
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    return (probs @ value).transpose(1, 2).contiguous(), probs


def install(model: Any) -> None:
    """Route ``model``'s attention through ``informed_attention`` (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(IMPLEMENTATION, informed_attention)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)  # the boolean mask SDPA takes
    layered = [m for m in model.modules() if hasattr(m, "layer_idx")]
    if not layered:
        raise ModelLoadError(
            f"{type(model).__name__} has no attention modules with a layer index, so structret cannot tell "
            f"which layers are informed. informed_layers works with encoders whose attention dispatches "
            f"through transformers' AttentionInterface (BERT, RoBERTa, MiniLM, ...)."
        )
    try:
        model.set_attn_implementation(IMPLEMENTATION)
    except (ValueError, AttributeError) as exc:
        raise ModelLoadError(f"{type(model).__name__} cannot take a custom attention function: {exc}") from exc


class InformedTokenizer(PrefixedTokenizer):
    """Documents: linearized code, word-pieces with ``parents``; queries as usual.

    Code that does not parse is tokenized as plain text (no parents) and counted in
    ``counts``, never raised: the informed head simply has no target there.
    """

    def __init__(self, tokenizer: Any, max_length: int, query_prefix: str, document_prefix: str, *,
                 linearizer: Any, language: str):
        super().__init__(tokenizer, max_length, query_prefix, document_prefix)
        if not getattr(tokenizer, "is_fast", False):
            raise ModelLoadError("informed_layers needs a fast (Rust) tokenizer: word ids map word-pieces to AST tokens.")
        self.linearizer, self.language = linearizer, language
        self.counts: Counter = Counter()

    def ids(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None,
            languages: Sequence[str | None] | None = None) -> dict[str, list[list[int]]]:
        if kind != "document":
            return super().ids(texts, kind=kind, max_length=max_length)
        limit = max_length or self.max_length
        prefix_words = self.prefixes["document"].split()
        languages = languages or [None] * len(texts)
        out: dict[str, list[list[int]]] = {}
        for text, language in zip(texts, languages, strict=True):
            sequence = self.linearizer.linearize(text, language=language or self.language)
            self.counts["code passages"] += 1
            if sequence is None or not sequence.tokens:
                self.counts["code passages read as plain text (did not parse)"] += 1
                row = dict(super().ids([text], kind="document", max_length=limit))
                row["parents"] = [[NO_PARENT] * len(row["input_ids"][0])]
            else:
                words = prefix_words + list(sequence.tokens)
                parents = [NO_PARENT] * len(prefix_words) + [
                    p + len(prefix_words) if p >= 0 else NO_PARENT
                    for p in (sequence.parents or [NO_PARENT] * len(sequence.tokens))]
                encoded = self.tokenizer(words, is_split_into_words=True, truncation=True, max_length=limit)
                row = {key: [value] for key, value in encoded.items()}
                row["parents"] = [spread_parents(encoded.word_ids(), parents)]
            for key, value in row.items():
                out.setdefault(key, []).extend(value)
        return out

    def pad(self, features: dict[str, list[list[int]]]) -> Any:
        features = dict(features)
        parents = features.pop("parents", None)
        padded = super().pad(features)
        if parents is not None:
            grid = torch.full((len(parents), padded["input_ids"].shape[1]), NO_PARENT, dtype=torch.long)
            for row, values in enumerate(parents):
                grid[row, : len(values)] = torch.tensor(values, dtype=torch.long)
            padded["parents"] = grid
        return padded

    def __call__(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None,
                 languages: Sequence[str | None] | None = None) -> Any:
        return self.pad(self.ids(texts, kind=kind, max_length=max_length, languages=languages))
