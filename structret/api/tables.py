"""``structret bench``'s tables of trained rows: recipes trained and scored on datasets, and a
paper's suite, each with what making it trained and reused. Training and scoring are cached
under ``STRUCTRET_CACHE``, so a second call recomputes only what changed. (Systems on one
dataset are ``structret.bench.run_bench``, which ``structret.api`` hands on as it is.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from structret.records import Dataset
from structret.registry import get_registry


@dataclass
class TableRun:
    """A recipe or suite table and what making it trained, reused and evaluated."""

    table: Any  # structret.suites.BenchTable
    trained: int
    reused_runs: int
    evaluated: int
    reused_evals: int

    def summary(self) -> str:
        return (f"trained {self.trained}, reused {self.reused_runs} runs; evaluated {self.evaluated}, "
                f"reused {self.reused_evals}")


def bench_recipes(recipes: Sequence[str], data: Sequence[str] = (), *, data_options: dict[str, Any] | None = None,
                  finetune: str | None = None, zero_shot: bool = False, settings: dict[str, Any] | None = None,
                  systems: Sequence[str] = (), backbone: str | None = None, seeds: int = 1, batch_size: int = 32,
                  limit: int | None = None) -> TableRun:
    """Each recipe trained on every dataset's train split (then ``finetune``), scored on its test
    split; ``data`` empty: the mined standard library."""
    from structret import suites as S

    runner = S.Runner(batch_size=batch_size, limit=limit)
    options = dict(data_options or {})
    datas = [S.DataSpec(d, d, d, options) for d in data] or [
        S.DataSpec("stdlib", "mined Python stdlib", S.resolve_spec("stdlib"), options, standin=True)]
    table = S.recipes_table(list(recipes), datas, finetune=finetune, zero_shot=zero_shot, settings=settings or {},
                            systems=list(systems), runner=runner, backbone=backbone, seeds=seeds)
    return _ran(table, runner)


def bench_suite(suite: str, data: Sequence[str] = (), *, data_options: dict[str, Any] | None = None,
                settings: dict[str, Any] | None = None, backbone: str | None = None, rows: Sequence[str] = (),
                seeds: int = 1, batch_size: int = 32, limit: int | None = None) -> TableRun:
    """A paper's table (a shipped suite name or a .toml): its rows and columns, the paper's numbers
    beside the measured ones, offline stand-ins for data not given (``KEY=FORMAT:PATH``)."""
    from structret import suites as S

    runner = S.Runner(batch_size=batch_size, limit=limit)
    table = S.suite_table(S.load_suite(suite), list(data), data_options=dict(data_options or {}),
                          settings=settings or {}, backbone=backbone, runner=runner, rows=list(rows) or None,
                          seeds=seeds)
    return _ran(table, runner)


def suite_needs_root(suite: str) -> bool:
    """Whether ``suite`` is an installed suite built from folders of data (``bench_folders``), not
    read from a suite file (``bench_suite``)."""
    registry = get_registry()
    return registry.has("suite", suite) and not registry.get("suite", suite).is_file


def bench_folders(suite: str, root: str, systems: Sequence[str], *, batch_size: int = 32, limit: int | None = None,
                  vector_cache: bool = True, split: str = "test") -> Any:
    """A suite built from folders of data (CoIR's leaderboard: one task per folder under ``root``):
    every system scored on every task, as the suite's plugin lays out the table (a BenchTable)."""
    from structret.suites import SuiteError, suite_entry

    if suite_entry(suite).is_file:
        raise SuiteError(f"suite '{suite}' is read from a suite file, not built from folders of data: leave out "
                         f"--data-root (give --data KEY=FORMAT:PATH for its datasets).")
    return get_registry().create("suite", suite, root=root, systems=list(systems), batch_size=batch_size,
                                 limit=limit, vector_cache=vector_cache, split=split)


def _ran(table: Any, runner: Any) -> TableRun:
    return TableRun(table, len(runner.trained), len(runner.reused_runs), len(runner.evaluated),
                    len(runner.reused_evals))
