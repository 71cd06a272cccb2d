import math
import re
from collections import Counter

import numpy as np

from structret.plugin import get_registry
from structret_identifiers.extract import subtokens

WORD = re.compile(r"[A-Za-z0-9]+")


class IdentifierOverlap:
    """Score = sum of IDF over the distinct query words found among a document's identifier sub-tokens.

    Only identifiers count, not comments or strings: a deliberately structure-aware
    lexical baseline. The identifiers come from any registered extractor, by name.
    """

    def __init__(self, extractor: str = "regex-identifiers"):
        self.extractor = get_registry().create("extractor", extractor)
        self.doc_terms: list[frozenset[str]] = []
        self.idf: dict[str, float] = {}

    def fit(self, docs):
        self.doc_terms = [
            frozenset(t for e in self.extractor.extract(doc) for t in subtokens(e.text)) for doc in docs
        ]
        if not self.doc_terms:
            raise ValueError("identifier-overlap: cannot fit on an empty corpus")
        df = Counter(t for terms in self.doc_terms for t in terms)
        n = len(self.doc_terms)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def score(self, queries, doc_indices=None):
        indices = range(len(self.doc_terms)) if doc_indices is None else doc_indices
        out = np.zeros((len(queries), len(indices)), dtype=np.float32)
        for qi, query in enumerate(queries):
            words = {w.lower() for w in WORD.findall(query)} & self.idf.keys()
            for column, di in enumerate(indices):
                out[qi, column] = sum(self.idf[w] for w in words & self.doc_terms[di])
        return out
