"""SANTA's Figures 3 and 4 for any models: how likely each ranks a query's own code first,
and where code and docstring embeddings lie, projected to two dimensions.

``plot_figures`` samples aligned (query, document) pairs from one split, encodes them with
every model, and writes two PNGs:

- ``ranking-probability.png`` (SANTA Fig. 3a): per model, the distribution of
  p(positive | query) = softmax(score / temperature) over a candidate pool. The paper
  "samples several query-code pairs from the test split" and shows the ranking probability
  of the query-related codes, the quantity its SDA loss (Eq. 5) trains with in-batch
  negatives; so the default pool is the sampled pairs' documents (the positive plus every
  other sampled document, as in a batch). ``pool="full"`` ranks against the split's whole corpus.
- ``embeddings-2d.png`` (SANTA Fig. 4): per model, the sampled codes and docstrings
  projected with t-SNE (or UMAP) into one panel.

Numbers go with both, so the figures are not the only evidence: mean and median probability
(and how often the positive has the largest probability); the mean cosine of matched pairs
against mismatched ones in the full embedding space, and how often a docstring's nearest code
in the 2-D projection is its own.

This module samples the pairs and runs the models; the numbers are in ``measures``, the
projections in ``projection``, the pictures in ``drawing``. numpy, scikit-learn, umap-learn and
matplotlib are imported inside the functions that use them.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

from structret.api import load_dataset, load_model
from structret.errors import DataError, StructretError
from structret.plugin import get_registry
from structret_papers.figures.drawing import draw_embeddings, draw_ranking
from structret_papers.figures.measures import (SIMILARITIES, alignment, own_nearest, positive_first,
                                               ranking_probabilities, resolve_scoring)
from structret_papers.figures.projection import PROJECTIONS, project
from structret_papers.figures.report import FiguresReport, ModelFigures

__all__ = ["EMBEDDINGS_FILE", "FiguresReport", "ModelFigures", "RANKING_FILE", "aligned_pairs", "plot_figures",
           "sample_pairs"]

POOLS = ("sampled", "full")
RANKING_FILE = "ranking-probability.png"
EMBEDDINGS_FILE = "embeddings-2d.png"


def aligned_pairs(dataset) -> list[tuple[str, str]]:
    """(query id, document id) for each query with one aligned document: the reader's pairs
    (code search), else each judged query with its most relevant document."""
    if dataset.pairs:
        return [(q, d) for q, d in dataset.pairs if q in dataset.queries and d in dataset.corpus]
    pairs = []
    for qid, judged in dataset.qrels.items():
        best = max(((grade, d) for d, grade in judged.items() if grade > 0 and d in dataset.corpus), default=None)
        if best is not None and qid in dataset.queries:
            pairs.append((qid, best[1]))
    return pairs


DEFAULT_PAIRS = 200  # SANTA's figures use a sample; more pairs make Fig. 4's scatter unreadable


def sample_pairs(dataset, n: int | None, *, seed: int = 0, where: str = "") -> list[tuple[str, str]]:
    """``n`` aligned pairs drawn without replacement (seeded), in the dataset's order; ``None``:
    ``DEFAULT_PAIRS``, or every pair when the dataset has fewer."""
    pairs = aligned_pairs(dataset)
    where = where or dataset.name
    n = min(DEFAULT_PAIRS, len(pairs)) if n is None else n
    if len(pairs) < 2:
        raise DataError(f"{where} has {len(pairs)} aligned (query, document) pair{'s' * (len(pairs) != 1)}; the "
                        f"figures need at least 2. {dataset.stats.summary()}")
    if n < 2:
        raise DataError(f"--pairs {n}: the figures need at least 2 pairs (a positive and a negative).")
    if n > len(pairs):
        raise DataError(f"--pairs {n} is more than the {len(pairs)} aligned pairs in {where}; "
                        f"use --pairs {len(pairs)} or fewer.")
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), n))
    return [pairs[i] for i in chosen]


def _check_name(name: str) -> None:
    """Raise load_model's error now, before the data is read or any model loaded, for an unknown
    name or a local path that does not exist: load_model fails on those before loading weights.
    A hub id (org/name) is left to load_model."""
    if get_registry().has("backbone", name) or Path(name).exists():
        return
    if "/" not in name or name.startswith(("/", ".", "~")):
        load_model(name)


def _labels(names: Sequence[str]) -> list[str]:
    """The names as given, numbered where one repeats (the same model twice is allowed)."""
    labels = []
    for i, name in enumerate(names):
        labels.append(name if names.count(name) == 1 else f"{name} #{names[:i + 1].count(name)}")
    return labels


def plot_figures(models: Sequence[str], data: str, out: str | Path, *, split: str | None = "test",
                 data_options: dict[str, Any] | None = None, pairs: int | None = None, pool: str = "sampled",
                 similarity: str | None = None, temperature: float | None = None, projection: str = "tsne",
                 links: bool = False, seed: int = 0, batch_size: int = 32, labels: Sequence[str] | None = None,
                 echo=None) -> FiguresReport:
    """SANTA's Figures 3 and 4 for ``models`` (backbone names, runs of ``structret train`` or model
    folders, as ``structret.load_model`` takes them) on ``pairs`` aligned pairs of ``data``'s
    ``split``: writes ``out/ranking-probability.png`` and ``out/embeddings-2d.png`` and returns
    the numbers (``FiguresReport.summary()`` prints them). ``labels`` name the models in the
    figures and the table (default: the names as given).

    Raises StructretError (a sentence) for fewer than two models, an unknown model, an empty
    split, fewer than 2 pairs or more pairs than the split has."""
    import numpy as np

    if len(models) < 2:
        raise StructretError(f"give at least two models to compare (got {len(models)}), e.g. "
                             f"--model minilm --model runs/sda.")
    if labels is not None and len(labels) != len(models):
        raise StructretError(f"{len(labels)} labels for {len(models)} models: give one --label per --model, "
                             f"in the same order, or none.")
    if pool not in POOLS:
        raise StructretError(f"pool {pool!r}: use one of {', '.join(POOLS)}.")
    if projection not in PROJECTIONS:
        raise StructretError(f"projection {projection!r}: use one of {', '.join(PROJECTIONS)}.")
    if similarity is not None and similarity not in SIMILARITIES:
        raise StructretError(f"similarity {similarity!r}: use one of {', '.join(SIMILARITIES)}.")
    if temperature is not None and not temperature > 0:
        raise StructretError(f"temperature must be positive, got {temperature}.")
    say = echo or (lambda line: None)
    for name in models:
        _check_name(name)  # a typo fails in a second, not after the data is read and other models loaded

    dataset = load_dataset(data, split, need=("documents", "queries"), **(data_options or {}))
    where = f"the '{split}' split of {data}" if split else data
    chosen = sample_pairs(dataset, pairs, seed=seed, where=where)
    queries = [dataset.queries[q] for q, _ in chosen]
    if pool == "sampled":
        pool_ids = list(dict.fromkeys(d for _, d in chosen))  # a document two queries share is one candidate
    else:
        pool_ids = list(dataset.corpus)
    position = {d: i for i, d in enumerate(pool_ids)}
    positives = [position[d] for _, d in chosen]

    labels = _labels(list(labels or models))
    loaded = []
    for label, name in zip(labels, models):
        say(f"loading {label}")
        loaded.append((label, load_model(name)))
    similarity, temperature, source = resolve_scoring(loaded, similarity, temperature)

    report = FiguresReport(data=f"{data} ({split} split)" if split else data, pairs=len(chosen),
                           pool_size=len(pool_ids), pool=pool, similarity=similarity, temperature=temperature,
                           scoring_source=source, projection=projection)
    for label, model in loaded:
        say(f"encoding {len(chosen)} queries and {len(pool_ids)} documents with {label}")
        q = model.encode_query(queries, batch_size=batch_size)
        pool_vectors = model.encode_document([dataset.corpus[d] for d in pool_ids], batch_size=batch_size,
                                             show_progress=pool == "full")
        c = pool_vectors[positives]  # each query's own code
        probabilities = ranking_probabilities(q, pool_vectors, positives, similarity=similarity,
                                              temperature=temperature)
        top1 = positive_first(q, pool_vectors, positives, similarity)
        matched, mismatched = alignment(q, c, seed=seed)
        say(f"projecting {2 * len(chosen)} embeddings of {label} with {projection}")
        points = project(np.concatenate([q, c]), projection, seed=seed)
        report.models.append(ModelFigures(label, probabilities, top1, matched, mismatched,
                                          own_nearest(points, len(chosen)), points))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report.paths["ranking"] = draw_ranking(report, out / RANKING_FILE)
    report.paths["embeddings"] = draw_embeddings(report, out / EMBEDDINGS_FILE, links=links)
    return report
