"""``BenchTable``: one bench table (rows = systems, columns = dataset x metric) as
markdown, JSON and a bar chart (matplotlib, imported only when plotting), with mean ± std
(and error bars) for rows trained with several seeds."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BenchTable:
    """Rows = systems, columns = dataset x metric (paper and measured side by side in suites).

    Measured values are fractions (``values``); paper numbers are kept as printed
    (``paper``, strings); both are shown at ``scale`` (100: the paper prints x100). A row
    trained with several seeds also has ``seeds`` (the seed of each run) and ``per_seed``
    ({key: [value per seed]}); its ``values`` are the means, printed as ``mean ± std``.
    """

    title: str
    caption: str
    columns: list[dict[str, Any]]          # {key, dataset, metric, kind: measured|paper, header}
    rows: list[dict[str, Any]]             # {label, block, values: {key: float|None}, paper: {key: str}, marks, system}
    notes: list[str] = field(default_factory=list)
    scale: float = 100
    digits: int = 2

    def cell(self, row: dict[str, Any], column: dict[str, Any]) -> str:
        key = column["key"]
        if column["kind"] == "paper":
            return row.get("paper", {}).get(key) or "—"
        value = row.get("values", {}).get(key)
        if value is None:
            return "—" if row.get("paper_only") else "n/a"
        return mean_std(value * self.scale, self.std(row, key), self.digits) + ("*" if key in row.get("marks", []) else "")

    def std(self, row: dict[str, Any], key: str) -> float | None:
        """The sample standard deviation (n-1) over a row's seeds at ``scale``; None with fewer than 2."""
        each = row.get("per_seed", {}).get(key) or []
        if len(each) < 2 or any(v is None for v in each):
            return None
        return statistics.stdev(v * self.scale for v in each)

    def markdown(self) -> str:
        header = ["system", *(c["header"] for c in self.columns)]
        lines = [f"**{self.title}**", "", "| " + " | ".join(header) + " |",
                 "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
        block = None
        for row in self.rows:
            if row.get("block") and row["block"] != block:
                block = row["block"]
                lines.append("| " + " | ".join([f"*{block}*"] + [""] * len(self.columns)) + " |")
            lines.append("| " + " | ".join([row["label"], *(self.cell(row, c) for c in self.columns)]) + " |")
        lines += ["", self.caption]
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")

    @classmethod
    def read_json(cls, path: str | os.PathLike) -> BenchTable:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))

    def plot(self, path: str | os.PathLike) -> None:
        """A bar chart of the same numbers: one panel per dataset x metric, measured beside paper."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # matplotlib: after use("Agg"), which pyplot reads when imported

        measured: list[dict[str, Any] | None] = [c for c in self.columns if c["kind"] == "measured"]
        paper_of = {(c["dataset"], c["metric"]): c for c in self.columns if c["kind"] == "paper"}
        panels = max(1, len(measured))
        labels = [r["label"] + (f" [{r['block']}]" if r.get("block") else "") for r in self.rows]
        height = max(2.5, 0.35 * len(labels) + 1.2)
        fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels + 2.5, height), sharey=True, squeeze=False)
        ys = list(range(len(labels)))
        for ax, column in zip(axes[0], measured or [None]):
            if column is None:
                break
            paper = paper_of.get((column["dataset"], column["metric"]))
            got = [(r.get("values", {}).get(column["key"]) or 0.0) * self.scale for r in self.rows]
            width = 0.4 if paper else 0.8
            ax.barh([y - (width / 2 if paper else 0) for y in ys], got, height=width, label="measured here",
                    color="tab:blue")
            # error bars (± sample std over seeds) only on rows trained with several seeds
            spread = [(y - (width / 2 if paper else 0), g, self.std(r, column["key"]))
                      for y, g, r in zip(ys, got, self.rows) if self.std(r, column["key"]) is not None]
            if spread:
                ax.errorbar([g for _, g, _ in spread], [y for y, _, _ in spread], xerr=[s for _, _, s in spread],
                            fmt="none", ecolor="black", capsize=3)
            if paper:
                printed = [_number(r.get("paper", {}).get(paper["key"])) for r in self.rows]
                ax.barh([y + width / 2 for y in ys], [p or 0.0 for p in printed], height=width, label="paper",
                        color="tab:gray")
            ax.set_title(f"{column['dataset']}: {column['metric']}", fontsize=9)
            ax.invert_yaxis()
            ax.tick_params(axis="x", labelsize=8)
        axes[0][0].set_yticks(ys)
        axes[0][0].set_yticklabels(labels, fontsize=8)
        # below the panels and a wrapped title: inside, both covered the longest bars
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=7, frameon=False)
        width = fig.get_size_inches()[0]
        fig.suptitle(textwrap.fill(self.title, width=max(40, int(width * 13))), fontsize=10)
        fig.tight_layout(rect=(0, 0.07, 1, 1))
        fig.savefig(path, dpi=110)
        plt.close(fig)

    def write(self, out: str | os.PathLike) -> dict[str, Path]:
        """``results.json``, ``results.md`` and ``results.png`` in ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "results.json", "md": out / "results.md", "png": out / "results.png"}
        self.write_json(paths["json"])
        paths["md"].write_text(self.markdown(), encoding="utf-8")
        self.plot(paths["png"])
        return paths


def mean_std(mean: float, std: float | None, digits: int) -> str:
    """``mean ± std`` as every table and note prints it (just the mean without a spread)."""
    return f"{mean:.{digits}f}" + ("" if std is None else f" ± {std:.{digits}f}")


def spread(values: list[float], scale: float, digits: int) -> str:
    """Several seeds' values as ``mean ± sample std`` at ``scale``."""
    scaled = [v * scale for v in values]
    return mean_std(statistics.fmean(scaled), statistics.stdev(scaled) if len(scaled) > 1 else None, digits)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None

