"""The example third-party plugin (plugins/example), installed as its own distribution."""

import gzip
import json

from click.testing import CliRunner

from structret.cli import cli
from structret.registry import get_registry

FUNCTIONS = [
    ("read the input file", "def readInputFile(path):\n    with open(path) as f:\n        return f.read()"),
    ("add two numbers", "def addNumbers(a, b):\n    total = a + b\n    return total"),
    ("parse a date string", "def parse_date(text):\n    parts = text.split('-')\n    return tuple(map(int, parts))"),
    ("send an email message", "def send_email(message, server):\n    server.connect()\n    server.send(message)"),
]


def write_csn(path):
    with gzip.open(path, "wt") as f:
        for i, (query, code) in enumerate(FUNCTIONS):
            f.write(json.dumps({
                "repo": "example/repo", "path": f"m{i}.py", "func_name": code.split("(")[0][4:],
                "original_string": code, "language": "python", "code": code, "code_tokens": code.split(),
                "docstring": query, "docstring_tokens": query.split(), "sha": "0" * 40,
                "partition": "test", "url": f"https://example.invalid/m{i}.py#L1-L3",
            }) + "\n")


def test_example_plugin_is_listed_with_its_distribution(fresh_registry):
    registry = get_registry()
    assert registry.get("extractor", "regex-identifiers").distribution == "structret-identifiers"
    assert registry.get("retriever", "identifier-overlap").distribution == "structret-identifiers"
    result = CliRunner().invoke(cli, ["plugins", "--kind", "retriever"])
    assert "identifier-overlap" in result.output and "structret-identifiers" in result.output


def test_example_extractor_returns_character_spans(fresh_registry):
    text = "def readInputFile(path): return open(path)"
    entities = get_registry().create("extractor", "regex-identifiers").extract(text)
    assert [e.text for e in entities] == ["readInputFile", "path", "open", "path"]
    assert all(text[e.start:e.end] == e.text for e in entities)


def test_example_retriever_runs_in_bench_by_name(fresh_registry, tmp_path):
    data = tmp_path / "tiny.jsonl.gz"
    write_csn(data)
    out = tmp_path / "result.json"
    result = CliRunner().invoke(cli, ["bench", "--data", f"codesearchnet:{data}", "--split", "test",
                                      "--system", "identifier-overlap", "--json", str(out)])
    assert result.exit_code == 0, result.output
    row = json.loads(out.read_text())["rows"]["identifier-overlap"]
    # every query shares a distinctive identifier sub-token with its own function only
    assert row["MRR@100 (full pool)"] == 1.0
    # 4 pairs: no full batch of 1000, so both CodeSearchNet columns are n/a
    assert [v for k, v in row.items() if "999" in k] == [None, None]
