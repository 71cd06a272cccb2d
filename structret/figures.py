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

numpy, scikit-learn, umap-learn and matplotlib are imported inside the functions that use them.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from structret.errors import DataError, StructretError

PROJECTIONS = ("tsne", "umap")
POOLS = ("sampled", "full")
SIMILARITIES = ("cos", "dot")
# minilm-code's [sda] temperature: MiniLM's unit vectors need it for a softmax that is not flat
DEFAULT_SCORING = ("cos", 0.05)
RANKING_FILE = "ranking-probability.png"
EMBEDDINGS_FILE = "embeddings-2d.png"


@dataclass
class ModelFigures:
    """What one model's panels show, and the numbers behind them."""

    label: str
    probabilities: Any  # float64 [pairs]: p(positive | query) per sampled pair
    top1: float  # fraction of queries whose positive has the largest probability
    matched_cos: float  # mean cosine of each docstring with its own code
    random_cos: float  # mean cosine of each docstring with another sampled code
    own_nearest_2d: float  # fraction of docstrings whose nearest code in 2-D is their own
    points: Any = None  # float [2 * pairs, 2]: the docstrings, then their codes

    @property
    def mean(self) -> float:
        return float(self.probabilities.mean())

    @property
    def median(self) -> float:
        import numpy as np

        return float(np.median(self.probabilities))


@dataclass
class FiguresReport:
    data: str
    pairs: int
    pool_size: int
    pool: str
    similarity: str
    temperature: float
    scoring_source: str  # where similarity and temperature came from
    projection: str
    models: list[ModelFigures] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)

    def pool_text(self) -> str:
        if self.pool == "sampled":
            return f"the {self.pool_size} sampled documents (the positive + {self.pool_size - 1} in-batch negatives)"
        return f"the split's {self.pool_size} documents"

    def summary(self) -> str:
        lines = [
            f"{self.data}: {self.pairs} sampled pairs",
            f"ranking probability: softmax({self.similarity} / {self.temperature:g}) over {self.pool_text()}; "
            f"{self.scoring_source}; uniform would be {1 / self.pool_size:.4f}",
        ]
        width = max(len("model"), *(len(m.label) for m in self.models))
        lines.append(f"  {'model'.ljust(width)}  mean p   median p  positive first")
        for m in self.models:
            lines.append(f"  {m.label.ljust(width)}  {m.mean:.4f}   {m.median:.4f}    {m.top1:.3f}")
        lines.append(f"alignment (cosine in the full space; 2-D = {self.projection}):")
        lines.append(f"  {'model'.ljust(width)}  matched  random   gap     own code nearest in 2-D")
        for m in self.models:
            lines.append(f"  {m.label.ljust(width)}  {m.matched_cos:+.4f}  {m.random_cos:+.4f}  "
                         f"{m.matched_cos - m.random_cos:+.4f}  {m.own_nearest_2d:.3f}")
        if self.paths:
            lines.append("wrote " + " and ".join(str(p) for p in self.paths.values()))
        return "\n".join(lines)


# --- the numbers ---------------------------------------------------------------------------


def ranking_probabilities(queries, documents, positives: Sequence[int], *, similarity: str = "cos",
                          temperature: float = 0.05):
    """p(positive | query) for each query row: the softmax of its scores against every document
    row, divided by ``temperature``, taken at the index ``positives`` gives (float64)."""
    import numpy as np

    if similarity not in SIMILARITIES:
        raise StructretError(f"similarity {similarity!r}: use one of {', '.join(SIMILARITIES)}.")
    if not temperature > 0:
        raise StructretError(f"temperature must be positive, got {temperature}.")
    q = np.asarray(queries, dtype=np.float64)
    d = np.asarray(documents, dtype=np.float64)
    if similarity == "cos":
        q, d = _unit(q), _unit(d)
    scores = q @ d.T / temperature
    scores -= scores.max(axis=1, keepdims=True)  # exp never overflows
    log_p = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    rows = np.arange(len(q))
    return np.exp(log_p[rows, np.asarray(positives)])


