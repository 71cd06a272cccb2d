"""How fast the linearizers and entity extractors read code: records/s and MB/s of source, on Python functions
of the installed standard library (mined as ``structret mine`` would: docstrings cut
out, functions under 3 lines dropped).

Compares ``raw`` (tokenize), ``dfs`` and ``dfs-parent`` (``ast``) and, for the parser's
cost, ``dfs`` through tree-sitter; then the two code extractors MEP uses, ``python-tokenize``
and ``tree-sitter``. Run it alone, and show the printed numbers with ``-s``::

    nice pytest benchmarks/bench_linearizers.py -s
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from structret.registry import get_registry


def linearizer(name: str, **options):
    return get_registry().create("linearizer", name, **options)


# the first modules of the standard library in name order: a fixed, varied sample
N_FILES = 60
ROUNDS = 3

CASES = {
    "raw": lambda: linearizer("raw"),
    "raw split": lambda: linearizer("raw", split_identifiers=True),
    "dfs": lambda: linearizer("dfs"),
    "dfs-parent": lambda: linearizer("dfs-parent"),
    "dfs tree-sitter": lambda: linearizer("dfs", parser="tree-sitter"),
}


@pytest.fixture(scope="module")
def functions() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    miner = get_registry().create("miner", "python")
    codes: list[str] = []
    for path in sorted(stdlib.glob("*.py"))[:N_FILES]:
        try:
            codes.extend(f.code for f in miner.functions(path.read_text(encoding="utf-8"), str(path)))
        except (SyntaxError, UnicodeDecodeError):  # a test file kept broken on purpose
            continue
    # as `structret mine` keeps them: a function whose body was only its docstring is no
    # longer valid Python once the docstring is cut out
    codes = [code for code in codes if sum(1 for line in code.splitlines() if line.strip()) >= 3]
    assert len(codes) > 500, f"only {len(codes)} functions found under {stdlib}"
    return codes


@pytest.mark.parametrize("case", list(CASES))
def test_linearizer_throughput(benchmark, functions, case):
    linearizer = CASES[case]()
    linearizer.linearize(functions[0], language="python")  # parser set up outside the timing

    def run() -> int:
        return sum(linearizer.linearize(code, language="python") is not None for code in functions)

    read = benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    assert read == len(functions), linearizer.failures
    report(benchmark, functions, case, f"{len(functions)} functions")


EXTRACTORS = ["python-tokenize", "tree-sitter"]


@pytest.mark.parametrize("name", EXTRACTORS)
def test_extractor_throughput(benchmark, functions, name):
    from structret.registry import get_registry

    extractor = get_registry().create("extractor", name)
    extractor.extract(functions[0], language="python")  # parser set up outside the timing

    def run() -> int:
        return sum(len(extractor.extract(code, language="python")) for code in functions)

    entities = benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    assert entities > len(functions)  # every function names something
    report(benchmark, functions, name, f"{entities} entities")


def report(benchmark, functions: list[str], label: str, detail: str) -> None:
    seconds = benchmark.stats.stats.mean
    megabytes = sum(len(code.encode("utf-8")) for code in functions) / 1e6
    benchmark.extra_info.update(records_per_s=len(functions) / seconds, mb_per_s=megabytes / seconds)
    print(
        f"\n{label:<16} {len(functions) / seconds:>9,.0f} records/s  {megabytes / seconds:6.2f} MB/s  "
        f"({detail}, {megabytes:.2f} MB, mean of {ROUNDS} rounds)"
    )
