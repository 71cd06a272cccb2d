"""Issue 14 through the command line: what a user gets for bad input, every case with its
exit code, its message and no traceback."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from _tiny_models import tiny_bert_dir  # noqa: F401  (fixture)
from structret.cli import cli


def run(*args: str):
    """``structret ARGS`` in this process; exceptions other than SystemExit escape into the result."""
    return CliRunner().invoke(cli, list(args))


def assert_clean_failure(result, *phrases: str) -> None:
    text = result.output + (result.stderr or "")
    assert result.exit_code not in (0, None), text
    assert "Traceback" not in text, text
    # an uncaught exception is a bug even when click turns it into exit 1
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for phrase in phrases:
        assert phrase in text, f"{phrase!r} not in:\n{text}"


# --- item 5: a plugin cannot take the CLI down --------------------------------------------


@pytest.mark.parametrize("body, said", [
    ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
    ("class Weird(BaseException):\n    pass\nraise Weird('from import')\n", "Weird"),
])
def test_plugin_that_exits_or_raises_baseexception_at_import_is_isolated(make_plugin, body, said):
    make_plugin("exiting-dist", "exiting_plugin", body)
    result = run("plugins")
    assert result.exit_code == 0, result.output + result.stderr
    assert "minilm" in result.stdout and "flat" in result.stdout  # every other plugin still there
    assert "exiting-dist" in result.stderr and said in result.stderr


def test_plugin_whose_hook_exits_is_isolated(make_plugin):
    make_plugin("hook-exit-dist", "hook_exit_plugin", """
        import sys
        from structret import hookimpl
        @hookimpl
        def register_indexes(register):
            sys.exit("no indexes today")
    """)
    result = run("plugins", "--kind", "index")
    assert result.exit_code == 0, result.output + result.stderr
    assert "flat" in result.stdout
    assert "hook-exit-dist" in result.stderr and "no indexes today" in result.stderr


def test_ctrl_c_in_a_plugin_is_not_swallowed(make_plugin):
    from structret.registry import get_registry

    make_plugin("interrupted-dist", "interrupted_plugin", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        get_registry()


# --- data files for the cases below ---------------------------------------------------------


def write_csn(path, n: int, partition: str = "train", *, words: int = 1) -> str:
    """``n`` CodeSearchNet rows of one ``partition``; returns ``codesearchnet:PATH``."""
    import gzip
    import json

    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(n):
            name = f"fn_{i}_" + "_".join(f"w{(i * 7 + j) % 997}" for j in range(words))
            f.write(json.dumps({
                "repo": "r", "path": f"m{i % 13}.py", "func_name": name, "language": "python",
                "partition": partition, "code": f"def {name}(x):\n    return x + {i}\n",
                "docstring": f"compute {name.replace('_', ' ')} value", "code_tokens": ["def", name],
                "docstring_tokens": ["compute", name],
            }) + "\n")
    return f"codesearchnet:{path}"


# --- item 2: empty or missing data is an error --------------------------------------------


def test_bench_on_an_empty_file_names_dataset_split_and_counts(tmp_path):
    import gzip

    gzip.open(tmp_path / "EMPTY.jsonl.gz", "wt").close()
    result = run("bench", "--data", f"codesearchnet:{tmp_path / 'EMPTY.jsonl.gz'}", "--system", "bm25")
    assert_clean_failure(result, "'test' split of codesearchnet:", "EMPTY.jsonl.gz has no documents",
                         "read 0 rows = 0 used + 0 skipped")
    assert "cannot index an empty corpus" not in result.output + result.stderr


def test_bench_on_a_file_without_test_rows_counts_what_was_skipped(tmp_path):
    spec = write_csn(tmp_path / "train-only.jsonl.gz", 5)
    result = run("bench", "--data", spec, "--system", "bm25")
    assert_clean_failure(result, "'test' split of", "has no documents and no queries",
                         "read 5 rows = 0 used + 5 skipped", "partition is not 'test': 5")


def test_index_refuses_to_build_an_empty_index(tmp_path):
    spec = write_csn(tmp_path / "train-only.jsonl.gz", 5)
    out = tmp_path / "idx"
    result = run("index", "--data", spec, "--split", "test", "--out", str(out))
    assert_clean_failure(result, "has no documents", "read 5 rows = 0 used + 5 skipped")
    assert not out.exists()


# --- item 3: every name checked before any heavy work ---------------------------------------


def _cases(data: str, tiny: str, out: str) -> list[tuple[list[str], str]]:
    """(argv, the phrase the error must hold): every kind of name every command takes."""
    return [
        (["index", "--data", data, "--index", "nosuch", "--out", out], "unknown index 'nosuch'. Known indexes:"),
        (["index", "--data", data, "--index", "hsnw", "--out", out], "Did you mean 'hnsw'?"),
        (["index", "--data", f"codesearch:{tiny}", "--out", out], "Did you mean 'codesearchnet'?"),
        (["index", "--data", data, "--backbone", "minlm", "--out", out], "Did you mean 'minilm'?"),
        (["encode", "--data", data, "--backbone", "minlm", "--out", out], "Did you mean 'minilm'?"),
        (["index", "--data", data, "--data-option", "languag=python", "--out", out], "Did you mean 'language'?"),
        (["bench", "--data", data, "--data-option", "max_field_char=9", "--system", "bm25"],
         "Did you mean 'max_field_chars'?"),
        (["negatives", "--data", data, "--backbone", "minlm", "--out", out], "Did you mean 'minilm'?"),
        (["new-model", "--data", data, "--backbone", "informed-transfomer", "--out", out],
         "Did you mean 'informed-transformer'?"),
        (["bench", "--data", data, "--system", "bm52"], "Did you mean 'bm25'?"),
        (["bench", "--recipe", "santa-cod", "--data", data], "Did you mean 'santa-code'?"),
        (["bench", "--recipe", "minilm-code", "--finetune", "santa-code-finetun", "--data", data],
         "Did you mean 'santa-code-finetune'?"),
        (["bench", "--recipe", "minilm-code", "--set", "objective=sda+mep", "--set", "mep.extractor=tree-siter",
          "--data", data],
         "Did you mean 'tree-sitter'?"),
        (["bench", "--suite", "sant"], "Did you mean 'santa'?"),
        (["bench", "--suite", "attempt", "--row", "ATTEMTP"], "Did you mean 'ATTEMPT'?"),
        (["train", "--recipe", "santa-cod", "--data", data, "--out", out], "Did you mean 'santa-code'?"),
        (["train", "--objective", "sda+mpe", "--data", data, "--out", out], "Did you mean 'mep'?"),
        (["train", "--backbone", "codet5-bas", "--data", data, "--out", out], "Did you mean 'codet5-base'?"),
        (["train", "--objective", "sda", "--data", f"codesearchnt:{tiny}", "--out", out],
         "Did you mean 'codesearchnet'?"),
        (["train", "--recipe", "santa-code", "--set", "extractor=python-tokenise", "--data", data, "--out", out],
         "Did you mean 'python-tokenize'?"),
        (["train", "--recipe", "attempt", "--set", "text_format=aspect", "--data", data, "--out", out],
         "Did you mean 'aspects'?"),
        (["extract", "--extractor", "tree-siter", tiny], "Did you mean 'tree-sitter'?"),
        (["linearize", "--linearizer", "dfs-parnt", tiny], "Did you mean 'dfs-parent'?"),
        (["mine", tiny.rsplit("/", 1)[0], "--language", "pyton", "--out", out + ".gz"], "Did you mean 'python'?"),
    ]


def test_every_plugin_name_is_checked_before_data_is_read_or_torch_imported(tmp_path):
    """All cases in one fresh interpreter: nothing may import torch or read the (large) data
    before the name is found wrong."""
    import json
    import subprocess
    import sys

    data = write_csn(tmp_path / "big.jsonl.gz", 3000)
    tiny = tmp_path / "tiny.py"
    tiny.write_text("def f(x):\n    return x\n")
    cases = _cases(data, str(tiny), str(tmp_path / "out"))
    code = f"""
