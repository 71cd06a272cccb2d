"""Consistency filtering: a pair is kept only if its query finds its own code in the pool."""

import gzip
import json

import pytest

from structret.consistency import filter_pairs, own_ranks, report_path
from structret.datasets import load_dataset
from structret.errors import StructretError

ROWS = [  # (language, function name, code body, docstring)
    ("python", "parse_date", "return tuple(int(x) for x in text.split('-'))", "parse date text into numbers"),
    ("python", "send_mail", "server.sendmail(message)", "send mail message through the server"),
    ("python", "count_words", "return len(text.split())", "TODO remove this later please"),
    ("go", "ReadConfig", "return os.ReadFile(path)", "read config file from path"),
    ("go", "WriteLog", "log.Println(line)", "write log line"),
    ("go", "Helper", "return nil", "see the other one for details"),
]


def write_rows(path, rows=ROWS, partition="train"):
    with gzip.open(path, "wt") as f:
        for i, (language, name, body, doc) in enumerate(rows):
            code = f"def {name}(text):\n    {body}" if language == "python" else f"func {name}() {{\n\t{body}\n}}"
            f.write(json.dumps({"repo": "r", "path": f"f{i}", "func_name": name, "language": language, "code": code,
                                "code_tokens": code.split(), "docstring": doc, "docstring_tokens": doc.split(),
                                "url": f"u{i}", "partition": partition}) + "\n")
    return path


def bm25():
    from structret_lexical.bm25 import BM25Retriever

    return BM25Retriever()


def test_each_pair_is_ranked_within_its_language(tmp_path, fresh_registry):
    dataset = load_dataset(f"codesearchnet:{write_rows(tmp_path / 'rows.jsonl.gz')}", split="train")
    ranks = own_ranks(bm25(), dataset)
    assert ranks["u0"] == ranks["u1"] == ranks["u3"] == ranks["u4"] == 1
    # a docstring sharing no word with any function: every document ties, and ties count against it
    assert ranks["u2"] == 3 and ranks["u5"] == 3
    assert own_ranks(bm25(), dataset, within="all")["u2"] == 6


def test_filtered_pairs_are_written_as_rows_the_reader_reads_back(tmp_path, fresh_registry):
    source = load_dataset(f"codesearchnet:{write_rows(tmp_path / 'rows.jsonl.gz')}", split="train")
    out = tmp_path / "kept.jsonl.gz"
    report = filter_pairs(bm25(), source, out, k=1, teacher="bm25")
    assert report.kept == {"python": 2, "go": 2} and report.dropped == {"python": 1, "go": 1}
    assert report.pool == {"python": 3, "go": 3}
    kept = load_dataset(f"codesearchnet:{out}", split="train")
    assert sorted(kept.corpus) == ["u0", "u1", "u3", "u4"]
    for i in kept.corpus:
        assert kept.corpus[i].text() == source.corpus[i].text() and kept.queries[i].text == source.queries[i].text
    saved = json.loads(open(report_path(out)).read())
    assert saved["k"] == 1 and saved["dropped"] == {"python": 1, "go": 1}
    assert "python: 2 of 3 kept, 1 dropped (33.3%)" in report.summary()


def test_bad_settings_are_refused(tmp_path, fresh_registry):
    dataset = load_dataset(f"codesearchnet:{write_rows(tmp_path / 'rows.jsonl.gz')}", split="train")
    with pytest.raises(StructretError, match="at least 1"):
        filter_pairs(bm25(), dataset, tmp_path / "o.jsonl.gz", k=0)
    with pytest.raises(StructretError, match="'language' or 'all'"):
        own_ranks(bm25(), dataset, within="repo")


def test_the_command_filters_with_a_dense_teacher(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from structret.cli import cli

    monkeypatch.setenv("STRUCTRET_CACHE", str(tmp_path / "cache"))
    data = write_rows(tmp_path / "rows.jsonl.gz")
    out = tmp_path / "kept.jsonl.gz"
    result = CliRunner().invoke(cli, ["filter-pairs", "--data", f"codesearchnet:{data}", "--top-k", "2",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "kept.report.json").read_text())
    assert saved["teacher"] == "minilm" and sum(saved["kept"].values()) + sum(saved["dropped"].values()) == 6
    assert "all: " in result.output
    refused = CliRunner().invoke(cli, ["filter-pairs", "--data", f"codesearchnet:{data}", "--teacher", "bm25",
                                       "--out", str(out)])
    assert refused.exit_code == 1 and "not a dense model" in refused.output


def test_the_pair_kind_survives_the_filter_and_is_counted(tmp_path, fresh_registry):
    path = write_rows(tmp_path / "rows.jsonl.gz")
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    rows[0]["pair_kind"] = "name-signature"
    rows[2]["pair_kind"] = "leading-comment"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    dataset = load_dataset(f"codesearchnet:{path}", split="train")
    assert dataset.corpus["u0"].pair_kind == "name-signature" and dataset.corpus["u1"].pair_kind == ""
    out = tmp_path / "kept.jsonl.gz"
    report = filter_pairs(bm25(), dataset, out, k=1)
    assert report.kept_by_kind == {"name-signature": 1, "docstring": 3}
    assert report.dropped_by_kind == {"leading-comment": 1, "docstring": 1}
    assert load_dataset(f"codesearchnet:{out}", split="train").corpus["u0"].pair_kind == "name-signature"
    assert "queries from leading-comment: 0 of 1 kept" in report.summary()


def test_a_minimum_score_drops_pairs_the_teacher_scores_too_low(tmp_path, fresh_registry):
    from structret.consistency import own_ranks_and_scores

    source = load_dataset(f"codesearchnet:{write_rows(tmp_path / 'rows.jsonl.gz')}", split="train")
    found = own_ranks_and_scores(bm25(), source)
    assert {q: r for q, (r, _) in found.items()} == own_ranks(bm25(), source)
    ranked_first = sorted(found[q][1] for q in ("u0", "u1", "u3", "u4"))
    bar = (ranked_first[0] + ranked_first[1]) / 2  # between the two lowest-scoring top-1 pairs
    report = filter_pairs(bm25(), source, tmp_path / "kept.jsonl.gz", k=1, min_score=bar, teacher="bm25")
    assert sum(report.kept.values()) == 3 and report.min_score == bar
    assert f"and scores it above {bar:g}" in report.summary()
