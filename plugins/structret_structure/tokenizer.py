"""Byte-level BPE over linearized code, carrying each token's AST parent to its sub-tokens.

A code passage is linearized (dfs-parent) into tokens with parent indices; every token is
split into BPE sub-tokens. All sub-tokens of a token inherit its parent, and a parent is
the position of the parent token's FIRST sub-token, so the informed head has exactly one
gold key per query row. Queries are natural language: plain BPE, no parents.

The trainer tokenizes with ``backbone.tokenizer(prefix + text, ...)`` and knows passages
from queries only by their prefix, so documents carry ``CODE_MARK`` as their prefix and
the tokenizer linearizes exactly the texts that start with it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

CODE_MARK = "<|code|>"
PAD = "<pad>"
NO_PARENT = -1


def spread_parents(word_ids: Sequence[int | None], parents: Sequence[int]) -> list[int]:
    """Parents per sub-token from parents per word: the parent word's first sub-token.

    ``word_ids[i]`` is the word sub-token ``i`` came from (None for specials). A parent
    cut off by truncation, or a word without parent, gives ``NO_PARENT``.
    """
    first: dict[int, int] = {}
    for position, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[word] = position
    spread = []
    for word in word_ids:
        parent = parents[word] if word is not None else NO_PARENT
        spread.append(first.get(parent, NO_PARENT) if parent >= 0 else NO_PARENT)
    return spread


def _linearizer(language: str, split_identifiers: bool, name: str = "dfs-parent") -> Any:
    from structret.registry import get_registry

    # any registered linearizer; without parents (raw, dfs) the informed head has nothing to learn
    return get_registry().create("linearizer", name, language=language, split_identifiers=split_identifiers)


def train_bpe(texts: Iterable[str], *, vocab_size: int = 8000, language: str = "python",
              split_identifiers: bool = True, linearizer: str = "dfs-parent") -> Any:
    """A byte-level BPE learned from ``texts``: code is learned in its linearized form (the
    form the encoder reads), anything that does not parse as code as it is."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    linearizer = _linearizer(language, split_identifiers, linearizer)

    def pieces() -> Iterable[str]:
        for text in texts:
            sequence = linearizer.linearize(text)
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

    Callable like a Hugging Face tokenizer (what ``structret.training`` calls), and as
    ``tokenizer.batch(texts, kind=...)`` for code without the mark.
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

    def __call__(self, texts: Sequence[str], *, truncation: bool = True, max_length: int | None = None,
                 padding: Any = True, return_tensors: str = "pt") -> dict[str, torch.Tensor]:
        """The trainer's call: texts starting with ``CODE_MARK`` are code, the rest queries."""
        if return_tensors != "pt":
            raise ValueError("StructureTokenizer returns torch tensors only (return_tensors='pt').")
        limit = max_length if truncation and max_length else self.max_length
        rows = []
        for text in texts:
            code = text.startswith(CODE_MARK)
            ids, parents = self.encode(text[len(CODE_MARK):] if code else text, code=code)
            rows.append((ids[:limit], self._cut(parents[:limit], limit)))
        return self._pad(rows)

    def save(self, directory: str | Path) -> None:
        self.bpe.save(str(Path(directory) / "tokenizer.json"))

    @classmethod
    def load(cls, directory: str | Path, **options: Any) -> "StructureTokenizer":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(Path(directory) / "tokenizer.json")), **options)


class Tokenize:
    """``backbone.tokenize``: the prefixes the trainer reads, and ``tokenize(texts, kind=...)``."""

    prefixes = {"query": "", "document": CODE_MARK}

    def __init__(self, tokenizer: StructureTokenizer):
        self.tokenizer = tokenizer

    def __call__(self, texts: Sequence[str], *, kind: str = "document") -> dict[str, torch.Tensor]:
        return self.tokenizer.batch(texts, kind=kind)

