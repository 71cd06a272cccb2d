import math

import numpy as np
import pytest

from structret.evaluation import (
    EvaluationError,
    ProtocolNotApplicable,
    csn_mrr,
    evaluate_run,
    full_pool_ranks,
    gain_levels,
    mrr,
    rerank_run,
)
from structret.evaluation.metrics import _integer_gains

ESCI_LABELS = {3: "E", 2: "S", 1: "C", 0: "I"}


# ----------------------------------------------------------------- full pool


def test_full_pool_ranks_by_hand_with_ties_and_chunks():
    scores = np.array(
        [
            [0.9, 0.1, 0.5, 0.2],  # right doc 0 is best: rank 1
            [0.3, 0.3, 0.7, 0.1],  # right doc 1 ties doc 0 and trails doc 2: rank 3
            [0.2, 0.8, 0.6, 0.6],  # right doc 2 trails doc 1, ties doc 3: rank 3
        ]
    )
    calls = []

    def score_rows(idx):
        calls.append(list(idx))
        return scores[idx]

    ranks = full_pool_ranks(score_rows, np.array([0, 1, 2]), chunk=2)
    assert ranks.tolist() == [1, 3, 3]
    assert calls == [[0, 1], [2]]
    assert mrr(ranks) == pytest.approx((1 + 1 / 3 + 1 / 3) / 3)
    assert mrr(ranks, k=2) == pytest.approx(1 / 3)  # ranks 3 fall beyond the cut-off
    assert mrr(ranks, k=3) == pytest.approx(5 / 9)


def test_constant_scores_get_the_worst_rank():
    ranks = full_pool_ranks(lambda idx: np.zeros((len(idx), 5)), np.arange(5))
    assert ranks.tolist() == [5] * 5
    assert mrr(ranks) == pytest.approx(0.2)


def test_full_pool_rejects_bad_input():
    with pytest.raises(EvaluationError, match="NaN"):
        full_pool_ranks(lambda idx: np.full((len(idx), 3), np.nan), np.arange(3))
    with pytest.raises(EvaluationError, match="shape"):
        full_pool_ranks(lambda idx: np.zeros(3), np.arange(3))
    with pytest.raises(EvaluationError, match="index"):
        full_pool_ranks(lambda idx: np.zeros((len(idx), 3)), np.array([0, 1, 7]))
    with pytest.raises(EvaluationError):
        mrr(np.array([]))


# ----------------------------------------------------------------- CodeSearchNet


def _published_csn_mrr(query_vecs, code_vecs, batch_size=1000):
    """github/CodeSearchNet src/model_test.py, re-told: global seed 0, shuffle, full
    batches only, distances of code rows to query columns, `<=` against the diagonal."""
    state = np.random.get_state()
    try:
        np.random.seed(0)
        idxs = np.arange(len(query_vecs))
        np.random.shuffle(idxs)
    finally:
        np.random.set_state(state)
    sum_mrr, num_batches = 0.0, 0
    for start in range(0, len(idxs), batch_size):
        batch = idxs[start : start + batch_size]
        if len(batch) < batch_size:
            break
        num_batches += 1
        distances = -(code_vecs[batch] @ query_vecs[batch].T)  # rows: code, columns: queries
        correct = np.expand_dims(np.diag(distances), axis=-1)
        ranks = np.sum(distances <= correct, axis=-1)
        sum_mrr += np.mean(1.0 / ranks)
    return sum_mrr / num_batches, num_batches


@pytest.fixture(scope="module")
def pairs():
    rng = np.random.default_rng(7)
    q = rng.normal(size=(2500, 8))
    c = q + rng.normal(scale=2.0, size=q.shape)
    # coarse rounding so that many scores tie
    return np.round(q, 1), np.round(c, 1)


def test_csn_mrr_matches_the_published_procedure(pairs):
    q, c = pairs
    calls = []

    def score_block(qi, di):
        calls.append((qi.copy(), di.copy()))
        return q[qi] @ c[di].T

    value, n_batches = csn_mrr(score_block, len(q))
    expected, expected_batches = _published_csn_mrr(q, c)
    assert n_batches == expected_batches == 2  # 2500 pairs: the last 500 are dropped
    assert value == pytest.approx(expected, abs=1e-12)

    order = np.random.RandomState(0).permutation(2500)
    assert [len(qi) for qi, _ in calls] == [1000, 1000]
    for b, (qi, di) in enumerate(calls):
        assert np.array_equal(qi, di)
        assert np.array_equal(qi, order[b * 1000 : (b + 1) * 1000])
    scored = np.concatenate([qi for qi, _ in calls])
    assert set(order[2000:]).isdisjoint(scored)


