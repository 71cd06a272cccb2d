"""The example third-party plugin (plugins/example), installed as its own distribution."""

import gzip
import json
import shutil

import pytest

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


# --- an objective with an option of its own (docs/plugins.md section 7) ----------------------

from _tiny_models import tiny_bert_dir  # noqa: E402,F401  (fixture)


def _margin_recipe(tmp_path, model_dir, **settings):
    from structret.recipes import resolve_recipe

    data = tmp_path / "fns.jsonl.gz"
    write_csn(data)
    file = tmp_path / "margin.toml"
    file.write_text('objective = "margin-nce"\nbackbone = "hf-encoder"\nmax_steps = 2\nbatch_size = 2\n'
                    'split = "test"\ncheckpoint_every = 1\nlog_every = 1\nquery_max_len = 16\npassage_max_len = 32\n'
                    '[margin-nce]\nmargin = 0.3\n')
    values = {"model": str(model_dir), "data": f"codesearchnet:{data}", "output": str(tmp_path / "run"),
              **settings}
    return file, values, resolve_recipe(str(file), values)


def test_example_objective_takes_its_option_from_a_table_and_from_set(tmp_path, tiny_bert_dir):
    _, _, recipe = _margin_recipe(tmp_path, tiny_bert_dir)
    assert recipe.plugins["margin-nce"] == {"margin": 0.3, "scale": 20.0}
    _, _, recipe = _margin_recipe(tmp_path, tiny_bert_dir, **{"margin-nce.margin": "0.5"})
    assert recipe.plugins["margin-nce"]["margin"] == 0.5
    from structret.recipes import RecipeError

    with pytest.raises(RecipeError, match="no option 'margn'. Did you mean 'margin'"):
        _margin_recipe(tmp_path, tiny_bert_dir, **{"margin-nce.margn": "0.5"})
    with pytest.raises(RecipeError, match="margin=5.0: Input should be less than 2"):
        _margin_recipe(tmp_path, tiny_bert_dir, **{"margin-nce.margin": 5.0})


def test_example_objective_trains_from_python_with_its_option(tmp_path, tiny_bert_dir):
    import structret
    from structret.training import build_objectives

    file, values, recipe = _margin_recipe(tmp_path, tiny_bert_dir, **{"margin-nce.margin": 0.4})
    [(objective, weight)] = build_objectives(recipe)
    assert (objective.margin, objective.scale, weight) == (0.4, 20.0, 1.0)
    run = structret.train(str(file), data=values["data"], out=values["output"], model=values["model"],
                          settings={"margin-nce.margin": 0.4})
    assert (run.final / "structret.json").is_file() and run.recipe["plugins"]["margin-nce"]["margin"] == 0.4
    written = (tmp_path / "run" / "recipe.toml").read_text()
    assert "[margin-nce]\nmargin = 0.4\nscale = 20.0" in written
    losses = [json.loads(line)["loss/margin-nce"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)


def test_example_objective_trains_from_the_cli_and_resume_refuses_another_margin(tmp_path, tiny_bert_dir):
    file, values, _ = _margin_recipe(tmp_path, tiny_bert_dir)
    args = ["train", "--recipe", str(file), "--model", values["model"], "--data", values["data"],
            "--out", values["output"], "--set", "margin-nce.margin=0.25", "--set", "max_steps=3"]
    result = CliRunner().invoke(cli, args[:-2] + ["--set", "max_steps=1"])
    assert result.exit_code == 0, result.output
    shutil.rmtree(tmp_path / "run")
    # interrupted after the first checkpoint: resuming with another margin is refused, the same one goes on
    from structret.recipes import resolve_recipe
    from structret.training import train

    calls = []

    def stop(step, logs):
        calls.append(step)
        if step == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(resolve_recipe(str(file), {**values, "margin-nce.margin": 0.25, "max_steps": 3}), callback=stop)
    result = CliRunner().invoke(cli, args[:-4] + ["--set", "margin-nce.margin=0.35", "--set", "max_steps=3",
                                                 "--resume"])
    assert result.exit_code == 1
    assert "margin-nce.margin (saved 0.25, given 0.35)" in result.output
    result = CliRunner().invoke(cli, args + ["--resume"])
    assert result.exit_code == 0, result.output
    assert "resuming from checkpoint-000001" in result.output
