"""The two PNGs of ``structret plot``, drawn with matplotlib on the Agg backend (files only:
no display on servers and CI); matplotlib is imported when a figure is drawn."""

from __future__ import annotations

from pathlib import Path

from structret_papers.figures.report import FiguresReport


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib: after use("Agg"), which pyplot reads when imported

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