def test_csn_mrr_directions_and_determinism(pairs):
    q, c = pairs

    def score_block(qi, di):
        return q[qi] @ c[di].T

    first = csn_mrr(score_block, len(q))
    assert csn_mrr(score_block, len(q)) == first
    assert csn_mrr(score_block, len(q), seed=1)[0] != first[0]

    # each query against its code and 999 distractor codes (models/model.py _make_loss)
    state = np.random.get_state()
    np.random.seed(0)
    idxs = np.arange(2500)
    np.random.shuffle(idxs)
    np.random.set_state(state)
    per_batch = []
    for b in range(2):
        batch = idxs[b * 1000 : (b + 1) * 1000]
        s = q[batch] @ c[batch].T
        per_batch.append(np.mean(1.0 / np.sum(s >= np.diag(s)[:, None], axis=1)))
    by_query = csn_mrr(score_block, len(q), rank_among="documents")
    assert by_query == (pytest.approx(np.mean(per_batch), abs=1e-12), 2)
    assert by_query[0] != first[0]


def test_csn_mrr_ties_count_against():
    value, n_batches = csn_mrr(lambda qi, di: np.ones((len(qi), len(di))), 1000)
    assert n_batches == 1
    assert value == pytest.approx(1 / 1000)


def test_csn_mrr_needs_a_full_batch():
    with pytest.raises(ProtocolNotApplicable, match="at least 1000") as info:
        csn_mrr(lambda qi, di: np.zeros((len(qi), len(di))), 999)
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------- gains


def test_gain_maps_by_name():
    levels = {0, 1, 2, 3}
    assert gain_levels(ESCI_LABELS, "esci-paper", levels) == {3: 1.0, 2: 0.1, 1: 0.01, 0: 0.0}
    assert gain_levels(ESCI_LABELS, "esci-official", levels) == {3: 1.0, 2: 0.01, 1: 0.1, 0: 0.0}
    assert gain_levels(ESCI_LABELS, "binary", levels) == {3: 1.0, 2: 0.0, 1: 0.0, 0: 0.0}
    assert gain_levels(None, "binary", {0, 1}) == {0: 0.0, 1: 1.0}
    full_names = {3: "exact", 2: "substitute", 1: "complement", 0: "irrelevant"}
    assert gain_levels(full_names, "esci-paper", levels)[1] == 0.01


def test_unknown_gain_name_lists_names_and_closest():
    with pytest.raises(EvaluationError) as info:
        gain_levels(ESCI_LABELS, "esci-papr", {0, 3})
    message = str(info.value)
    assert "binary" in message and "esci-official" in message
    assert "Did you mean 'esci-paper'" in message


def test_esci_gains_need_esci_labels():
    with pytest.raises(EvaluationError, match="label"):
        gain_levels(None, "esci-paper", {0, 1})
    with pytest.raises(EvaluationError, match="no label name"):
        gain_levels(ESCI_LABELS, "esci-paper", {0, 4})


def test_float_gains_become_exact_integers():
    assert _integer_gains({3: 1.0, 2: 0.1, 1: 0.01, 0: 0.0}) == {3: 100, 2: 10, 1: 1, 0: 0}
    assert _integer_gains({3: 1.0, 2: 0.01, 1: 0.1, 0: 0.0}) == {3: 100, 2: 1, 1: 10, 0: 0}
    assert _integer_gains({1: 2.0, 0: 0.0}) == {1: 1, 0: 0}
    with pytest.raises(EvaluationError):
        _integer_gains({1: -1.0})


# ----------------------------------------------------------------- evaluate_run

# one ESCI query with four products: a Exact, b Substitute, c Complement, d Irrelevant,
# ranked c, b, d, a by the model
QRELS = {"q": {"a": 3, "b": 2, "c": 1, "d": 0}}
RUN = {"q": {"c": 4.0, "b": 3.0, "d": 2.0, "a": 1.0}}
L2, L3, L5 = math.log2(2), math.log2(3), math.log2(5)


def test_ndcg_with_esci_gains_by_hand():
    paper = gain_levels(ESCI_LABELS, "esci-paper", {0, 1, 2, 3})
    official = gain_levels(ESCI_LABELS, "esci-official", {0, 1, 2, 3})

    got_paper = evaluate_run(RUN, QRELS, ["nDCG@4", "nDCG@2"], gains=paper)
    # DCG: c 0.01 at 1, b 0.1 at 2, d 0 at 3, a 1 at 4; ideal: 1, 0.1, 0.01, 0
    ideal = 1 / L2 + 0.1 / L3 + 0.01 / 2
    assert got_paper["nDCG@4"] == pytest.approx((0.01 / L2 + 0.1 / L3 + 1 / L5) / ideal, abs=1e-4)
    assert got_paper["nDCG@2"] == pytest.approx((0.01 / L2 + 0.1 / L3) / (1 / L2 + 0.1 / L3), abs=1e-4)

    got_official = evaluate_run(RUN, QRELS, ["nDCG@4", "nDCG@2"], gains=official)
    # DCG: c 0.1 at 1, b 0.01 at 2, a 1 at 4; ideal: 1, 0.1, 0.01, 0
    assert got_official["nDCG@4"] == pytest.approx((0.1 / L2 + 0.01 / L3 + 1 / L5) / ideal, abs=1e-4)
    assert got_official["nDCG@2"] == pytest.approx((0.1 / L2 + 0.01 / L3) / (1 / L2 + 0.1 / L3), abs=1e-4)
    assert got_official["nDCG@4"] - got_paper["nDCG@4"] > 0.02


