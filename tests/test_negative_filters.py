"""structret negatives --filter/--judge: NV-Retriever's positive-aware filters on known scores,
teacher and cross-encoder judges with tiny random models, the report, and bad specs."""

import gzip
import json

import numpy as np
import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.cli import cli
from structret.errors import StructretError
from structret.negatives import (
    NegativeFilter,
    is_cross_encoder,
    judge_candidates,
    mine_negatives,
    rank_candidates,
    report_path_for,
    write_negatives,
)
from structret.records import Dataset, Query, ReadStats, TextRecord

# dot products with q1 = [1, 0] and q2 = [0, 1] are the coordinates: known scores
VECTORS = {"p1": [0.9, -0.1], "p2": [0.8, -0.1], "a": [0.85, 0.5], "b": [0.755, 0.4], "c": [0.7, 0.35],
           "d": [0.5, 0.32], "p3": [0.0, 0.3]}
QUERY_VECTORS = {"first query": [1.0, 0.0], "second query": [0.0, 1.0]}


class FixedBackbone:
    """Encodes each text to the vector the table gives its document (``texts``: id -> text)."""

    def __init__(self, texts=None):
        self.documents = {(texts or {}).get(d, d): v for d, v in VECTORS.items()}

    def encode(self, texts, kind, batch_size=32, show_progress=True):
        table = QUERY_VECTORS if kind == "query" else self.documents
        return np.array([table[t] for t in texts], dtype=np.float32)


def _dataset(texts=None):
    texts = texts or {d: d for d in VECTORS}
    return Dataset(name="known", corpus={d: TextRecord(d, texts[d]) for d in VECTORS},
                   queries={"q1": Query("q1", "first query"), "q2": Query("q2", "second query")},
                   qrels={"q1": {"p1": 1, "p2": 1, "d": 0}, "q2": {"p3": 1}}, stats=ReadStats(source="test"))


def _lines(path):
    with gzip.open(path, "rt") as f:
        return {row["query_id"]: row for row in map(json.loads, f)}


def test_candidates_carry_exact_scores_and_the_weakest_positive():
    q1, q2 = rank_candidates(FixedBackbone(), _dataset(), depth=5, show_progress=False)
    # q1's top 5: p1 .9, a .85, p2 .8, b .755, c .7 -> the positives removed
    assert q1.docs == ["a", "b", "c"] and q1.positives == ["p1", "p2"] and q1.positive_in_top
    assert q1.scores == pytest.approx([0.85, 0.755, 0.7])
    assert q1.positive_score == pytest.approx(0.8)  # the lower of p1 .9 and p2 .8
    assert q2.docs == ["a", "b", "c", "d"] and q2.positive_score == pytest.approx(0.3)


@pytest.mark.parametrize("spec, kept_q1, report", [
    # margin:0.05 -> q1 keeps score <= .75: c; q2 keeps <= .25: nothing
    ("margin:0.05", ["c"], {"dropped": 6, "emptied_by_filter": 1, "queries_with_drops": 2, "max_dropped": 4}),
    # percent:0.95 -> q1 keeps <= .76: b (.755) and c; q2 keeps <= .285: nothing
    ("percent:0.95", ["b", "c"], {"dropped": 5, "emptied_by_filter": 1, "queries_with_drops": 2, "max_dropped": 4}),
    # margin:0.5 -> q1 keeps <= .3: nothing; q2 keeps <= -.2: nothing
    ("margin:0.5", None, {"dropped": 7, "emptied_by_filter": 2, "queries_with_drops": 2, "max_dropped": 4}),
])
def test_filters_drop_exactly_the_candidates_above_the_threshold(tmp_path, spec, kept_q1, report):
    dataset = _dataset()
    candidates = rank_candidates(FixedBackbone(), dataset, depth=5, show_progress=False)
    out, report_file = tmp_path / "neg.jsonl.gz", tmp_path / "neg.report.json"
    result = write_negatives(dataset, candidates, out, keep=10, filter=NegativeFilter.parse(spec),
                             report_path=report_file)
    lines = _lines(out)
    assert "q2" not in lines  # every candidate of q2 scored above its positive's bar
    if kept_q1 is None:
        assert lines == {}
    else:
        assert sorted(p["docid"] for p in lines["q1"]["negative_passages"]) == kept_q1
        assert [p["docid"] for p in lines["q1"]["positive_passages"]] == ["p1", "p2"]
    assert result.candidates == 7 and result.queries == 2
    assert result.written + result.no_negatives == 2 and result.written == (kept_q1 is not None)
    saved = json.loads(report_file.read_text())
    for key, value in report.items():
        assert getattr(result, key) == value and saved[key] == value
    assert saved["filter"] == spec and saved["dropped_share"] == pytest.approx(report["dropped"] / 7)
    assert sum(int(k) * n for k, n in saved["dropped_histogram"].items()) == report["dropped"]
    assert f"dropped {report['dropped']} of 7 candidates" in result.summary()


