"""BM25 through bm25s, with identifier splitting for code.

Code search queries are natural language ("read input file") while code spells the
same words as identifiers (``readInputFile``, ``read_input_file``). A plain word
tokenizer sees one rare token where the query has three common ones, so BM25 on code
would match almost nothing. Splitting camelCase and snake_case into sub-tokens -- as
CodeSearchNet's own baselines do with ``split_identifier_into_parts`` -- fixes that;
the whole identifier is kept as well so an exact name in the query still counts.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from structret_lexical.term_counts import TermCounts, fitted

# bm25s' default token pattern keeps words of two or more characters; the same rule
# is applied to sub-tokens so "getX" does not index a lone "x".
_MIN_LEN = 2
_WORD = re.compile(r"\w+")
# words whose tokens are remembered per retriever: a corpus repeats its identifiers, and
# splitting them was most of BM25's time on the README's main job; cleared when full
_MEMO_WORDS = 1 << 20
OPTIONS_FILE = "bm25.json"


def _kind(ch: str) -> str:
    if ch.isdigit():
        return "d"
    return "u" if ch.isupper() else "l"  # caseless letters (CJK, ...) join lower-case runs


def _camel_parts(segment: str) -> list[str]:
    parts, start = [], 0
    kinds = [_kind(ch) for ch in segment]
    for i in range(1, len(segment)):
        prev, cur = kinds[i - 1], kinds[i]
        boundary = (
            (cur == "u" and prev in "ld")  # readInput
            or (cur == "u" and prev == "u" and i + 1 < len(segment) and kinds[i + 1] == "l")  # HTTPServer
            or ((cur == "d") != (prev == "d"))  # utf8 -> utf, 8
        )
        if boundary:
            parts.append(segment[start:i])
            start = i
    parts.append(segment[start:])
    return parts


def split_identifier(word: str) -> list[str]:
    """``readInputFile`` -> [read, Input, File]; ``read_input_file`` -> [read, input, file]."""
    return [part for segment in word.split("_") if segment for part in _camel_parts(segment)]


class BM25Retriever:
    """Lexical retriever: ``fit(docs)``, then ``score`` or ``search`` queries."""

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str | list[str] | None = "en",
        lowercase: bool = True,
        split_identifiers: bool = True,
    ) -> None:
        # k1=1.5, b=0.75 are bm25s' own defaults; nothing in the papers fixes them
        try:
            import bm25s
            from bm25s.tokenization import Tokenizer
        except ImportError as exc:  # pragma: no cover - bm25s is a core dependency
            raise ImportError("the bm25 retriever needs bm25s: pip install bm25s") from exc
        # bm25s sets its own logger to DEBUG, which a program that configures logging (an MCP server)
        # then prints on every fit
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self._bm25s = bm25s
        self.k1, self.b, self.method = k1, b, method
        self.lowercase = lowercase
        self.split_identifiers = split_identifiers
        try:
            # bm25s resolves names such as "en" to its bundled lists
            self._stopwords = frozenset(Tokenizer(stopwords=stopwords).stopwords or ())
        except ValueError as exc:
            raise ValueError(f"bm25: unknown stopwords {stopwords!r}; use a language code like 'en', None, or a list of words") from exc
        self._model: Any = None  # bm25s.BM25 once fitted or loaded
        self._counts: TermCounts | None = None  # what the model was built from (update), read on first need
        self._saved_in: Path | None = None
        # what save() records, so that load() tokenizes queries exactly as the documents were
        self._options = {"k1": k1, "b": b, "method": method, "stopwords": stopwords, "lowercase": lowercase,
                         "split_identifiers": split_identifiers}
        self._stopword_source = stopwords
        self._word_tokens: dict[str, tuple[str, ...]] = {}

        self._n_docs = 0

    def tokenize(self, text: str) -> list[str]:
        tokens: list[str] = []
        memo = self._word_tokens
        for word in _WORD.findall(text):
            known = memo.get(word)
            if known is None:
                if len(memo) >= _MEMO_WORDS:
                    memo.clear()
                known = memo[word] = self._tokenize_word(word)
            tokens.extend(known)
        return tokens

    def terms(self, texts: Sequence[str], kind: str = "document") -> list[list[str]]:
        """The tokens this BM25 indexes (or a query matches) for each text (contracts.OPTIONAL: what an
        index with a BM25 of its own is given); the same for documents and queries."""
        return [self.tokenize(text) for text in texts]

    def fields(self, texts: Sequence[str]) -> dict[str, tuple[float, list[list[str]]]]:
        """One field, ``text``, of weight 1: what an index holding a BM25 of its own holds (contracts.OPTIONAL)."""
        return {"text": (1.0, self.terms(texts))}

    def _tokenize_word(self, word: str) -> tuple[str, ...]:
        parts = split_identifier(word) if self.split_identifiers else []
        whole = word.strip("_")
        candidates = [whole] + (parts if len(parts) > 1 or (parts and parts[0] != whole) else [])
        tokens = []
        for token in candidates:
            if self.lowercase:
                token = token.lower()
            if len(token) >= _MIN_LEN and token.lower() not in self._stopwords:
                tokens.append(token)
        return tuple(tokens)

    def settings(self) -> str:
        """What changes this retriever's numbers, for the bench table's notes."""
        words = "none" if not self._stopwords else (
            f"{self._stopword_source} ({len(self._stopwords)} words)" if isinstance(self._stopword_source, str)
            else f"{len(self._stopwords)} given words")
        return (f"bm25s {self.method}, k1={self.k1}, b={self.b}, stopwords {words}, "
                f"{'lowercased' if self.lowercase else 'case kept'}, tokens = words of >= {_MIN_LEN} chars"
                + (" plus their camelCase/snake_case parts" if self.split_identifiers else ""))

    def fit(self, docs: Sequence[str]) -> None:
        if isinstance(docs, str):
            raise TypeError("bm25: fit() takes a sequence of documents, not a single string")
        docs = list(docs)
        if not docs:
            raise ValueError("bm25: cannot index an empty corpus; fit() needs at least one document")
        corpus_tokens = [self.tokenize(doc) for doc in docs]
        if not any(corpus_tokens):
            raise ValueError(
                f"bm25: none of the {len(docs)} documents has an indexable word "
                "(all empty, too short or stopwords)"
            )
        self._build(TermCounts.from_tokens(corpus_tokens))

    def _build(self, counts: TermCounts) -> None:
        self._model = fitted(counts, k1=self.k1, b=self.b, method=self.method)
        self._counts, self._saved_in = counts, None
        self._n_docs = len(counts)

    def update(self, rows: Sequence[int | str]) -> bool:
        """Become the index of a new corpus without tokenizing it all again: one entry per document, the
        position of a document this index holds (unchanged), or the text of a new one. The scores are what
        ``fit`` of the new corpus gives. False, and nothing changed, when this index does not keep what it
        was built from (saved by an older structret): fit it then."""
        counts = self.updated_counts(rows)
        if counts is None:
            return False
        self._build(counts)
        return True

    def updated_counts(self, rows: Sequence[int | str]) -> TermCounts | None:
        """The term counts ``update(rows)`` builds from (this index unchanged), or None without counts."""
        counts = self._term_counts()
        if counts is None:
            return None
        picks = [r if isinstance(r, (int, np.integer)) else self.tokenize(r) for r in rows]
        if any(isinstance(p, (int, np.integer)) and not 0 <= p < self._n_docs for p in picks):
            raise ValueError(f"bm25: update rows must be positions in 0..{self._n_docs - 1} or texts")
        return counts.rows(picks)

    def _term_counts(self) -> TermCounts | None:
        if self._counts is None and self._saved_in is not None:
            # the counts' term ids are the model's vocabulary ids (fitted()); "" is bm25s' own, last
            vocab = sorted(self._model.vocab_dict, key=self._model.vocab_dict.__getitem__)
            self._counts = TermCounts.load(self._saved_in, [term for term in vocab if term != ""])
            if self._counts is not None and len(self._counts) != self._n_docs:
                raise ValueError(f"bm25: {self._saved_in} holds term counts of {len(self._counts)} documents for "
                                 f"{self._n_docs}; rebuild it")
        return self._counts

    def __len__(self) -> int:
        return self._n_docs

    def save(self, directory: str | os.PathLike) -> None:
        """Write the fitted index (bm25s' own files) and the options that tokenized it."""
        self._check_fitted()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._model.save(str(directory), show_progress=False)
        counts = self._term_counts()
        if counts is not None:
            counts.save(directory)
        (directory / OPTIONS_FILE).write_text(json.dumps({"options": self._options, "documents": self._n_docs}),
                                              encoding="utf-8")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "BM25Retriever":
        """A retriever saved by ``save``, ready to score and search."""
        directory = Path(directory)
        try:
            saved = json.loads((directory / OPTIONS_FILE).read_text(encoding="utf-8"))
            retriever = cls(**saved["options"])
            retriever._model = retriever._bm25s.BM25.load(str(directory), show_progress=False)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"bm25: {directory} does not hold a saved BM25 index ({type(exc).__name__}: {exc}); "
                             f"rebuild it") from None
        retriever._n_docs = int(saved["documents"])
        retriever._saved_in = directory  # the term counts are read only by an update
        return retriever

    def _check_fitted(self) -> None:
        if self._model is None:
            raise RuntimeError("bm25: call fit(docs) before scoring or searching")

    def _query_scores(self, query: str) -> np.ndarray:
        tokens = self.tokenize(query)
        # bm25s.get_scores fails on an empty token list; an empty query matches nothing
        if not tokens:
            return np.zeros(self._n_docs, dtype=np.float32)
        return np.asarray(self._model.get_scores(tokens), dtype=np.float32)

    def score(self, queries: Sequence[str], doc_indices: np.ndarray | None = None) -> np.ndarray:
        """Scores [len(queries), n] against all documents, or [len(queries), len(doc_indices)]."""
        self._check_fitted()
        if isinstance(queries, str):
            raise TypeError("bm25: score() takes a sequence of queries, not a single string")
        if doc_indices is not None:
            doc_indices = np.asarray(doc_indices)
            if doc_indices.ndim != 1 or (doc_indices.size and not np.issubdtype(doc_indices.dtype, np.integer)):
                raise ValueError("bm25: doc_indices must be a 1-D array of document indices")
            if doc_indices.size and (doc_indices.min() < 0 or doc_indices.max() >= self._n_docs):
                raise ValueError(f"bm25: doc_indices must lie in 0..{self._n_docs - 1}")
        width = self._n_docs if doc_indices is None else len(doc_indices)
        out = np.empty((len(queries), width), dtype=np.float32)
        for i, query in enumerate(queries):
            row = self._query_scores(query)
            out[i] = row if doc_indices is None else row[doc_indices]
        return out

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k per query: scores [nq, k'] best first and document indices, k' = min(k, n).

        Equal scores keep document order. Done on the full score row rather than
        bm25s.retrieve, which costs the same per query but rejects empty queries.
        """
        self._check_fitted()
        if isinstance(queries, str):
            raise TypeError("bm25: search() takes a sequence of queries, not a single string")
        if k < 1:
            raise ValueError(f"bm25: k must be at least 1, not {k}")
        k = min(k, self._n_docs)
        scores = np.empty((len(queries), k), dtype=np.float32)
        indices = np.empty((len(queries), k), dtype=np.int64)
        for i, query in enumerate(queries):
            row = self._query_scores(query)
            top = _top(row, k)
            scores[i], indices[i] = row[top], top
        return scores, indices


def _top(row: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best positions of ``row``, best first, equal scores in document order; a
    partition first, since a full sort of a 100k-document row costs more than scoring it."""
    if k >= len(row):
        return np.argsort(-row, kind="stable")
    kth = np.partition(row, len(row) - k)[len(row) - k]
    candidates = np.flatnonzero(row >= kth)
    return candidates[np.argsort(-row[candidates], kind="stable")][:k]
