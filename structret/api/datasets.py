"""Datasets made from datasets: consistency-filtered training pairs."""

from __future__ import annotations

import os
from typing import Any

from structret import consistency
from structret.artifacts import cache_dir
from structret.datasets import dataset_split
from structret.errors import PluginError
from structret.records import Dataset
from structret.search.system import DenseRetriever, make_retriever


def filter_pairs(teacher: str, data: Dataset | str, out: str | os.PathLike, *, split: str = "train", k: int = 20,
                 within: str = "language", batch_size: int = 32, min_score: float | None = None) -> Any:
    """Write the (query, code) pairs of ``split`` whose query ranks its own code in the top ``k``
    of its pool (and, with ``min_score``, whose teacher score is above it), judged by the dense model
    ``teacher`` (a backbone name or a run), as CodeSearchNet rows to ``out``, with ``OUT.report.json``
    (consistency filtering; structret.consistency)."""
    dataset = dataset_split(data, split)
    judge = make_retriever(teacher, batch_size=batch_size, cache=cache_dir())
    if not isinstance(judge, DenseRetriever):
        raise PluginError(f"the teacher {teacher} is not a dense model; give a backbone or a run directory.")
    return consistency.filter_pairs(judge, dataset, out, k=k, within=within, teacher=teacher, partition=split,
                                    min_score=min_score)
