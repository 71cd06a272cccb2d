"""The part of core a plugin may use: everything a plugin package imports from structret comes
from here, from ``structret.errors`` or ``structret.records`` (and ``hookimpl`` from ``structret``),
or is the public Python API (``structret.api``, for a plugin that runs whole jobs: a command, a figure).
tests/test_architecture.py enforces it, and that no plugin package imports another: what two
plugins share (the parent-attention targets of the ``structure-attention`` capability) lives in
core and is offered here.

    from structret.plugin import Options, ObjectiveDefaults, get_registry

A name here is a promise to plugin authors: it changes only with a note in docs/plugins.md.
Names that would import numpy or torch (indexing helpers, parent attention, the ONNX export) are
imported on first use, so a plugin's options module, which ``structret plugins`` and ``--help``
import, stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from structret import precision
from structret.artifacts import atomic_dir, cache_dir, verify_checksums, write_meta
from structret.batching import PAD_TO, WINDOW, budget, token_batches
from structret.contracts import (
    AuxiliaryObjective,
    Backbone,
    ContrastiveObjective,
    CorruptionObjective,
    DatasetReader,
    Extractor,
    Index,
    LanguageModelBackbone,
    Linearizer,
    Miner,
    Objective,
    ObjectiveDefaults,
    Retriever,
    TrainableBackbone,
    check_entities,
)
from structret.hookspecs import hookimpl
from structret.mining.rules import MinedFunction
from structret.options import Count, LMWarmupOptions, Names, Options, resolve_options
from structret.registry import get_registry

if TYPE_CHECKING:
    from structret.exporting.errors import ExportError
    from structret.exporting.errors import require as require_modules
    from structret.onnx_encoder import OnnxEncoder
    from structret.exporting.onnx_graph import write_checked as write_checked_onnx
    from structret.search.saved import (IndexInputError, SavedFiles, as_matrix, base_meta, check_ids, check_k, check_metric,
                                    check_removal, normalize_rows, read_ids, read_index_meta, write_ids)
    from structret.evaluation import evaluate_retriever, make_protocol
    from structret.search.system import make_retriever
    from structret.suites.table import BenchTable
    from structret.parents import NO_PARENT, gold_attention, parent_attention_loss, spread_parents

_INDEXING = ("IndexInputError", "SavedFiles", "as_matrix", "base_meta", "check_ids", "check_k", "check_metric",
             "check_removal", "normalize_rows", "read_ids", "read_index_meta", "write_ids")
_PARENTS = ("NO_PARENT", "gold_attention", "parent_attention_loss", "spread_parents")
# what a suite built from folders of data (register_suites) reads, scores and lays out
_BENCH = ("BenchTable", "evaluate_retriever", "make_protocol", "make_retriever")
_EXPORTING = ("ExportError", "OnnxEncoder", "require_modules", "write_checked_onnx")

__all__ = [
    "AuxiliaryObjective", "Backbone", "ContrastiveObjective", "CorruptionObjective", "Count", "DatasetReader",
    "Extractor", "Index", "LMWarmupOptions", "LanguageModelBackbone", "Linearizer", "MinedFunction", "Miner", "Names",
    "Objective", "ObjectiveDefaults", "Options", "PAD_TO", "Retriever", "TrainableBackbone", "WINDOW", "atomic_dir",
    "budget", "cache_dir", "check_entities", "get_registry", "hookimpl", "precision", "resolve_options",
    "token_batches", "verify_checksums", "write_meta", *_INDEXING, *_PARENTS, *_EXPORTING, *_BENCH,
]


def __getattr__(name: str) -> Any:
    if name in _INDEXING:
        from structret.search import saved as indexing

        return getattr(indexing, name)
    if name in _PARENTS:
        from structret import parents

        return getattr(parents, name)
    if name in _EXPORTING:
        from structret import onnx_encoder
        from structret.exporting import errors, onnx_graph

        return {"ExportError": errors.ExportError, "require_modules": errors.require,
                "OnnxEncoder": onnx_encoder.OnnxEncoder, "write_checked_onnx": onnx_graph.write_checked}[name]
    if name in _BENCH:
        from structret import evaluation
        from structret.search.system import make_retriever
        from structret.suites import table
        return {"BenchTable": table.BenchTable, "evaluate_retriever": evaluation.evaluate_retriever,
                "make_protocol": evaluation.make_protocol,
                "make_retriever": make_retriever}[name]
    raise AttributeError(f"module 'structret.plugin' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
