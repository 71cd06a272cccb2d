"""The import-cost rule (docs/architecture.md): the light imports and commands load no heavy
library, each checked in a fresh interpreter by one mechanism (tests/_import_cost.py) that names
the chain of calls that loaded one, should it happen:

    structret search IDX 'read a file' loaded torch: structret/cli.py:608 (search) model = found.model
      -> structret/search/index.py:154 (SearchIndex.model) model = open_model(...) -> ...
      -> plugins/structret_backbones/hf.py:12 import torch
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click
import pytest
from _import_cost import LIGHT, TORCH, run_code, run_commands
from _tiny_models import build_lively_bert, tiny_bert_dir  # noqa: F401  (fixture)

from structret.errors import StructretError

# --- the mechanism, on made-up packages --------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")


def test_the_guard_names_the_chain_of_calls_that_loaded_a_forbidden_library(tmp_path):
    _write(tmp_path, {
        "fakecore/__init__.py": "",
        "fakecore/cli.py": """\
            import importlib


            def main():
                return importlib.import_module("fakecore.search").run()
            """,
        "fakecore/search.py": """\
            def run():
                from fakelib import value  # a library of someone else's, which imports the heavy one
                return value
            """,
        "fakelib.py": "import fakeheavy.sub\nvalue = fakeheavy.sub.VALUE\n",
        "fakeheavy/__init__.py": "",
        "fakeheavy/sub.py": "VALUE = 1\n",
        "fakeoptional.py": """\
            def probe():
                import importlib.util
                return importlib.util.find_spec("fakeheavy") is not None  # asks, loads nothing


            def attempt():
                try:
                    import fakemissing  # noqa: F401
                except ImportError:  # not installed; the attempt is still the import's cost
                    return False
            """,
    })
    done = run_code("import fakecore.cli, fakeoptional\nassert fakeoptional.probe()\nfakeoptional.attempt()",
                    "fakecore.cli.main()", forbidden=("fakeheavy", "fakemissing", "json_absent"),
                    roots=[tmp_path / "fakecore", tmp_path / "fakeoptional.py"], env={"PYTHONPATH": str(tmp_path)},
                    cwd=tmp_path).check()
    assert set(done.loaded) == {"fakeheavy", "fakemissing"}  # the probe of fakeheavy was no load
    heavy = done.loaded["fakeheavy"]
    assert heavy.label == "snippet 1"
    assert heavy.chain[:3] == [
        "<snippet 1>:1 fakecore.cli.main()",
        'fakecore/cli.py:5 (main) return importlib.import_module("fakecore.search").run()',
        "fakecore/search.py:2 (run) from fakelib import value  # a library of someone else's, which imports the heavy one",
    ]
    assert len(heavy.chain) == 4 and heavy.chain[3].endswith("fakelib.py:1 import fakeheavy.sub")  # past our frames
    assert str(heavy).startswith("snippet 1 loaded fakeheavy: <snippet 1>:1 fakecore.cli.main()\n  -> fakecore/cli.py:5")
    assert done.loaded["fakemissing"].chain[-1] == "fakeoptional.py:8 (attempt) import fakemissing  # noqa: F401"


def test_the_guard_runs_commands_in_turn_and_says_which_one_loaded_it(tmp_path):
    """A command's failure ends the run, with its exit status; what was recorded before is kept."""
    done = run_commands(["--help"], ["search", str(tmp_path / "nowhere"), "q"], ["--help"])
    assert done.returncode == 2 and "does not exist" in done.stderr and done.loaded == {}
    assert "structret search " + str(tmp_path / "nowhere") + " q: exit 2" in done.stderr
    assert "Usage: structret" in done.stdout


# --- the rule, on structret --------------------------------------------------------------

# Each light import and what it keeps out (what the comments beside the imports inside functions said)
LIGHT_IMPORTS = [
    ("structret", LIGHT),  # a plugin's hookimpl imports it
    ("structret.api", LIGHT),  # its names load on first use
    ("structret.plugin", (*TORCH, "numpy")),  # a plugin's options module imports it
    ("structret.testing", (*TORCH, "numpy")),  # a plugin's tests import it, torch only to build a model
    ("structret.suites", (*TORCH, "numpy", "pydantic", "matplotlib")),
    ("structret.training", ("transformers", "accelerate", "safetensors")),
    ("structret.exporting.onnx_graph", TORCH),
    ("structret.onnx_encoder", (*TORCH, "onnxruntime", "tqdm")),
    ("structret.embeddings", (*TORCH, "tqdm")),
    ("structret.evaluation", (*TORCH, "ir_measures", "pytrec_eval")),
    ("structret.serving", (*TORCH, "starlette", "uvicorn", "pygments")),
]


@pytest.mark.parametrize("module, forbidden", LIGHT_IMPORTS, ids=[m for m, _ in LIGHT_IMPORTS])
def test_a_light_import_loads_nothing_heavy(module, forbidden):
    done = run_code(f"import {module}", forbidden=forbidden).check()
    assert not done.loaded, done.report()


def test_resolving_the_api_names_a_search_needs_loads_no_torch():
    done = run_code("import structret\nfrom structret.api import load_model, load_index, build_index, index_source\n"
                    "assert structret.load_model is load_model").check()
    assert not done.loaded, done.report()


