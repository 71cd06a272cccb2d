"""What a BM25 is built from: each document's terms and how often each occurs (a CSR matrix of
counts), and the BM25 score matrix made from them with numpy in one pass.

Kept beside a saved BM25 (``term_counts.npz``; its vocabulary is bm25s' own), the counts let an update tokenize only the documents
it adds: the statistics that move with every document (document frequencies, the mean length) are
all in them, so the rebuilt scores are what a fit of the whole corpus gives. bm25s builds the same
matrix with a Python loop over documents, most of a refit of 10k functions; ``ScoredBM25`` is bm25s'
own class with that step (``build_index_from_ids``, its documented override) done from counts.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import numpy as np

FILE = "term_counts.npz"


class NoWords(ValueError):
    """No document of a corpus has a term: there is nothing to index."""


class TermCounts:
    """Documents as rows of term counts: row ``d`` holds ``terms[indptr[d]:indptr[d+1]]`` (ids into
    ``vocab``, each once) with ``counts`` beside them."""

    def __init__(self, vocab: list[str], indptr: np.ndarray, terms: np.ndarray, counts: np.ndarray):
        self.vocab, self.indptr, self.terms, self.counts = vocab, indptr, terms, counts

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @classmethod
    def empty(cls, documents: int) -> "TermCounts":
        """``documents`` documents without a term (a field none of them has words in)."""
        return cls([], np.zeros(documents + 1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))

    @classmethod
    def from_tokens(cls, documents: Sequence[Sequence[str]]) -> "TermCounts":
        ids: dict[str, int] = {}
        flat = np.fromiter((ids.setdefault(t, len(ids)) for tokens in documents for t in tokens), dtype=np.int64)
        lengths = np.fromiter((len(tokens) for tokens in documents), dtype=np.int64, count=len(documents))
        return cls._from_flat(list(ids), flat, lengths)

    @classmethod
    def _from_flat(cls, vocab: list[str], flat: np.ndarray, lengths: np.ndarray) -> "TermCounts":
        """Counts from every document's term ids one after another (``lengths`` of them each)."""
        docs = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        pairs, counts = np.unique(docs * max(len(vocab), 1) + flat, return_counts=True)  # sorted: by document
        rows = pairs // max(len(vocab), 1)
        indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(lengths)), out=indptr[1:])
        return cls(vocab, indptr, (pairs % max(len(vocab), 1)).astype(np.int32), counts.astype(np.int32))

    def rows(self, picks: Sequence[int | Sequence[str]]) -> "TermCounts":
        """A new corpus, one row per pick: an int keeps that row of this one, a token list is a new
        document. The vocabulary keeps only the terms still in use (ValueError when none is)."""
        ids = {term: i for i, term in enumerate(self.vocab)}
        vocab = list(self.vocab)
        kept = np.fromiter((p for p in picks if isinstance(p, (int, np.integer))), dtype=np.int64)
        new_tokens = [p for p in picks if not isinstance(p, (int, np.integer))]
        new_flat = np.fromiter((ids.setdefault(t, len(ids)) for tokens in new_tokens for t in tokens), dtype=np.int64)
        vocab.extend(list(ids)[len(vocab):])
        # the kept rows' terms and counts, gathered in one go
        starts, ends = self.indptr[kept], self.indptr[kept + 1]
        kept_lengths = ends - starts
        gather = np.repeat(starts - np.concatenate(([0], np.cumsum(kept_lengths)[:-1])), kept_lengths) + \
            np.arange(int(kept_lengths.sum()), dtype=np.int64)
        kept_terms, kept_counts = self.terms[gather].astype(np.int64), self.counts[gather]
        # rows in pick order: each kept row's slice or the next new document's counts
        new = TermCounts._from_flat(vocab, new_flat, np.fromiter((len(t) for t in new_tokens), dtype=np.int64,
                                                                 count=len(new_tokens)))
        is_kept = np.fromiter((isinstance(p, (int, np.integer)) for p in picks), dtype=bool, count=len(picks))
        lengths = np.empty(len(picks), dtype=np.int64)
        lengths[is_kept] = kept_lengths
        lengths[~is_kept] = np.diff(new.indptr)
        indptr = np.zeros(len(picks) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        terms = np.empty(int(indptr[-1]), dtype=np.int64)
        counts = np.empty(int(indptr[-1]), dtype=np.int32)
        source_kept = np.repeat(is_kept, lengths)
        terms[source_kept], counts[source_kept] = kept_terms, kept_counts
        terms[~source_kept], counts[~source_kept] = new.terms, new.counts
        # drop terms no document has any more, as a fit of these documents would not have them
        used = np.unique(terms)
        if not len(used):
            raise NoWords("bm25: none of the documents has an indexable word")
        remap = np.full(len(vocab), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        return TermCounts([vocab[i] for i in used], indptr, remap[terms].astype(np.int32), counts)

    def save(self, directory: str | os.PathLike) -> None:
        """The counts, without the vocabulary: bm25s saves that (``vocab.index.json``) beside them."""
        with open(Path(directory) / FILE, "wb") as out:
            np.savez(out, indptr=self.indptr, terms=self.terms, counts=self.counts)

    @classmethod
    def load(cls, directory: str | os.PathLike, vocab: list[str]) -> "TermCounts | None":
        """The counts saved in ``directory``, over ``vocab`` (the term of each id); None where there are
        none (saved by an older structret)."""
        file = Path(directory) / FILE
        if not file.is_file():
            return None
        with np.load(file, allow_pickle=False) as saved:
            counts = cls(vocab, saved["indptr"], saved["terms"], saved["counts"])
        if len(counts.terms) and int(counts.terms.max()) >= len(vocab):
            raise ValueError(f"bm25: {file} names terms its vocabulary does not have; rebuild the index")
        return counts


@functools.cache  # one class per process (bm25s is imported only when a BM25 is built)
def bm25_class():
    """bm25s.BM25 with its score matrix built from ``TermCounts`` (passed as the corpus' ``ids``)."""
    import bm25s
    from bm25s import scoring

    class ScoredBM25(bm25s.BM25):
        def build_index_from_ids(self, unique_token_ids, corpus_token_ids, show_progress=True, leave_progress=False):
            scores, self.nonoccurrence_array = score_matrix(
                corpus_token_ids, k1=self.k1, b=self.b, delta=self.delta, method=self.method,
                idf_method=self.idf_method, dtype=self.dtype, int_dtype=self.int_dtype, scoring=scoring)
            return scores

    return ScoredBM25


def fitted(counts: TermCounts, *, k1: float, b: float, method: str):
    """A bm25s index of ``counts`` (searched, saved and loaded as any bm25s.BM25)."""
    model = bm25_class()(k1=k1, b=b, method=method)
    model.index(SimpleNamespace(ids=counts, vocab={term: i for i, term in enumerate(counts.vocab)}),
                show_progress=False)
    return model


def score_matrix(counts: TermCounts, *, k1, b, delta, method, idf_method, dtype, int_dtype,
                 scoring) -> tuple[dict, np.ndarray | None]:
    """bm25s' score matrix of ``counts`` (CSC over the vocabulary, documents as rows) and its array of
    scores for absent terms (BM25L and BM25+ only), each score computed by bm25s' own formulas in the same
    order of operations, so a float comes out as bm25s' build gives it."""
    n_docs, n_vocab = len(counts), len(counts.vocab)
    rows = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(counts.indptr))
    lengths = np.bincount(rows, weights=counts.counts, minlength=n_docs).astype(np.int64)
    avg_doc_len = lengths.mean()
    frequencies = np.bincount(counts.terms, minlength=n_vocab)
    idf_of = scoring._select_idf_scorer(idf_method)
    known = {int(df): idf_of(int(df), N=n_docs) for df in np.unique(frequencies) if df}
    idf = np.zeros(n_vocab, dtype=dtype)
    idf[frequencies > 0] = [known[int(df)] for df in frequencies[frequencies > 0]]
    tfc = scoring._select_tfc_scorer(method)
    # bm25s scores a document's terms with its length as a Python int and the mean as numpy's float64
    scores = idf[counts.terms] * tfc(tf_array=counts.counts.astype(dtype), l_d=lengths[rows].astype(np.float64),
                                     l_avg=avg_doc_len, k1=k1, b=b, delta=delta)
    occurs = None
    if method in ("bm25l", "bm25+"):
        occurs = np.zeros(n_vocab, dtype=dtype)
        absent = tfc(tf_array=0, l_d=avg_doc_len, l_avg=avg_doc_len, k1=k1, b=b, delta=delta)
        occurs[frequencies > 0] = [known[int(df)] * absent for df in frequencies[frequencies > 0]]
        scores -= occurs[counts.terms]
    order = np.argsort((counts.terms.astype(np.int64) << 32) | rows, kind="stable")
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(frequencies, out=indptr[1:])
    return {"data": scores[order].astype(dtype), "indices": rows[order].astype(int_dtype), "indptr": indptr,
            "num_docs": n_docs}, occurs