def test_without_a_filter_every_candidate_is_kept_as_before(tmp_path):
    dataset = _dataset()
    candidates = rank_candidates(FixedBackbone(), dataset, depth=5, show_progress=False)
    result = write_negatives(dataset, candidates, tmp_path / "n.jsonl.gz", keep=10)
    lines = _lines(tmp_path / "n.jsonl.gz")
    assert sorted(p["docid"] for p in lines["q2"]["negative_passages"]) == ["a", "b", "c", "d"]
    assert (result.written, result.dropped, result.filter) == (2, 0, "")
    assert "dropped" not in result.summary()


def test_percent_threshold_stays_below_a_negative_positive_score():
    assert NegativeFilter.parse("percent:0.9").threshold(0.5) == pytest.approx(0.45)
    assert NegativeFilter.parse("percent:0.9").threshold(-0.5) == pytest.approx(-0.55)
    assert NegativeFilter.parse(" margin : 0.1 ").threshold(-0.5) == pytest.approx(-0.6)


@pytest.mark.parametrize("spec, said", [
    ("margin", "is not a filter"), ("top:0.5", "is not a filter"), ("percent:abc", "is not a filter"),
    ("margin:nan", "is not a filter"), ("margin:-0.1", "must be 0 or more"), ("percent:1.5", "fraction in (0, 1]"),
    ("percent:0", "fraction in (0, 1]"),
])
def test_bad_filter_specs_say_what_a_filter_is(spec, said):
    with pytest.raises(StructretError, match=rf"'{spec}'.*{said[:12]}".replace("(", r"\(")):
        NegativeFilter.parse(spec)


def test_a_teacher_bi_encoder_judges_with_its_own_scores(tmp_path, tiny_bert_dir):
    import structret

    texts = {"p1": "sort a list", "p2": "sorted list of items", "a": "read a file", "b": "open the file path",
             "c": "send a mail", "d": "parse a date", "p3": "count words in text"}
    dataset = _dataset(texts)
    mined = rank_candidates(FixedBackbone(texts), dataset, depth=5, show_progress=False)
    judged = judge_candidates(str(tiny_bert_dir), dataset, mined, show_progress=False)

    teacher = structret.load_model(str(tiny_bert_dir)).backbone
    for before, after in zip(mined, judged):
        q = teacher.encode([dataset.queries[before.qid].text], kind="query", show_progress=False)[0]
        docs = teacher.encode([texts[d] for d in before.docs], kind="document", show_progress=False)
        pos = teacher.encode([texts[d] for d in before.positives], kind="document", show_progress=False)
        assert after.docs == before.docs  # the mining model chose the candidates; the judge rescored them
        assert after.scores == pytest.approx((docs @ q).tolist(), abs=1e-5)
        assert after.positive_score == pytest.approx(float((pos @ q).min()), abs=1e-5)
        assert after.scores != pytest.approx(before.scores, abs=1e-3)


