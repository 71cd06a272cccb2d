"""``structret bench --recipe/--suite``: train recipes, evaluate them, print the papers' tables.

A *suite* (a TOML file a plugin registers with ``register_suites``) names
a paper's table: its datasets and metrics (columns), its systems (rows: a pretraining
recipe, an optional fine-tuning recipe and overrides), the paper's reported numbers per
row and column, and the offline stand-in data and backbone to use when the paper's data
is not given.

One module per job: ``files`` (the suite file model and ``load_suite``), ``runner``
(``DataSpec``, fingerprints, the cache and ``Runner``), ``table`` (``BenchTable``: markdown,
JSON, PNG) and ``build`` (``recipes_table``, ``suite_table``, ``assign_data``,
``parse_settings``).

Everything expensive is cached under ``cache_dir()``:

* ``runs/<recipe>-<key>/``: a training run, ``key`` = hash of the resolved recipe (minus
  its output directory and logging fields) plus the identity of its data (spec, options,
  split, file sizes and mtimes) and of its starting model (a cached run by its key, a
  local directory by its files' sizes and mtimes, a hub id by name). Finished runs are
  reused; interrupted ones resume from their last checkpoint.
* ``init/<key>/``: fresh from-scratch models (Khan & Jang) whose tokenizer is learned from
  the training split.
* ``evals/<key>.json``: one system's metrics on one test set, ``key`` = hash of the system
  (run directory + its recipe, or backbone + model identity, or retriever name), the test
  data identity and the protocol settings.

Changing one recipe field therefore re-trains and re-evaluates only the rows it reaches.
With ``seeds`` > 1 (``--seeds N``) each trained cell runs with its recipes' ``seed`` + 0..N-1,
a different resolved recipe and so a cached run per seed; untrained cells are evaluated once.

This package imports only the standard library at import time.
"""

from structret.registry.tables import parse_settings
from structret.suites.build import assign_data, recipes_table, suite_table
from structret.suites.files import (Suite, SuiteDataset, SuiteError, SuiteMetric, SuiteRow, list_suites, load_suite,
                                    suite_entry)
from structret.suites.runner import CACHE_VERSION, Cell, DataSpec, Runner, cache_root, resolve_spec
from structret.suites.table import BenchTable

__all__ = [
    "CACHE_VERSION", "BenchTable", "Cell", "DataSpec", "Runner", "Suite", "SuiteDataset", "SuiteError",
    "SuiteMetric", "SuiteRow", "assign_data", "cache_root", "list_suites", "load_suite", "parse_settings",
    "recipes_table", "resolve_spec", "suite_entry", "suite_table",
]