def test_help_of_every_command_and_the_plugin_list_load_nothing_heavy():
    """One interpreter for all of them: a library one loads is named with that command."""
    from structret.cli import cli

    commands = cli.list_commands(click.Context(cli))
    assert {"search", "index", "train", "plugins"} <= set(commands)
    done = run_commands(["--help"], *([name, "--help"] for name in commands), ["plugins"],
                        ["plugins", "--kind", "backbone"], forbidden=LIGHT).check()
    assert not done.loaded, done.report()
    assert "Usage: structret search" in done.stdout and "Usage: structret verify" in done.stdout


# --- structret search of a saved index ---------------------------------------------------

SOURCE = {
    "config.py": '''\
        def read_config(path):
            """Read a configuration file and return its settings."""
            with open(path) as f:
                return dict(line.split("=", 1) for line in f)


        def parse_date(text):
            """Parse an ISO date string into a tuple of integers."""
            return tuple(int(x) for x in text.split("-"))
        ''',
    "mail.py": '''\
        def send_mail(server, message):
            """Send an email message through an SMTP server."""
            server.sendmail(message)
            server.quit()


        def sort_numbers(items):
            """Sort a list of numbers in ascending order."""
            return sorted(items)
        ''',
}
QUERY = "read a configuration file"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, tiny_bert_dir):  # noqa: F811
    """A source folder indexed by a tiny BERT (torch), and the folder of its ONNX copy. The lively one: at
    BERT's own init every text gets nearly the same vector, and the fused scores would be float noise."""
    import structret.api as api

    tmp = tmp_path_factory.mktemp("import-cost")
    _write(tmp / "src", SOURCE)
    model = api.open_model("hf-encoder", str(build_lively_bert(tiny_bert_dir, tmp / "bert")))
    api.index_source(tmp / "src", tmp / "torch-idx", model=model, show_progress=False)
    onnx = model.backbone.onnx_twin()
    assert onnx is not None and (Path(onnx) / "onnx_export.json").is_file()
    return tmp, Path(onnx)


def test_search_of_an_index_of_a_torch_model_loads_torch_and_the_guard_says_through_what(indexes):
    """The mechanism on the real code: today's default index encodes queries with its own model."""
    tmp, _ = indexes
    done = run_commands(["search", tmp / "torch-idx", QUERY]).check()
    assert set(done.loaded) == {"torch", "transformers"}
    chain = done.loaded["torch"].chain
    assert done.loaded["torch"].label == f"structret search {tmp / 'torch-idx'} {QUERY!r}"
    assert any(step.startswith("structret/cli.py:") and "(search)" in step for step in chain), chain
    assert chain[-1].startswith("plugins/structret_backbones/"), chain


def test_an_index_built_with_an_onnx_export_is_built_and_searched_without_torch(indexes):
    """``--model`` a folder of 'structret export --format onnx' (here the tiny BERT's ONNX copy): the index
    records it, and 'structret search' encodes queries with onnxruntime, as the index was built."""
    import structret.api as api

    tmp, onnx = indexes
    built = run_commands(["index", tmp / "src", "--model", onnx, "--out", tmp / "onnx-idx"]).check()
    assert not built.loaded, built.report()
    assert "indexed 4 units" in built.stdout, built.stdout
    meta = json.loads((tmp / "onnx-idx" / "structret.json").read_text(encoding="utf-8"))
    assert meta["backbone"] == "onnx" and meta["model_override"] == str(onnx)
    searched = run_commands(["search", tmp / "onnx-idx", QUERY, "-k", "4", "--json"]).check()
    assert not searched.loaded, searched.report()
    hits = json.loads(searched.stdout)[0]["hits"]
    index = api.load_index(tmp / "onnx-idx")
    expected = index.search(api.load_model(str(onnx)), QUERY, k=4)
    assert [h["id"] for h in hits] == [h.id for h in expected] and len(hits) == 4
    assert [h["score"] for h in hits] == pytest.approx([h.score for h in expected], rel=1e-5)
    assert index.model.backbone_name == "onnx"  # SearchIndex.model reopens the export, not the torch model



def test_a_bm25_index_is_built_and_searched_without_torch(tmp_path):
    """``structret index --backbone none --lexical bm25``: no vectors and nothing that encodes, built and
    searched with no torch; the command's hits are the API's, all from the lexical side."""
    import structret.api as api

    data = f"codesearchnet:{Path(__file__).parent / 'data' / 'csn' / 'mined' / 'functions.jsonl.gz'}"
    query = "parse a duration such as 1h30m into seconds"
    done = run_commands(["index", "--data", data, "--backbone", "none", "--lexical", "bm25", "--out", tmp_path / "idx"],
                        ["search", tmp_path / "idx", query, "-k", "3", "--json"]).check()
    assert not done.loaded, done.report()
    meta = json.loads((tmp_path / "idx" / "structret.json").read_text(encoding="utf-8"))
    assert meta["index"] is None and meta["model"] is None and meta["lexical"]["retriever"] == "bm25"
    hits = json.loads(done.stdout[done.stdout.index("["):])[0]["hits"]
    assert len(hits) == 3 and all(h["sources"] == ["lexical"] for h in hits)
    index = api.load_index(tmp_path / "idx")
    assert len(index) == len(api.load_dataset(data).corpus) and index.fusion is None
    expected = index.search([query], k=3)[0]
    assert [h["id"] for h in hits] == [h.id for h in expected]
    assert "parse_duration" in expected[0].text and expected[0].score > expected[1].score
    with pytest.raises(StructretError, match="lexical"):
        api.update_index(tmp_path / "idx", add=data)
