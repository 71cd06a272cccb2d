"""structret's public Python API: what the CLI does, callable from a notebook (docs/api.md).

    model = structret.load_model("minilm")
    index = structret.build_index(model, "codesearchnet:corpus.jsonl.gz", split="test")
    hits = index.search(model, "read a config file", k=5)

torch and transformers are imported only when a model is loaded or trained.
"""

from structret import defaults
from structret.api.datasets import filter_pairs
from structret.api.encoding import EncodeResult, encode_dataset, encoding_shard
from structret.api.plugins import (KINDS, PluginWarning, broken_plugins, check_names, describe_plugin, list_plugins,
                                   plugin_of_error)
from structret.api.runs import Run, evaluate, list_recipes, train, tune_fusion
from structret.api.sources import SourceIndexResult, index_source
from structret.api.tables import TableRun, bench_coir, bench_dataset, bench_recipes, bench_suite, bench_systems
from structret.api.updates import UpdateResult, update_index
from structret.artifacts import unverified, verify_tree
from structret.data import parse_options
from structret.datasets import load_dataset
from structret.exporting import export_run
from structret.extraction import extract_file
from structret.figures import plot_figures
from structret.linearization import linearize_file
from structret.models import Model, check_from_scratch, load_model, new_model, open_model
from structret.mining import DEFAULT_EXCLUDE, mine, parse_splits
from structret.negatives import NegativeFilter, mine_negatives
from structret.plugin_tables import parse_settings
from structret.search_index import Hit, SearchIndex, build_index, index_embeddings, load_index, parse_fusion
from structret.serving import serve

__all__ = [
    "DEFAULT_EXCLUDE", "EncodeResult", "Hit", "KINDS", "Model", "NegativeFilter", "PluginWarning", "Run",
    "SearchIndex", "SourceIndexResult", "TableRun", "UpdateResult", "bench_coir", "bench_dataset", "bench_recipes",
    "bench_suite", "bench_systems", "broken_plugins", "build_index", "check_from_scratch", "check_names", "defaults",
    "describe_plugin", "encode_dataset", "encoding_shard", "evaluate", "export_run", "extract_file", "filter_pairs",
    "index_embeddings", "index_source", "linearize_file", "list_plugins", "list_recipes", "load_dataset",
    "load_index", "load_model", "mine", "mine_negatives", "new_model", "open_model", "parse_fusion", "parse_options",
    "parse_settings", "parse_splits", "plot_figures", "plugin_of_error", "serve", "train", "tune_fusion",
    "unverified", "update_index", "verify_tree",
]