def test_binary_gains_recall_and_mrr_by_hand():
    binary = gain_levels(ESCI_LABELS, "binary", {0, 1, 2, 3})
    got = evaluate_run(RUN, QRELS, ["nDCG@4", "nDCG@2", "R@2", "R@4", "MRR@10", "MRR@3"], gains=binary)
    assert got["nDCG@4"] == pytest.approx(1 / L5, abs=1e-4)  # only a (rank 4) is relevant
    assert got["nDCG@2"] == 0.0
    assert got["R@2"] == 0.0 and got["R@4"] == 1.0
    assert got["MRR@10"] == pytest.approx(0.25) and got["MRR@3"] == 0.0

    # four-class gains: E, S and C have gain > 0, so all three count for recall and MRR
    paper = gain_levels(ESCI_LABELS, "esci-paper", {0, 1, 2, 3})
    got = evaluate_run(RUN, QRELS, ["R@2", "R@4", "MRR@10"], gains=paper)
    assert got["R@2"] == pytest.approx(2 / 3) and got["R@4"] == 1.0
    assert got["MRR@10"] == 1.0


def test_levels_are_gains_without_a_map():
    got = evaluate_run(RUN, QRELS, ["nDCG@4"])
    ideal = 3 / L2 + 2 / L3 + 1 / 2
    assert got["nDCG@4"] == pytest.approx((1 / L2 + 2 / L3 + 3 / L5) / ideal, abs=1e-4)


def test_queries_missing_from_the_run_count_zero():
    qrels = {"q1": {"x": 1}, "q2": {"y": 1}, "q3": {}}
    run = {"q1": {"x": 1.0, "z": 0.5}, "other": {"y": 1.0}}
    got = evaluate_run(run, qrels, ["MRR@10", "R@10", "nDCG@10"])
    assert got == {"MRR@10": 0.5, "R@10": 0.5, "nDCG@10": 0.5}


def test_ties_follow_trec_eval_docid_order_for_every_metric():
    run = {"q": {"a": 0.5, "b": 0.5}}
    # trec_eval puts the larger docid first: b, then a
    got = evaluate_run(run, {"q": {"a": 1, "b": 0}}, ["MRR@10", "nDCG@10"])
    assert got["MRR@10"] == pytest.approx(0.5)
    assert got["nDCG@10"] == pytest.approx(1 / math.log2(3), abs=1e-4)
    assert evaluate_run(run, {"q": {"a": 0, "b": 1}}, ["MRR@10"])["MRR@10"] == 1.0
    # pessimistic: the relevant one goes last among equals
    assert evaluate_run(run, {"q": {"a": 0, "b": 1}}, ["MRR@10"], ties="against")["MRR@10"] == 0.5


def test_evaluate_run_errors():
    with pytest.raises(EvaluationError, match="unknown metric"):
        evaluate_run(RUN, QRELS, ["bogus@@"])
    with pytest.raises(EvaluationError, match="cut-off"):
        evaluate_run(RUN, QRELS, ["R"])
    with pytest.raises(EvaluationError, match=r"level\(s\) \[0\]"):
        evaluate_run(RUN, QRELS, ["nDCG@4"], gains={1: 0.1, 2: 0.5, 3: 1.0})
    with pytest.raises(EvaluationError, match="NaN"):
        evaluate_run({"q": {"a": float("nan")}}, QRELS, ["nDCG@4"])


# ----------------------------------------------------------------- rerank


def test_rerank_scores_only_judged_documents():
    qrels = {"q1": {"a": 3, "b": 0, "c": 2}, "q2": {"d": 1}, "q3": {}}
    calls = []

    def score_pairs(qid, docids):
        calls.append((qid, list(docids)))
        return np.array([{"a": 0.2, "b": 0.9, "c": 0.5, "d": 0.1}[d] for d in docids])

    run = rerank_run(score_pairs, qrels)
    assert calls == [("q1", ["a", "b", "c"]), ("q2", ["d"])]
    assert run == {"q1": {"a": 0.2, "b": 0.9, "c": 0.5}, "q2": {"d": 0.1}}
    got = evaluate_run(run, qrels, ["MRR@10"], gains=gain_levels(ESCI_LABELS, "binary", {0, 1, 2, 3}))
    # q1: b, c, a -> Exact a at rank 3; q2 has no Exact product
    assert got["MRR@10"] == pytest.approx((1 / 3 + 0) / 2)

    with pytest.raises(EvaluationError, match="2 scores for 3"):
        rerank_run(lambda qid, docids: np.zeros(2), {"q": {"a": 1, "b": 0, "c": 0}})