@pytest.fixture
def tiny_cross_encoder(tmp_path, tiny_bert_dir):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(tiny_bert_dir)
    config.num_labels = 1
    torch.manual_seed(0)
    path = tmp_path / "cross-encoder"
    BertForSequenceClassification(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(path)
    return path


def test_a_cross_encoder_judges_each_pair(tmp_path, tiny_cross_encoder, tiny_bert_dir):
    from sentence_transformers import CrossEncoder

    assert is_cross_encoder(str(tiny_cross_encoder)) and not is_cross_encoder(str(tiny_bert_dir))
    texts = {"p1": "sort a list", "p2": "sorted list of items", "a": "read a file", "b": "open the file path",
             "c": "send a mail", "d": "parse a date", "p3": "count words in text"}
    dataset = _dataset(texts)
    out = tmp_path / "neg.jsonl.gz"
    mined = rank_candidates(FixedBackbone(texts), dataset, depth=5, show_progress=False)
    judged = judge_candidates(str(tiny_cross_encoder), dataset, mined, show_progress=False)
    model = CrossEncoder(str(tiny_cross_encoder), device="cpu")
    for c in judged:
        query = dataset.queries[c.qid].text
        assert c.scores == pytest.approx(model.predict([(query, texts[d]) for d in c.docs]).tolist(), abs=1e-4)
        assert c.positive_score == pytest.approx(min(model.predict([(query, texts[p]) for p in c.positives])),
                                                 abs=1e-4)
    # the file keeps exactly the candidates the judge scored at or below its positive (margin 0)
    report = mine_negatives(FixedBackbone(texts), dataset, out, depth=5, keep=10, filter="margin:0",
                            judge=str(tiny_cross_encoder), show_progress=False)
    expected = {c.qid: sorted(d for d, s in zip(c.docs, c.scores) if s <= c.positive_score) for c in judged}
    assert {q: sorted(p["docid"] for p in row["negative_passages"]) for q, row in _lines(out).items()} == \
        {q: kept for q, kept in expected.items() if kept}
    dropped = sum(len(c.docs) for c in judged) - sum(map(len, expected.values()))
    assert 0 < dropped < 7 and report.dropped == dropped and report.judge == str(tiny_cross_encoder)
    assert json.loads((tmp_path / "neg.report.json").read_text())["dropped"] == dropped


def test_a_judge_without_a_filter_is_refused_before_any_work():
    with pytest.raises(StructretError, match="give one too"):
        mine_negatives(None, _dataset(), "unused.jsonl", judge="minilm")


def test_report_sits_beside_the_output():
    assert report_path_for("runs/neg.jsonl.gz") == "runs/neg.report.json"
    assert report_path_for("neg.jsonl") == "neg.report.json"


# --- the command ------------------------------------------------------------------------------


@pytest.fixture
def csn_file(tmp_path):
    rows = [("read a configuration file", "def read_config(path):\n    return open(path).read()"),
            ("parse a date string", "def parse_date(text):\n    return text.split('-')"),
            ("send an email message", "def send_mail(server):\n    server.sendmail()"),
            ("sort a list of numbers", "def sort_numbers(items):\n    return sorted(items)")]
    path = tmp_path / "corpus.jsonl"
    with path.open("w") as f:
        for i, (doc, code) in enumerate(rows):
            f.write(json.dumps({"code": code, "docstring_tokens": doc.split(), "partition": "train",
                                "language": "python", "url": f"u{i}"}) + "\n")
    return path


def test_cli_filters_and_writes_the_report(tmp_path, csn_file, tiny_bert_dir):
    out = tmp_path / "neg.jsonl.gz"
    result = CliRunner().invoke(cli, ["negatives", "--data", f"codesearchnet:{csn_file}", "--split", "train",
                                      "--backbone", "hf-encoder", "--model", str(tiny_bert_dir), "--depth", "4",
                                      "--keep", "3", "--filter", "margin:0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "neg.report.json").read_text())
    assert report["filter"] == "margin:0" and report["queries"] == 4 and report["candidates"] == 12
    assert report["written"] + report["no_negatives"] == 4
    assert f"dropped {report['dropped']} of 12 candidates" in result.output
    written = _lines(out)
    assert sum(len(r["negative_passages"]) for r in written.values()) == 12 - report["dropped"]


@pytest.mark.parametrize("args, said", [
    (["--filter", "margin=0.05"], "is not a filter"),
    (["--filter", "percent:95"], "fraction in (0, 1]"),
    (["--judge", "minilm"], "give a filter too"),
])
def test_cli_bad_filter_or_lone_judge_is_a_usage_error(tmp_path, csn_file, args, said):
    result = CliRunner().invoke(cli, ["negatives", "--data", f"codesearchnet:{csn_file}", *args,
                                      "--out", str(tmp_path / "n.jsonl")])
    assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output
    assert not (tmp_path / "n.jsonl").exists()


def test_cli_help_shows_the_filter_examples():
    result = CliRunner().invoke(cli, ["negatives", "--help"])
    assert result.exit_code == 0
    assert "--filter percent:0.95" in result.output and "--judge" in result.output and "report.json" in result.output


class WordOverlap:
    """A lexical retriever with known scores: the number of the query's words in the document."""

    def fit(self, docs):
        self.docs = [set(d.split()) for d in docs]

    def score(self, queries, doc_indices=None):
        return np.array([[len(set(q.split()) & d) for d in self.docs] for q in queries], dtype=np.float32)


def test_a_lexical_retriever_ranks_the_candidates_with_its_own_scores():
    from structret.negatives import rank_candidates_lexical

    texts = {"p1": "first query words", "p2": "first query", "a": "first query and more", "b": "first",
             "c": "nothing here", "d": "query", "p3": "second query"}
    q1, q2 = rank_candidates_lexical(WordOverlap(), _dataset(texts), depth=4, chunk=1, show_progress=False)
    # q1 "first query": p1 2, p2 2, a 2, b 1, d 1, p3 1 -> top 4 by score, ties in corpus order
    assert q1.positives == ["p1", "p2"] and q1.positive_in_top and q1.positive_score == 2
    assert q1.docs == ["a", "b"] and q1.scores == [2.0, 1.0]
    # "second query": its positive p3 scores 2, then three of the four one-word overlaps (ties in any order)
    assert q2.positive_score == 2 and len(q2.docs) == 3 and set(q2.docs) < {"p1", "p2", "a", "d"}
    assert q2.scores == [1.0, 1.0, 1.0]


def test_cli_mines_with_a_lexical_retriever(tmp_path, csn_file):
    out = tmp_path / "neg.jsonl.gz"
    result = CliRunner().invoke(cli, ["negatives", "--data", f"codesearchnet:{csn_file}", "--split", "train",
                                      "--lexical", "bm25-fields", "--depth", "3", "--keep", "1",
                                      "--filter", "percent:0.95", "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = _lines(out)
    assert written and all(len(r["negative_passages"]) == 1 for r in written.values())
    for row in written.values():  # never the query's own code
        assert row["negative_passages"][0]["docid"] != row["positive_passages"][0]["docid"]
    report = json.loads((tmp_path / "neg.report.json").read_text())
    # no judge: the filter reads the lexical scores (each query's own code scores highest here)
    assert report["judge"] == "bm25-fields" and report["queries"] == 4 and report["written"] == 4


def test_cli_refuses_an_unknown_lexical_retriever(tmp_path, csn_file):
    result = CliRunner().invoke(cli, ["negatives", "--data", f"codesearchnet:{csn_file}", "--lexical", "bm26",
                                      "--out", str(tmp_path / "n.jsonl")])
    assert result.exit_code != 0 and "bm26" in result.output and "Traceback" not in result.output
