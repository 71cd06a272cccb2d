"""structret plot / structret_papers.figures.plot_figures: SANTA's Figures 3 and 4, their numbers and their errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from _tiny_models import one_torch_thread, tiny_bert_dir  # noqa: F401  (fixtures)
from click.testing import CliRunner

import structret
from structret.cli import cli
from structret.errors import DataError, StructretError
from structret_papers.figures import plot_figures, sample_pairs
from structret_papers.figures.measures import alignment, own_nearest, ranking_probabilities, resolve_scoring
from structret.testing import build_tiny_bert

_FUNCTIONS = [
    ("read_config", "Read a configuration file and return its settings.", "return dict(open(path))"),
    ("parse_date", "Parse an ISO date string into integers.", "return tuple(int(x) for x in path.split('-'))"),
    ("send_mail", "Send an email message through a server.", "path.sendmail()"),
    ("sort_numbers", "Sort a list of numbers in ascending order.", "return sorted(path)"),
    ("count_words", "Count how often each word occurs in a text.", "return len(path.split())"),
    ("join_paths", "Join path parts with the separator.", "return '/'.join(path)"),
    ("add_values", "Add two values and return the sum.", "return path + path"),
    ("print_name", "Print a name with a greeting.", "print('hello', path)"),
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Path:
    """Eight functions in the test split, mined-file layout ('partition' per row)."""
    path = tmp_path_factory.mktemp("figures-data") / "code.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i, (name, doc, body) in enumerate(_FUNCTIONS):
            code = f'def {name}(path):\n    """{doc}"""\n    {body}\n'
            f.write(json.dumps({"repo": "me/p", "path": f"m{i}.py", "func_name": name, "language": "python",
                                "code": code, "docstring": doc, "docstring_tokens": doc.rstrip(".").split(),
                                "partition": "test", "url": f"https://example.org/{i}"}) + "\n")
    return path


@pytest.fixture(scope="module")
def other_bert_dir(tmp_path_factory) -> Path:
    """A second tiny BERT, other random weights: its distributions differ from tiny_bert_dir's."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert-seed1"), seed=1)


# --- the numbers -----------------------------------------------------------------------------


def test_a_trivially_best_positive_gets_more_probability_than_a_shuffled_pairing(tiny_bert_dir):
    """Query text == document text: each query's own document has cosine 1, so it must win."""
    model = structret.load_model(str(tiny_bert_dir))
    texts = [doc for _, doc, _ in _FUNCTIONS]
    q, d = model.encode_query(texts), model.encode_document(texts)
    own = np.arange(len(texts))
    p_own = ranking_probabilities(q, d, own, similarity="cos", temperature=0.05)
    p_shuffled = ranking_probabilities(q, d, np.roll(own, 3), similarity="cos", temperature=0.05)
    for p in (p_own, p_shuffled):
        assert p.shape == (len(texts),) and np.all((p >= 0) & (p <= 1))
    assert p_own.mean() > p_shuffled.mean()
    matched, random_ = alignment(q, d, seed=0)
    assert matched == pytest.approx(1.0, abs=1e-5) and random_ < matched


def test_probabilities_are_a_softmax_over_the_pool():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    d = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    both = [ranking_probabilities(q, d, [k, k], similarity="dot", temperature=1.0) for k in range(3)]
    np.testing.assert_allclose(np.sum(both, axis=0), 1.0)  # over all candidates, each query's mass is 1
    first = ranking_probabilities(q, d, [0, 1], similarity="dot", temperature=1.0)
    np.testing.assert_allclose(first, np.e / (np.e + 1 + np.e))
    # a lower temperature sharpens: the best candidate gains
    assert (ranking_probabilities(q, d, [0, 1], similarity="dot", temperature=0.1) > first).all()


def test_own_nearest_counts_docstrings_next_to_their_code():
    docs = np.array([[0.0, 0.0], [10.0, 0.0]])
    assert own_nearest(np.concatenate([docs, docs + 0.1]), 2) == 1.0
    assert own_nearest(np.concatenate([docs, docs[::-1] + 0.1]), 2) == 0.0


class _Run:
    def __init__(self, similarity, temperature):
        self.recipe = {"objective": "sda+0.5*mep", "plugins": {"sda": {"similarity": similarity,
                                                                        "temperature": temperature}}}


