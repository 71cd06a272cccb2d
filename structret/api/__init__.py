"""structret's public Python API: what the CLI does, callable from a notebook (docs/api.md).

    model = structret.load_model("minilm")
    index = structret.build_index(model, "codesearchnet:corpus.jsonl.gz", split="test")
    hits = index.search(model, "read a config file", k=5)

torch and transformers are imported only when a model is loaded or trained, and each name
below is imported when it is first used: ``structret --help`` and ``import structret.api`` pay
only for the registry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from structret import defaults
from structret.api.plugins import (KINDS, PluginWarning, broken_plugins, command_names, describe_plugin, list_plugins,
                                   load_command, plugin_of_error)

if TYPE_CHECKING:
    from structret.api.checks import check_names
    from structret.api.datasets import filter_pairs
    from structret.api.encoding import EncodeResult, encode_dataset, encoding_shard
    from structret.api.mcp import create_mcp_server, run_mcp
    from structret.api.runs import Run, evaluate, list_recipes, train, tune_fusion
    from structret.project.index import SourceIndexResult, index_source, refresh_source
    from structret.api.tables import TableRun, bench_folders, bench_recipes, bench_suite, suite_needs_root
    from structret.search.update import UpdateResult, update_index
    from structret.artifacts import checked_once, unverified, verify_tree
    from structret.bench import default_dataset, run_bench
    from structret.datasets import load_dataset
    from structret.exporting import export_run
    from structret.extraction import extract_file
    from structret.registry.keyvalue import parse_options
    from structret.search.build import build_index, index_embeddings
    from structret.linearization import linearize_file
    from structret.models import Model, ModelChoice, check_from_scratch, load_model, new_model, open_model
    from structret.mining import DEFAULT_EXCLUDE, mine, parse_splits
    from structret.negatives import NegativeFilter, mine_negatives
    from structret.registry.tables import parse_settings
    from structret.search.index import Hit, SearchIndex, load_index
    from structret.search.system import parse_fusion
    from structret.serving import serve
    from structret.snippets import locate, mark_terms, query_terms, readable

# the module that defines each name, imported on first use (the lightness the docstring promises);
# tests/test_api.py checks this table and the imports above name the same things
_LAZY_MODULES = {
    "structret.api.checks": ("check_names",),
    "structret.api.datasets": ("filter_pairs",),
    "structret.api.encoding": ("EncodeResult", "encode_dataset", "encoding_shard"),
    "structret.api.mcp": ("create_mcp_server", "run_mcp"),
    "structret.api.runs": ("Run", "evaluate", "list_recipes", "train", "tune_fusion"),
    "structret.project.index": ("SourceIndexResult", "index_source", "refresh_source"),
    "structret.api.tables": ("TableRun", "bench_folders", "bench_recipes", "bench_suite", "suite_needs_root"),
    "structret.search.update": ("UpdateResult", "update_index"),
    "structret.artifacts": ("checked_once", "unverified", "verify_tree"),
    "structret.bench": ("default_dataset", "run_bench"),
    "structret.datasets": ("load_dataset",),
    "structret.exporting": ("export_run",),
    "structret.extraction": ("extract_file",),
    "structret.registry.keyvalue": ("parse_options",),
    "structret.linearization": ("linearize_file",),
    "structret.models": ("Model", "ModelChoice", "check_from_scratch", "load_model", "new_model", "open_model"),
    "structret.mining": ("DEFAULT_EXCLUDE", "mine", "parse_splits"),
    "structret.negatives": ("NegativeFilter", "mine_negatives"),
    "structret.registry.tables": ("parse_settings",),
    "structret.search.build": ("build_index", "index_embeddings"),
    "structret.search.index": ("Hit", "SearchIndex", "load_index"),
    "structret.search.system": ("parse_fusion",),
    "structret.serving": ("serve",),
    "structret.snippets": ("locate", "mark_terms", "query_terms", "readable"),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}

__all__ = [
    "DEFAULT_EXCLUDE", "EncodeResult", "Hit", "KINDS", "Model", "ModelChoice", "NegativeFilter", "PluginWarning", "Run",
    "SearchIndex", "SourceIndexResult", "TableRun", "UpdateResult", "bench_folders", "bench_recipes",
    "bench_suite", "broken_plugins", "build_index", "check_from_scratch", "check_names", "checked_once", "command_names", "create_mcp_server", "default_dataset", "defaults",
    "describe_plugin", "encode_dataset", "encoding_shard", "evaluate", "export_run", "extract_file", "filter_pairs",
    "index_embeddings", "index_source", "linearize_file", "list_plugins", "list_recipes", "load_command", "load_dataset",
    "load_index", "load_model", "locate", "mine", "mine_negatives", "new_model", "open_model", "parse_fusion", "parse_options",
    "parse_settings", "parse_splits", "plugin_of_error", "mark_terms", "refresh_source", "query_terms", "readable", "run_bench", "run_mcp", "serve", "suite_needs_root", "train", "tune_fusion",
    "unverified", "update_index", "verify_tree",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'structret.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