def alignment(queries, codes, *, seed: int = 0) -> tuple[float, float]:
    """(mean cosine of matched rows, mean cosine of mismatched rows): row i of ``queries`` with
    row i of ``codes``, then with the code of another row (a random cyclic shift of a shuffled
    order, so no row meets its own code)."""
    import numpy as np

    q, c = _unit(np.asarray(queries, dtype=np.float64)), _unit(np.asarray(codes, dtype=np.float64))
    n = len(q)
    if n < 2:
        raise StructretError("alignment needs at least 2 pairs to have a mismatched one.")
    order = np.random.default_rng(seed).permutation(n)
    other = np.empty(n, dtype=int)
    other[order] = np.roll(order, 1)  # each row takes the code of the row before it in the shuffle
    return float((q * c).sum(1).mean()), float((q * c[other]).sum(1).mean())


def own_nearest(points, pairs: int) -> float:
    """Fraction of docstrings (the first ``pairs`` rows) whose nearest code (the next ``pairs``
    rows) in ``points`` is their own: the 2-D picture's alignment as a number."""
    import numpy as np

    docs, codes = np.asarray(points[:pairs]), np.asarray(points[pairs:2 * pairs])
    distances = ((docs[:, None, :] - codes[None, :, :]) ** 2).sum(-1)
    return float((distances.argmin(1) == np.arange(pairs)).mean())


def project(vectors, method: str = "tsne", *, seed: int = 0):
    """2-D coordinates of ``vectors`` with t-SNE (scikit-learn) or UMAP (umap-learn), on cosine
    distance (how the models score), with a fixed random state."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    n = len(vectors)
    if method == "tsne":
        try:
            from sklearn.manifold import TSNE
        except ImportError:
            raise StructretError(_install("scikit-learn", "t-SNE")) from None
        # perplexity must stay below the number of points; 30 is scikit-learn's default
        perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))
        return TSNE(n_components=2, perplexity=min(perplexity, n - 1.0), metric="cosine", init="pca",
                    random_state=seed).fit_transform(vectors)
    if method == "umap":
        try:
            import umap
        except ImportError:
            raise StructretError(_install("umap-learn", "UMAP")) from None
        reducer = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), metric="cosine", random_state=seed)
        with warnings.catch_warnings():
            # a fixed random_state makes UMAP run on one thread, and it warns about that each time
            warnings.filterwarnings("ignore", message="n_jobs value", category=UserWarning)
            return reducer.fit_transform(vectors)
    raise StructretError(f"projection {method!r}: use one of {', '.join(PROJECTIONS)}.")


def _install(package: str, what: str) -> str:
    return f"{what} needs {package}: pip install 'structret[plots]' (or pip install {package})."


def _unit(x):
    import numpy as np

    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


# --- data, models, scoring -----------------------------------------------------------------


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


def sample_pairs(dataset, n: int, *, seed: int = 0, where: str = "") -> list[tuple[str, str]]:
    """``n`` aligned pairs drawn without replacement (seeded), in the dataset's order."""
    pairs = aligned_pairs(dataset)
    where = where or dataset.name
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


def recorded_scoring(model) -> tuple[str, float] | None:
    """(similarity, temperature) of the contrastive objective the model's run trained with, or None."""
    recipe = getattr(model, "recipe", None) or {}
    plugins = recipe.get("plugins") or {}
    for name in str(recipe.get("objective", "")).split("+"):
        name = name.split("*")[-1].strip()
        options = plugins.get(name) or {}
        if "temperature" in options and "similarity" in options:
            return str(options["similarity"]), float(options["temperature"])
    return None


def resolve_scoring(models: Sequence[tuple[str, Any]], similarity: str | None = None,
                    temperature: float | None = None) -> tuple[str, float, str]:
    """One (similarity, temperature) for every model, so their distributions are comparable,
    and a sentence saying where it came from: given, else the one the trained runs record,
    else minilm-code's (cos, 0.05)."""
    recorded = {label: found for label, model in models if (found := recorded_scoring(model)) is not None}
    distinct = sorted(set(recorded.values()))
    if len(distinct) > 1 and (similarity is None or temperature is None):
        runs = "; ".join(f"{label}: {s}/{t:g}" for label, (s, t) in recorded.items())
        raise StructretError(f"the runs were trained with different scorings ({runs}); pick the one to plot with "
                             f"--similarity and --temperature.")
    if distinct:
        base, source = distinct[0], f"recorded by {', '.join(recorded)}"
    else:
        base, source = DEFAULT_SCORING, "no model records one: minilm-code's sda scoring"
    given = [what for what, value in (("similarity", similarity), ("temperature", temperature)) if value is not None]
    if given:
        source = f"{' and '.join(given)} given" + (f"; the rest {source}" if len(given) < 2 else "")
    return similarity or base[0], float(temperature if temperature is not None else base[1]), source


