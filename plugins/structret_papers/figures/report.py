"""What ``structret plot`` measured: per model, the numbers its panels show, and the table it prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
