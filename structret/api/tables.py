"""Results tables, as ``structret bench`` prints them: systems scored on one dataset, recipes
trained and scored on datasets, a paper's suite, and CoIR's leaderboard table. Each returns
the table (``markdown()``; ``write(out)`` or ``write_json(path)``); training and scoring are
cached under ``STRUCTRET_CACHE``, so a second call recomputes only what changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from structret.records import Dataset


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


def bench_dataset(split: str | None = None) -> Dataset:
    """The installed Python standard library mined into CodeSearchNet rows (cached): ``bench``'s default data."""
    from structret.bench import default_dataset  # numpy: kept out of import structret.api

    return default_dataset(split=split)


def bench_systems(dataset: Dataset, systems: Sequence[str], *, batch_size: int = 32, limit: int | None = None,
                  vector_cache: bool = True, fusion: Any = None, tune: Dataset | None = None,
                  tune_measure: str | None = None) -> Any:
    """Each system (a retriever, a backbone, a run, or LEXICAL+DENSE) scored on ``dataset`` with its
    task's protocol; ``fusion`` or the fusion best on ``tune`` for hybrids (structret.bench.run_bench)."""
    from structret.bench import run_bench  # numpy: kept out of import structret.api

    return run_bench(dataset, list(systems), batch_size=batch_size, limit=limit, vector_cache=vector_cache,
                     fusion=fusion, tune=tune, tune_measure=tune_measure)


def bench_recipes(recipes: Sequence[str], data: Sequence[str] = (), *, data_options: dict[str, Any] | None = None,
                  finetune: str | None = None, zero_shot: bool = False, settings: dict[str, Any] | None = None,
                  systems: Sequence[str] = (), backbone: str | None = None, seeds: int = 1, batch_size: int = 32,
                  limit: int | None = None) -> TableRun:
    """Each recipe trained on every dataset's train split (then ``finetune``), scored on its test
    split; ``data`` empty: the mined standard library."""
    # suites: ~15 ms (statistics, tomllib, 5 modules) kept out of import structret.api
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
    # suites: ~15 ms (statistics, tomllib, 5 modules) kept out of import structret.api
    from structret import suites as S

    runner = S.Runner(batch_size=batch_size, limit=limit)
    table = S.suite_table(S.load_suite(suite), list(data), data_options=dict(data_options or {}),
                          settings=settings or {}, backbone=backbone, runner=runner, rows=list(rows) or None,
                          seeds=seeds)
    return _ran(table, runner)


def bench_coir(root: str, systems: Sequence[str], *, batch_size: int = 32, limit: int | None = None,
               vector_cache: bool = True, split: str = "test") -> Any:
    """Every system on every CoIR task folder under ``root``: nDCG@10 per task and their mean."""
    # suites: ~15 ms (statistics, tomllib, 5 modules) kept out of import structret.api
    from structret.suites.coir import coir_table

    return coir_table(root, list(systems), batch_size=batch_size, limit=limit, vector_cache=vector_cache, split=split)


def _ran(table: Any, runner: Any) -> TableRun:
    return TableRun(table, len(runner.trained), len(runner.reused_runs), len(runner.evaluated),
                    len(runner.reused_evals))