def _check_name(name: str) -> None:
    """Raise load_model's error for a name that is neither a backbone nor a path or hub id,
    without loading anything (load_model raises before loading for exactly these)."""
    from structret.api import load_model
    from structret.registry import get_registry

    if not get_registry().has("backbone", name) and not (Path(name).exists() or "/" in name):
        load_model(name)


def _labels(names: Sequence[str]) -> list[str]:
    """The names as given, numbered where one repeats (the same model twice is allowed)."""
    labels = []
    for i, name in enumerate(names):
        labels.append(name if names.count(name) == 1 else f"{name} #{names[:i + 1].count(name)}")
    return labels


# --- the figures ---------------------------------------------------------------------------


def plot_figures(models: Sequence[str], data: str, out: str | Path, *, split: str | None = "test",
                 data_options: dict[str, Any] | None = None, pairs: int = 200, pool: str = "sampled",
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

    from structret.api import load_dataset, load_model
    from structret.data import require

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
        _check_name(name)  # a typo fails now, not after the data is read

    dataset = load_dataset(data, split, **(data_options or {}))
    where = f"the '{split}' split of {data}" if split else data
    require(dataset, "documents", "queries", spec=data, split=split)
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
        top1 = _top1(q, pool_vectors, positives, similarity)
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


def _top1(queries, documents, positives, similarity: str) -> float:
    import numpy as np

    q, d = np.asarray(queries, dtype=np.float64), np.asarray(documents, dtype=np.float64)
    if similarity == "cos":
        q, d = _unit(q), _unit(d)
    scores = q @ d.T
    own = scores[np.arange(len(q)), positives]
    # ties count against the model, as the full-pool MRR does
    return float(((scores >= own[:, None]).sum(1) == 1).mean())


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise StructretError(_install("matplotlib", "Plotting")) from None
    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def draw_ranking(report: FiguresReport, path: Path) -> Path:
    """SANTA Fig. 3a: one histogram of p(positive | query) per model, on shared bins over [0, 1]."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    bins = np.linspace(0.0, 1.0, 21)
    # bars side by side per bin: overlaid translucent histograms of 3+ models are unreadable
    ax.hist([m.probabilities for m in report.models], bins=bins, edgecolor="black", linewidth=0.3,
            label=[f"{m.label} (mean {m.mean:.3f}, median {m.median:.3f})" for m in report.models])
    ax.axvline(1 / report.pool_size, color="grey", linestyle=":", linewidth=1, label="uniform (1 / pool)")
    ax.set_xlabel(f"ranking probability of the positive: softmax({report.similarity} / {report.temperature:g})")
    ax.set_ylabel(f"queries (of {report.pairs})")
    ax.set_xlim(0, 1)
    ax.set_title(f"Ranking probability of matched pairs — {' vs '.join(m.label for m in report.models)}\n"
                 f"{report.data}\npool: {report.pool_text()}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_embeddings(report: FiguresReport, path: Path, *, links: bool = False) -> Path:
    """SANTA Fig. 4: one panel per model, docstrings and codes of the same pairs in 2-D."""
    plt = _pyplot()
    n = report.pairs
    panels = len(report.models)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.9), squeeze=False)
    for ax, m in zip(axes[0], report.models):
        docs, codes = m.points[:n], m.points[n:2 * n]
        if links:
            for a, b in zip(docs, codes):
                ax.plot([a[0], b[0]], [a[1], b[1]], color="grey", linewidth=0.4, alpha=0.5, zorder=1)
        ax.scatter(docs[:, 0], docs[:, 1], s=12, c="tab:orange", marker="o", label="docstring (query)", zorder=2)
        ax.scatter(codes[:, 0], codes[:, 1], s=12, c="tab:blue", marker="^", label="code", zorder=2)
        ax.set_title(f"{m.label}\nmatched cos {m.matched_cos:.3f} vs random {m.random_cos:.3f}; "
                     f"own code nearest {m.own_nearest_2d:.2f}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=9)  # once, below: not over any points
    fig.suptitle(f"{report.projection.upper() if report.projection == 'umap' else 't-SNE'} of {n} docstring and "
                 f"{n} code embeddings — {report.data}", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
