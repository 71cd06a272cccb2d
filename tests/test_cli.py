import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from structret.cli import cli

COMMANDS = cli.list_commands(None)  # core's and those plugins add (plot: structret_papers)


def test_the_cli_has_the_commands_the_docs_promise():
    assert {"plugins", "mine", "encode", "index", "search", "bench", "plot"} <= set(COMMANDS)
    assert "plot" not in cli.commands  # a plugin's command, found through the registry


def test_a_plugin_adds_a_command_and_cannot_take_one_of_cores(make_plugin):
    make_plugin("hello-dist", "hello_plugin", """
        import click
        from structret import hookimpl

        @click.command()
        @click.argument("who")
        def hello(who):
            \"\"\"Say hello. Example: structret hello you\"\"\"
            click.echo(f"hello {who}")

        @hookimpl
        def register_commands(register):
            register("hello", hello, help="says hello")
            register("bench", hello, help="tries to take core's bench")
            register("oops", "hello_plugin:missing", help="points at nothing")
    """)
    with pytest.warns(Warning, match="adds the command 'bench', which structret has already"):
        names = cli.list_commands(None)
    assert "hello" in names and names.count("bench") == 1
    result = CliRunner().invoke(cli, ["hello", "you"])
    assert result.exit_code == 0 and result.output == "hello you\n"
    assert "Score retrieval systems" in CliRunner().invoke(cli, ["bench", "--help"]).output  # core's bench
    with pytest.warns(Warning, match="hello_plugin has no 'missing'"):
        result = CliRunner().invoke(cli, ["oops"])
    assert result.exit_code == 2 and "No such command 'oops'" in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_shows_an_example(command):
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and f"structret {command}" in result.output


# a measured duration or the machine it was measured on: those belong in docs/performance.md
_TIMING = re.compile(r"\b\d[\d,.]* ?(s|ms|min|minutes|seconds|hours?)\b|Measured on|\bcores?\b|EPYC|Xeon|\bZen\b|AVX|AMX")


@pytest.mark.parametrize("command", [None, *sorted(cli.commands)])  # core's commands (plugins' are theirs)
def test_no_command_help_quotes_machine_timings(command):
    output = CliRunner().invoke(cli, [command, "--help"] if command else ["--help"]).output
    assert not [line for line in output.splitlines() if _TIMING.search(line)]


def test_plugins_lists_name_kind_distribution_and_help(fresh_registry):
    result = CliRunner().invoke(cli, ["plugins", "--kind", "index"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["kind", "name", "distribution", "help"]
    flat = next(line for line in lines if " flat " in line)
    assert flat.split()[:3] == ["index", "flat", "structret"] and "exact inner product" in flat


def test_plugins_survives_a_broken_plugin(make_plugin):
    site = make_plugin("broken-dist", "broken_cli_plugin", "raise RuntimeError('plugin exploded')\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-m", "structret.cli", "plugins"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "minilm" in out.stdout
    assert "broken-dist" in out.stderr and "plugin exploded" in out.stderr


def test_unknown_plugin_name_is_one_clean_error(fresh_registry, tmp_path):
    result = CliRunner().invoke(cli, ["mine", str(tmp_path), "--language", "pyhton", "--out", str(tmp_path / "x.jsonl.gz")])
    assert result.exit_code == 1
    assert "Did you mean 'python'?" in result.output
    assert "Traceback" not in result.output


def test_extract_prints_spans_kinds_and_a_summary(tmp_path, fresh_registry):
    source = tmp_path / "m.py"
    source.write_text("def sum_two_numbers(a, b):\n    return a + b\n")
    result = CliRunner().invoke(cli, ["extract", "--extractor", "python-tokenize", str(source)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[-1] == "sum_two_numbers" and lines[0].split()[0] == "4-19"
    assert "5 entities, 3 distinct" in result.output


def test_linearize_prints_the_papers_tables(tmp_path, fresh_registry):
    source = tmp_path / "sum.py"
    source.write_text("def sum_two_numbers(a, b): return a + b\n")
    result = CliRunner().invoke(cli, ["linearize", "--linearizer", "dfs-parent", str(source)])
    assert result.exit_code == 0, result.output
    assert ("Module, FunctionDef, sum_two_numbers, arguments, arg, a, arg, b, body, Return, BinOpAdd, "
            "NameLoad, a, NameLoad, b") in result.output
    assert ("None, Module, FunctionDef, FunctionDef, arguments, arg, arguments, arg, FunctionDef, body, "
            "Return, BinOpAdd, NameLoad, BinOpAdd, NameLoad") in result.output


def test_progress_bars_update_rarely_when_stderr_is_not_a_terminal(monkeypatch):
    import io
    import sys

    from structret import cli as cli_module

    for tty, expected in ((False, cli_module.LOG_PROGRESS_SECONDS), (True, None)):
        monkeypatch.delenv("TQDM_MININTERVAL", raising=False)
        stream = io.StringIO()
        stream.isatty = lambda tty=tty: tty
        monkeypatch.setattr(sys, "stderr", stream)
        monkeypatch.setattr(sys, "argv", ["structret", "--version"])
        with pytest.raises(SystemExit):
            cli_module.main()
        assert os.environ.get("TQDM_MININTERVAL") == expected