import io, json, sys, contextlib
from click.testing import CliRunner
from structret.cli import cli
out = []
for argv, _ in {json.dumps(cases)}:
    r = CliRunner().invoke(cli, argv)
    out.append([r.exit_code, r.output + r.stderr, repr(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else None,
                [m for m in ("torch", "transformers") if m in sys.modules]])
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for (argv, phrase), (code_, text, exception, heavy) in zip(cases, results):
        assert code_ not in (0, None) and exception is None, (argv, code_, exception, text)
        assert "Traceback" not in text and phrase in text, (argv, text)
        assert "rows =" not in text, (argv, "the data was read before the name was checked", text)
        assert heavy == [], (argv, "imported", heavy)


@pytest.mark.parametrize("option, phrase", [
    (["--index", "hnsw", "--index-option", "m=32"], "Did you mean 'M'?"),
    (["--index", "flat", "--index-option", "efx=3"], "Its options: chunk_size (int, default 65536)"),
    (["--backbone-option", "dtyp=fp32"], "Did you mean 'dtype'?"),
    (["--backbone-option", "poolng=mean"], "Did you mean 'pooling'?"),
])
def test_every_option_key_is_checked_before_data_is_read(tmp_path, option, phrase):
    data = write_csn(tmp_path / "d.jsonl.gz", 20, "test")
    result = run("index", "--data", data, *option, "--out", str(tmp_path / "idx"))
    assert_clean_failure(result, phrase)
    assert "rows =" not in result.stderr  # failed before reading


# --- item 7: messages and output say what is true --------------------------------------------


def test_resume_hint_names_the_real_flag(tmp_path):
    data = write_csn(tmp_path / "d.jsonl.gz", 5)
    run_dir = tmp_path / "run"
    (run_dir / "checkpoint-000010" / "trainer").mkdir(parents=True)
    (run_dir / "checkpoint-000010" / "trainer" / "state.json").write_text("{}")
    result = run("train", "--recipe", "minilm-code", "--data", data, "--out", str(run_dir))
    assert_clean_failure(result, "pass --resume", "another --out directory")
    assert "--output" not in result.output + result.stderr


def test_bench_help_says_what_the_default_run_does_and_where_its_timings_are():
    text = " ".join(run("bench", "--help").output.split())  # click wraps to the terminal's width
    assert "a few minutes" not in text and "a few minutes" not in run("--help").output
    for phrase in ("standard library", "BM25", "MiniLM", "docs/performance.md"):
        assert phrase in text, phrase
    for timing in ("Measured on", "2 cores", "EPYC", "Xeon", " s,", " s ("):  # timings: docs/performance.md
        assert timing not in text, timing


def test_list_recipes_shows_each_recipes_description_and_what_it_reproduces():
    from structret.recipes import list_recipes

    result = run("train", "--list-recipes")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert len(lines) == 2 * len(list_recipes())
    for name, line, source in zip(list_recipes(), lines[::2], lines[1::2]):
        assert line.startswith(name) and len(line.split(None, 1)[1]) > 20, line
        assert source.strip().startswith("reproduces: ") and "(not stated)" not in source, source
    assert "SANTA, Table 3 row 'SANTA (Entity Mask)'" in result.output


def test_linearize_labels_the_sequence_and_the_parent_table(tmp_path):
    path = tmp_path / "figure2.py"
    path.write_text("def sum_two_numbers(a, b):\n    return a + b\n")
    lines = run("linearize", "--linearizer", "dfs-parent", str(path)).output.splitlines()
    assert lines[0].startswith("DFS sequence (15 tokens, python")
    assert lines[1].startswith("Module, FunctionDef, sum_two_numbers")
    assert lines[2].startswith("DFS-Parent sequence (")
    assert lines[3].startswith("None, Module, FunctionDef")


def test_bench_table_names_its_settings_and_the_csn_pairs_it_scored(tmp_path):
    data = write_csn(tmp_path / "d.jsonl.gz", 1050, "test", words=3)
    result = run("bench", "--data", data, "--system", "bm25")
    assert result.exit_code == 0, result.output + result.stderr
    assert "CSN-999 scored 1000 of the 1050 pairs (1 batches; the last 50 dropped)" in result.output
    assert "- bm25: bm25s lucene, k1=1.5, b=0.75, stopwords en (" in result.output
    assert "camelCase/snake_case parts" in result.output


def test_dense_settings_name_model_length_pooling_and_dtype(tiny_bert_dir):
    from structret.search.system import DenseRetriever
    from structret_backbones.hf import HFEncoder

    text = DenseRetriever(HFEncoder(tiny_bert_dir, pooling="mean", max_length=64, dtype="fp32")).settings()
    assert "max 64 tokens" in text and "mean pooling" in text and "fp32 encoding" in text


def test_bench_encodes_queries_once_under_one_bar(make_plugin, tmp_path):
    """The CSN protocol scores queries in batches; each batch used to open its own bar."""
    make_plugin("counting-dist", "counting_plugin", """
        import numpy as np
        CALLS = []

        class Counting:
            name, dim, capabilities = "counting", 8, ()

            def encode(self, texts, *, kind="document", batch_size=32, show_progress=False):
                CALLS.append((kind, len(texts), show_progress))
                rng = np.random.default_rng(len(texts))
                return rng.standard_normal((len(texts), self.dim)).astype("float32")

        from structret import hookimpl

        @hookimpl
        def register_backbones(register):
            register("counting", Counting)
    """)
    import counting_plugin

    data = write_csn(tmp_path / "d.jsonl.gz", 1100, "test", words=2)
    result = run("bench", "--data", data, "--system", "counting")
    assert result.exit_code == 0, result.output + result.stderr
    queries = [c for c in counting_plugin.CALLS if c[0] == "query"]
    assert len(queries) == 1 and queries[0][1] == 1100, counting_plugin.CALLS


def test_a_reader_that_stops_early_ends_the_command_quietly():
    # `structret plugins | head -1`: the closed pipe is the reader's choice, not a plugin's failure
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("structret") or str(Path(sys.executable).with_name("structret"))
    done = subprocess.run(f"'{exe}' plugins | head -1", shell=True, capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("kind") and done.stderr == ""
