import numpy as np
import pytest

from structret.contracts import Retriever
from structret_lexical.bm25 import BM25Retriever, split_identifier

DOCS = [
    "The quick brown fox jumps over the lazy dog",
    "A slow green turtle crosses the road",
    "Brown bread with butter for breakfast",
    "Foxes are quick and clever animals",
]

CODE = [
    "def readInputFile(path):\n    with open(path) as f:\n        return f.read()",
    "def write_log_message(msg):\n    logger.info(msg)",
    "class HTTPServer:\n    def serve_forever(self): pass",
]


@pytest.fixture
def bm25():
    retriever = BM25Retriever()
    retriever.fit(DOCS)
    return retriever


def test_is_a_retriever(bm25):
    assert isinstance(bm25, Retriever)


def test_document_with_the_query_terms_ranks_first(bm25):
    scores = bm25.score(["quick brown fox", "green turtle"])
    assert scores.shape == (2, len(DOCS)) and scores.dtype == np.float32
    assert scores[0].argmax() == 0
    assert scores[1].argmax() == 1
    top_scores, top = bm25.search(["quick brown fox"], k=2)
    assert top[0, 0] == 0
    assert top_scores[0, 0] == pytest.approx(scores[0, 0])
    assert top_scores[0, 0] >= top_scores[0, 1]


def test_search_caps_k_at_the_corpus_size(bm25):
    top_scores, top = bm25.search(["brown", ""], k=10)
    assert top.shape == top_scores.shape == (2, len(DOCS))
    assert sorted(top[1].tolist()) == list(range(len(DOCS)))


def test_doc_indices_select_columns(bm25):
    queries = ["quick brown fox", "bread"]
    full = bm25.score(queries)
    subset = np.array([2, 0])
    np.testing.assert_array_equal(bm25.score(queries, doc_indices=subset), full[:, subset])
    assert bm25.score(queries, doc_indices=np.array([], dtype=int)).shape == (2, 0)
    with pytest.raises(ValueError, match="doc_indices"):
        bm25.score(queries, doc_indices=np.array([0, 9]))


def test_split_identifiers_match_natural_language():
    assert split_identifier("readInputFile") == ["read", "Input", "File"]
    assert split_identifier("read_input_file") == ["read", "input", "file"]
    assert split_identifier("HTTPServer") == ["HTTP", "Server"]

    split = BM25Retriever()
    split.fit(CODE)
    scores = split.score(["read input file", "log message", "http server"])
    assert scores[0].argmax() == 0 and scores[0, 0] > 0
    assert scores[1].argmax() == 1
    assert scores[2].argmax() == 2

    whole = BM25Retriever(split_identifiers=False)
    whole.fit(CODE)
    assert whole.score(["input file"])[0, 0] == 0.0  # readInputFile stays one token
    # the whole identifier is kept, so an exact name still matches
    assert split.score(["readInputFile"])[0].argmax() == 0


def test_empty_and_unknown_queries_score_zero(bm25):
    scores = bm25.score(["", "   ", "the and of", "zzzz qqqq"])
    assert scores.shape == (4, len(DOCS))
    assert not scores.any()


def test_fit_errors():
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Retriever().fit([])
    with pytest.raises(TypeError, match="sequence"):
        BM25Retriever().fit("one string")
    with pytest.raises(RuntimeError, match="fit"):
        BM25Retriever().score(["query"])
    with pytest.raises(ValueError, match="stopwords"):
        BM25Retriever(stopwords="klingon")
