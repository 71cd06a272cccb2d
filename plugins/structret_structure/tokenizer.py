"""Byte-level BPE over linearized code, carrying each token's AST parent to its sub-tokens.

A code passage is linearized (dfs-parent) into tokens with parent indices; every token is
split into BPE sub-tokens, which inherit its parent (``structret.parents.spread_parents``).
Queries are natural language: plain BPE, no parents.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from structret.plugin import NO_PARENT, spread_parents

PAD = "<pad>"


def _linearizer(language: str, split_identifiers: bool, name: str = "dfs-parent") -> Any:
    from structret.plugin import get_registry

    # any registered linearizer; without parents (raw, dfs) the informed head has nothing to learn
    return get_registry().create("linearizer", name, language=language, split_identifiers=split_identifiers)


def train_bpe(texts: Iterable[str], *, vocab_size: int = 8000, language: str = "python",
              split_identifiers: bool = True, linearizer: str = "dfs-parent") -> Any:
    """A byte-level BPE learned from ``texts``: code is learned in its linearized form (the
    form the encoder reads), anything that does not parse as code as it is."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    plugin = _linearizer(language, split_identifiers, linearizer)

    def pieces() -> Iterable[str]:
        for text in texts:
            sequence = plugin.linearize(text)
            yield " ".join(sequence.tokens) if sequence is not None else text

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(pieces(), trainer)
    return bpe


class StructureTokenizer:
    """Texts to ``input_ids``, ``attention_mask`` and ``parents`` (-1: none, and padding).

    ``tokenizer.batch(texts, kind=...)``; documents are linearized code, queries plain text.
    """

    def __init__(self, bpe: Any, *, max_length: int = 512, language: str = "python", split_identifiers: bool = True,
                 linearizer: str = "dfs-parent"):
        self.bpe = bpe
        self.max_length = max_length
        self.language = language
        self.split_identifiers = split_identifiers
        self.pad_token_id = bpe.token_to_id(PAD)
        self.linearizer_name = linearizer
        self.linearizer = _linearizer(language, split_identifiers, linearizer)
        # passages read as plain text because their code did not parse (reported, never raised)
        self.counts: Counter = Counter()

    def __len__(self) -> int:
        return self.bpe.get_vocab_size()

    def encode_code(self, code: str, language: str | None = None) -> tuple[list[int], list[int]] | None:
        """Ids and sub-token parents of one code text, or None if it does not parse."""
        sequence = self.linearizer.linearize(code, language=language or self.language)
        if sequence is None or not sequence.tokens:
            return None
        encoding = self.bpe.encode(sequence.tokens, is_pretokenized=True, add_special_tokens=False)
        parents = sequence.parents or [NO_PARENT] * len(sequence.tokens)
        return list(encoding.ids), spread_parents(encoding.word_ids, parents)

    def encode_text(self, text: str) -> tuple[list[int], list[int]]:
        ids = self.bpe.encode(text, add_special_tokens=False).ids or [self.pad_token_id]
        return list(ids), [NO_PARENT] * len(ids)

    def encode(self, text: str, *, code: bool, language: str | None = None) -> tuple[list[int], list[int]]:
        if code:
            found = self.encode_code(text, language)
            self.counts["code passages"] += 1
            if found is not None:
                return found
            self.counts["code passages read as plain text (did not parse)"] += 1
        return self.encode_text(text)

    def batch(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None,
              languages: Sequence[str | None] | None = None) -> dict[str, torch.Tensor]:
        """Padded tensors; documents are code (linearized), queries plain text."""
        if kind not in ("query", "document"):
            raise ValueError(f"kind={kind!r} is not supported; use 'query' or 'document'.")
        limit = min(max_length or self.max_length, self.max_length)
        languages = languages or [None] * len(texts)
        rows = [self.encode(t, code=kind == "document", language=lang) for t, lang in zip(texts, languages, strict=True)]
        return self._pad([(ids[:limit], self._cut(parents[:limit], limit)) for ids, parents in rows])

    @staticmethod
    def _cut(parents: list[int], limit: int) -> list[int]:
        # pre-order puts parents first, so this only matters for orders that do not
        return [p if p < limit else NO_PARENT for p in parents]

    def _pad(self, rows: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(ids) for ids, _ in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        parents = torch.full((len(rows), width), NO_PARENT, dtype=torch.long)
        for row, (row_ids, row_parents) in enumerate(rows):
            ids[row, : len(row_ids)] = torch.tensor(row_ids)
            mask[row, : len(row_ids)] = 1
            parents[row, : len(row_parents)] = torch.tensor(row_parents)
        return {"input_ids": ids, "attention_mask": mask, "parents": parents}

    def save(self, directory: str | Path) -> None:
        self.bpe.save(str(Path(directory) / "tokenizer.json"))

    @classmethod
    def load(cls, directory: str | Path, **options: Any) -> "StructureTokenizer":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(Path(directory) / "tokenizer.json")), **options)


class Tokenize:
    """``backbone.tokenize(texts, kind=..., max_length=...)``, what the trainer calls."""

    prefixes = {"query": "", "document": ""}

    def __init__(self, tokenizer: StructureTokenizer):
        self.tokenizer = tokenizer

    def __call__(self, texts: Sequence[str], *, kind: str = "document", max_length: int | None = None,
                 languages: Sequence[str | None] | None = None) -> dict[str, torch.Tensor]:
        return self.tokenizer.batch(texts, kind=kind, max_length=max_length, languages=languages)