def test_the_scoring_comes_from_the_runs_or_is_stated():
    untrained = type("Plain", (), {"recipe": {}})()
    assert resolve_scoring([("a", untrained), ("b", _Run("cos", 0.02))])[:2] == ("cos", 0.02)
    similarity, temperature, source = resolve_scoring([("a", untrained), ("b", untrained)])
    assert (similarity, temperature) == ("cos", 0.05) and "no model records one" in source
    assert resolve_scoring([("a", untrained)], "dot", 1.0)[:2] == ("dot", 1.0)
    with pytest.raises(StructretError, match="different scorings"):
        resolve_scoring([("a", _Run("cos", 0.05)), ("b", _Run("dot", 1.0))])


# --- the figures -----------------------------------------------------------------------------


def test_both_figures_are_written_with_their_numbers(tmp_path, tiny_bert_dir, other_bert_dir, pairs_file):
    report = plot_figures([str(tiny_bert_dir), str(other_bert_dir)], f"codesearchnet:{pairs_file}", tmp_path / "figs",
                          pairs=6, seed=1)
    for name in ("ranking-probability.png", "embeddings-2d.png"):
        data = (tmp_path / "figs" / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert report.pairs == 6 and report.pool_size == 6 and len(report.models) == 2
    first, second = report.models
    for m in report.models:
        assert m.probabilities.shape == (6,) and np.all((m.probabilities >= 0) & (m.probabilities <= 1))
        assert m.points.shape == (12, 2) and 0 <= m.own_nearest_2d <= 1
    assert not np.allclose(first.probabilities, second.probabilities)  # two models, two distributions
    text = report.summary()
    assert "mean p" in text and f"{first.mean:.4f}" in text and "no model records one" in text


def test_the_command_runs_end_to_end_and_the_full_pool_is_the_split(tmp_path, tiny_bert_dir, other_bert_dir,
                                                                   pairs_file):
    result = CliRunner().invoke(cli, ["plot", "--data", f"codesearchnet:{pairs_file}", "--model", str(tiny_bert_dir),
                                      "--model", str(other_bert_dir), "--pairs", "5", "--pool", "full",
                                      "--temperature", "0.1", "--links", "--label", "first", "--label", "second",
                                      "--out", str(tmp_path / "f")])
    assert result.exit_code == 0, result.output
    assert "\n  first " in result.output and "\n  second " in result.output  # the labels name the table's rows
    assert "softmax(cos / 0.1) over the split's 8 documents" in result.output
    assert (tmp_path / "f" / "embeddings-2d.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("args, message", [
    (["--model", "nosuchmodel", "--model", "minilm"], "unknown backbone 'nosuchmodel'"),
    (["--model", "minilm"], "at least two --model"),
    (["--model", "M", "--model", "MISSING"], "does not exist"),
    (["--model", "M", "--model", "M", "--split", "valid"], "has no documents"),
    (["--model", "M", "--model", "M", "--pairs", "1"], "at least 2 pairs"),
    (["--model", "M", "--model", "M", "--pairs", "9"], "more than the 8 aligned pairs"),
    (["--model", "M", "--model", "M", "--label", "only one"], "1 labels for 2 models"),
])
def test_bad_input_is_one_sentence_not_a_traceback(tmp_path, tiny_bert_dir, pairs_file, args, message):
    given = {"M": str(tiny_bert_dir), "MISSING": str(tmp_path / "no-such-run")}
    args = [given.get(a, a) for a in args]
    result = CliRunner().invoke(cli, ["plot", "--data", f"codesearchnet:{pairs_file}", *args,
                                      "--out", str(tmp_path / "f")])
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "f").exists()


def test_a_split_with_one_pair_is_refused(tmp_path):
    from structret.records import Dataset, Query, ReadStats, TextRecord

    one = Dataset("one", {"d": TextRecord("d", "x")}, {"q": Query("q", "y")}, {"q": {"d": 1}}, ReadStats(),
                  pairs=[("q", "d")])
    with pytest.raises(DataError, match="has 1 aligned"):
        sample_pairs(one, 1)


def test_without_reader_pairs_each_query_takes_its_most_relevant_document():
    from structret_papers.figures import aligned_pairs
    from structret.records import Dataset, Query, ReadStats, TextRecord

    corpus = {d: TextRecord(d, d) for d in ("a", "b", "c")}
    queries = {q: Query(q, q) for q in ("q1", "q2", "q3")}
    graded = Dataset("graded", corpus, queries, {"q1": {"a": 1, "b": 3}, "q2": {"c": 2}, "q3": {"a": 0}}, ReadStats())
    assert aligned_pairs(graded) == [("q1", "b"), ("q2", "c")]  # q3 has nothing relevant
