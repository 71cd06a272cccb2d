"""The tables of ``structret bench --recipe`` (``recipes_table``) and ``--suite``
(``suite_table``, with ``assign_data`` matching ``--data`` to a suite's datasets), and
``structret.registry.tables.parse_settings`` for their ``--set FIELD=VALUE``."""

from __future__ import annotations

import dataclasses
import difflib
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from structret import defaults
from structret.suites.files import Suite, SuiteDataset, SuiteError
from structret.suites.runner import Cell, DataSpec, Runner, resolve_spec
from structret.suites.table import BenchTable, spread


def _progress(i: int, n: int, label: str, data: DataSpec) -> None:
    print(f"[{i}/{n}] {label} on {data.label}", file=sys.stderr)


def _measure(runner: Runner, cell: Cell, data: DataSpec, seeds: int, split: str | None = None
             ) -> list[dict[str, Any]]:
    """One evaluation per seed for a cell that trains (seed = each recipe's seed + 0..seeds-1),
    one for a cell that does not: a seed changes nothing in an untrained system's scores.
    ``split``: the data's test split unless another is named (its validation split)."""
    results = []
    for offset in range(seeds if cell.trained else 1):
        if seeds > 1 and cell.trained:
            print(f"  seed {offset + 1} of {seeds}", file=sys.stderr)
        system, options = runner.build(dataclasses.replace(cell, seed_offset=offset), data)
        results.append(runner.evaluate(system, options, data, split))
        if seeds > 1 and cell.trained:
            results[-1] = {**results[-1], "seed": runner.seeds.get(system.partition("+")[2] if cell.lexical else system)}
    return results


def _mean(values: list[float | None]) -> float | None:
    if len(values) == 1:  # one seed: the value as it was measured
        return values[0]
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean([v for v in values if v is not None])


def _seed_row(row: dict[str, Any], results: list[dict[str, Any]], per_seed: dict[str, list[float | None]]) -> None:
    """Record every seed's value and the seeds beside a row's means (only for a row trained with 2+ seeds,
    so a one-seed table is exactly what it was before seeds existed)."""
    if len(results) > 1:
        row["seeds"] = [r.get("seed") for r in results]
        row["per_seed"] = per_seed


def _seed_texts(rows: list[dict[str, Any]], seeds: int) -> tuple[str, list[str]]:
    """(caption sentence, notes) saying how many seeds and which; nothing with one seed."""
    if seeds <= 1:
        return "", []
    used = sorted({tuple(r["seeds"]) for r in rows if r.get("seeds")})
    which = (", ".join(map(str, used[0])) if len(used) == 1 else "no row here trains" if not used
             else "they differ by row: see each row's seeds in results.json")
    caption = f" Trained rows: mean ± sample std (n−1) over {seeds} seeds ({which})."
    notes = [f"Seeds: every trained row was trained {seeds} times, with the recipe's seed + 0..{seeds - 1} "
             f"({which}); each cell is the mean over the seeds ± their sample standard deviation (n−1), and "
             "results.json keeps every seed's value (per_seed). Untrained rows (a backbone as it is, --system "
             "rows) are evaluated once: a seed changes nothing for them."]
    return caption, notes


# --- recipes mode --------------------------------------------------------------------


def recipes_table(recipes: list[str], datas: list[DataSpec], *, finetune: str | None = None, zero_shot: bool = False,
                  settings: dict[str, str] | None = None, systems: Sequence[str] = (), runner: Runner | None = None,
                  backbone: str | None = None, seeds: int = 1) -> BenchTable:
    """Each recipe trained on each dataset's train split (then ``finetune``), scored on its test split;
    with ``seeds`` > 1 every trained row is trained that many times (its seed + 0, 1, ...) and each cell
    is the mean, every seed's value kept in the row's ``per_seed``."""
    from structret.recipes import resolve_recipe

    runner = runner or Runner()
    settings = dict(settings or {})
    if backbone:
        settings.setdefault("backbone", backbone)
    rows: list[tuple[str, Cell]] = []
    for name in systems:
        rows.append((name, Cell(system=name)))
    if zero_shot:
        first = resolve_recipe(recipes[0] if recipes else None, settings)
        base = {"backbone": first.backbone, "model": first.model, "backbone_options": first.options(first.backbone)}
        rows.append((f"{first.backbone} (untrained)", Cell(base=base)))
    for name in recipes:
        label = Path(name).stem if name.endswith(".toml") else name
        tuned = Path(finetune).stem if finetune and finetune.endswith(".toml") else finetune
        if finetune:
            if zero_shot:
                rows.append((f"{label} (no fine-tuning)", Cell(recipe=name, overrides=settings)))
            rows.append((f"{label} + {tuned}", Cell(recipe=name, finetune=finetune, overrides=settings)))
        else:
            rows.append((label, Cell(recipe=name, overrides=settings)))
    for data in datas:
        for _, cell in rows:
            runner.check(cell, data)
    results: dict[tuple[int, str], list[dict[str, Any]]] = {}
    n, i = len(rows) * len(datas), 0
    for data in datas:
        for r, (label, cell) in enumerate(rows):
            i += 1
            _progress(i, n, label, data)
            results[(r, data.key)] = _measure(runner, cell, data, seeds)
    columns, notes = [], []
    for data in datas:
        got0 = next(results[(r, data.key)][0] for r in range(len(rows)))
        for metric in got0["columns"]:
            columns.append({"key": f"{data.key}|{metric}", "dataset": data.label, "metric": metric,
                            "kind": "measured", "header": f"{data.label}: {metric}"})
        notes.append(f"{data.label}: {got0['dataset']}, {got0['protocol']} ("
                     + ", ".join(f"{v} {k}" for k, v in got0["sizes"].items()) + "). " + " ".join(got0["notes"]))
    table_rows = []
    for r, (label, _) in enumerate(rows):
        values, per_seed = {}, {}
        for data in datas:
            got = results[(r, data.key)]
            for metric in got[0]["columns"]:
                per_seed[f"{data.key}|{metric}"] = [g["row"].get(metric) for g in got]
                values[f"{data.key}|{metric}"] = _mean(per_seed[f"{data.key}|{metric}"])
        table_rows.append({"label": label, "block": "", "values": values, "paper": {}, "marks": []})
        _seed_row(table_rows[-1], results[(r, datas[0].key)], per_seed)
    budgets = "; ".join(f"{d.label}: {', '.join(sorted(runner.budgets.get(d.key, ())))}"
                        for d in datas if runner.budgets.get(d.key))
    caption = ("Scores ×100. Each recipe trained on the dataset's train split"
               + (f", then fine-tuned with {finetune}" if finetune else "") + ", evaluated on its test split"
               + (f" (budget — {budgets})" if budgets else "") + "."
               + ("".join(f" {d.label} is an offline stand-in." for d in datas if d.standin)))
    seed_caption, seed_notes = _seed_texts(table_rows, seeds)
    return BenchTable(title="structret bench", caption=caption + seed_caption, columns=columns, rows=table_rows,
                      notes=notes + seed_notes)


# --- suite mode ----------------------------------------------------------------------


def assign_data(suite: Suite, data: list[str]) -> dict[str, str]:
    """``KEY=FORMAT:PATH`` or ``FORMAT:PATH`` (matched to the dataset whose formats include FORMAT)."""
    out: dict[str, str] = {}
    keys = [d.key for d in suite.datasets]
    for item in data:
        head, eq, rest = item.partition("=")
        if eq and ":" not in head:
            if head not in keys:
                raise SuiteError(f"--data {item}: suite '{suite.name}' has no dataset '{head}' (it has {', '.join(keys)})")
            out[head] = rest
            continue
        fmt = item.partition(":")[0]
        match = [d.key for d in suite.datasets if fmt in d.formats]
        if len(match) != 1:
            raise SuiteError(f"--data {item}: cannot tell which of the suite's datasets ({', '.join(keys)}) it is; "
                             f"write KEY=FORMAT:PATH, e.g. --data {keys[0]}={item}")
        out[match[0]] = item
    return out


def suite_table(suite: Suite, data: Sequence[str] = (), *, data_options: dict[str, Any] | None = None,
                settings: dict[str, str] | None = None, backbone: str | None = None,
                runner: Runner | None = None, rows: list[str] | None = None, seeds: int = 1) -> BenchTable:
    """The paper's table: its rows and columns, the paper's numbers beside what is measured here;
    ``seeds`` as in ``recipes_table``."""
    from structret.recipes import resolve_recipe

    runner = runner or Runner()
    settings = dict(settings or {})
    given = assign_data(suite, list(data))
    specs: dict[str, DataSpec | None] = {}
    unavailable: dict[str, str] = {}
    for d in suite.datasets:
        if d.key in given:
            specs[d.key] = DataSpec(d.key, d.label, given[d.key], dict(data_options or {}),
                                    valid_split=d.valid_split, select_on=_selection_metric(d).measured)
        elif d.standin_data:
            options = {**d.standin_options, **(data_options or {})}
            label = (d.standin_label or d.standin_data) + (
                f" ({', '.join(f'{k}={v}' for k, v in options.items())})" if options else "")
            specs[d.key] = DataSpec(d.key, label, resolve_spec(d.standin_data), options, standin=True,
                                    valid_split=d.valid_split, select_on=_selection_metric(d).measured)
        else:
            specs[d.key] = None
            unavailable[d.key] = d.unavailable or "no data given and no offline stand-in"

    def chosen_backbone(d: SuiteDataset, spec: DataSpec) -> str | None:
        return settings.get("backbone") or backbone or (d.standin_backbone if spec.standin else None) or None

    labels = [r.label for r in suite.rows]
    for label in rows or ():
        if label not in labels:
            close = difflib.get_close_matches(label, labels, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise SuiteError(f"--row {label!r}: suite '{suite.name}' has no such row.{hint} Rows: {', '.join(labels)}.")
    selected = [r for r in suite.rows if rows is None or r.label in rows]
    todo = [(r, d) for d in suite.datasets if specs[d.key] is not None for r in selected
            if not r.paper_only and (r.recipe.get(d.key) or r.finetune.get(d.key) or not (r.recipe or r.finetune))]
    measured: dict[tuple[int, str], list[dict[str, Any]]] = {}
    backbones: dict[str, set[str]] = {}
    cells = []
    for row, d in todo:
        spec = specs[d.key]
        assert spec is not None  # todo holds only the datasets with data
        pick = chosen_backbone(d, spec)
        recipe_name = row.recipe.get(d.key, "")
        own = pick or (resolve_recipe(recipe_name).backbone if recipe_name else d.backbone) or defaults.BACKBONE
        overrides: dict[str, Any] = {}
        overrides.update(suite.backbone_set.get(own, {}))
        if spec.standin:
            overrides.update(d.standin_set)
        overrides.update(row.set.get(d.key, {}))
        overrides.update(settings)
        if pick:
            overrides["backbone"] = pick
        final_backbone = overrides.get("backbone") or own
        backbones.setdefault(d.key, set()).add(final_backbone)
        base = {"backbone": final_backbone, "model": overrides.get("model"),
                "backbone_options": overrides.get("backbone_options", "")}
        init = row.init if final_backbone == (resolve_recipe(recipe_name).backbone if recipe_name else None) else ""
        cell = Cell(recipe=recipe_name, finetune=row.finetune.get(d.key, ""), overrides=overrides, base=base,
                    init=init, lexical=row.lexical, fusion=row.fusion)
        # a variant changes the pretraining (a row without one: its only training)
        variants = [(v.label, dataclasses.replace(cell, pretrain=dict(v.set)) if recipe_name
                     else dataclasses.replace(cell, overrides={**overrides, **v.set})) for v in row.variants]
        for _, variant in variants or [("", cell)]:
            runner.check(variant, spec)
        cells.append((row, d, cell, variants))
    validated: dict[tuple[int, str], list[dict[str, Any]]] = {}
    chosen: dict[tuple[int, str], dict[str, Any]] = {}
    for i, (row, d, cell, variants) in enumerate(cells, 1):
        spec = specs[d.key]
        assert spec is not None  # cells holds only the datasets with data
        at = (suite.rows.index(row), d.key)
        _progress(i, len(cells), f"{row.label}{f' [{row.block}]' if row.block else ''}", spec)
        if variants and spec.valid_split:
            label, cell, validated[at], chosen[at] = _choose(runner, variants, d, spec, seeds)
            print(f"  chosen on {spec.valid_split}: {label}", file=sys.stderr)
        elif spec.valid_split:
            validated[at] = _measure(runner, cell, spec, seeds, spec.valid_split)
        measured[at] = _measure(runner, cell, spec, seeds)  # the test split: scored once, after any choice

    columns = []
    settings_text = {}
    for d in suite.datasets:
        spec = specs[d.key]
        if spec is None:
            setting = f"cannot run: {unavailable[d.key]}"
        else:
            budget = ", ".join(sorted(runner.budgets.get(d.key, ()))) or "no training"
            setting = (f"{spec.label if spec.standin else spec.spec}; backbone {', '.join(sorted(backbones.get(d.key, {'-'})))}"
                       f"; budget {budget}")
        settings_text[d.key] = setting
        for m in d.metrics:
            if any(m.label in r.paper.get(d.key, {}) for r in selected):
                columns.append({"key": f"{d.key}|{m.label}|paper", "dataset": d.label, "metric": m.label,
                                "kind": "paper", "header": f"{d.label} {m.label} — paper"})
            columns.append({"key": f"{d.key}|{m.label}", "dataset": d.label, "metric": m.label, "kind": "measured",
                            "header": f"{d.label} {m.label} — measured here "
                                      f"({setting if spec is not None else 'cannot run, see below'})"})
        if spec is not None and spec.valid_split:
            m = _selection_metric(d)
            columns.append({"key": f"{d.key}|{m.label}|valid", "dataset": d.label, "metric": m.label,
                            "kind": "valid", "header": f"{d.label} {m.label} — {spec.valid_split} split (selection)"})
    table_rows: list[dict[str, Any]] = []
    marks_used = False
    for row in selected:
        values: dict[str, float | None]
        seeded: list[dict[str, Any]]
        values, paper, marks, per_seed, seeded = {}, {}, [], {}, []
        for d in suite.datasets:
            got = measured.get((suite.rows.index(row), d.key))
            if got and len(got) > len(seeded):
                seeded = got
            for m in d.metrics:
                if m.label in row.paper.get(d.key, {}):
                    paper[f"{d.key}|{m.label}|paper"] = row.paper[d.key][m.label]
                if got is None:
                    values[f"{d.key}|{m.label}"] = None
                    continue
                each = []
                for one in got:
                    value = _lookup(one, m.measured)
                    if value is None and m.fallback:
                        value = _lookup(one, m.fallback)
                        if value is not None and f"{d.key}|{m.label}" not in marks:
                            marks.append(f"{d.key}|{m.label}")
                            marks_used = True
                    each.append(value)
                per_seed[f"{d.key}|{m.label}"] = each
                values[f"{d.key}|{m.label}"] = _mean(each)
            at = (suite.rows.index(row), d.key)
            if at in validated:
                m = _selection_metric(d)
                per_seed[f"{d.key}|{m.label}|valid"] = each = [_lookup(one, m.measured) for one in validated[at]]
                values[f"{d.key}|{m.label}|valid"] = _mean(each)
        label = row.label
        picks = {d.key: chosen[(suite.rows.index(row), d.key)] for d in suite.datasets
                 if (suite.rows.index(row), d.key) in chosen}
        if picks:
            label += ": " + " / ".join(dict.fromkeys(p["label"] for p in picks.values()))
        table_rows.append({"label": label, "block": row.block, "values": values, "paper": paper, "marks": marks,
                           "paper_only": row.paper_only,
                           "system": {"recipe": row.recipe, "finetune": row.finetune, "set": row.set},
                           **({"chosen": picks} if picks else {})})
        _seed_row(table_rows[-1], seeded, per_seed)
    standins = [f"{d.label} → {s.label}" for d in suite.datasets if (s := specs[d.key]) and s.standin]
    scale = "×100" if suite.scale == 100 else "as fractions"
    caption = (f"Scores {scale}. Paper: {suite.paper}, {suite.source}. Measured here: "
               + "; ".join(f"{d.label}: {settings_text[d.key]}" for d in suite.datasets) + ". "
               + (f"Offline stand-ins used ({'; '.join(standins)}): the measured columns are not the paper's setting "
                  f"and are not comparable number for number. " if standins else "")
               + "— = no measurement (row not implemented or another paper's system); n/a = not applicable.")
    seed_caption, seed_notes = _seed_texts(table_rows, seeds)
    caption += seed_caption
    notes = list(suite.notes) + seed_notes
    notes += [f"{r.label}: {r.paper_only}" for r in selected if r.paper_only]
    if marks_used:
        notes.append("* = the metric's fallback column (see above), because the measured one was n/a on this data.")
    if validated:
        notes.append("Selection: every row is also scored on the validation split; a row with variants is the "
                     "variant with the best validation mean, and only that variant is scored on the test split.")
    for table_row in table_rows:
        for key, pick in table_row.get("chosen", {}).items():
            notes.append(f"{table_row['label']} ({key}), validation {pick['metric']} of every variant: "
                         + "; ".join(f"{v['label']} {spread(v['values'], suite.scale, suite.digits)}"
                                     for v in pick["variants"]) + f" → chosen: {pick['label']}.")
    for d in suite.datasets:
        first = next((v[0] for (ri, k), v in measured.items() if k == d.key), None)
        if first:
            notes.append(f"{d.label} measured on {first['dataset']}: {first['protocol']} ("
                         + ", ".join(f"{v} {k}" for k, v in first["sizes"].items()) + ").")
    return BenchTable(title=suite.title, caption=caption, columns=columns, rows=table_rows, notes=notes,
                      scale=suite.scale, digits=suite.digits)


def _selection_metric(d: SuiteDataset) -> Any:
    return next((m for m in d.metrics if m.label == d.select_on), d.metrics[0])


def _choose(runner: Runner, variants: list[tuple[str, Cell]], d: SuiteDataset, spec: DataSpec, seeds: int
            ) -> tuple[str, Cell, list[dict[str, Any]], dict[str, Any]]:
    """The variant with the best mean validation score (its label, cell and validation results),
    and what the choice was made from, for the table's notes and results.json."""
    metric = _selection_metric(d)
    scored = []
    for label, cell in variants:
        print(f"  variant {label} [{spec.valid_split}]", file=sys.stderr)
        results = _measure(runner, cell, spec, seeds, spec.valid_split)
        values = [_lookup(r, metric.measured) for r in results]
        if any(v is None for v in values):
            raise SuiteError(f"variant {label!r}: the validation split gives no {metric.measured!r} to choose by")
        scored.append((statistics.fmean([v for v in values if v is not None]), label, cell, results, values))
    best = max(scored, key=lambda x: x[0])  # ties: the first listed
    record = {"label": best[1], "metric": metric.label, "split": spec.valid_split,
              "variants": [{"label": label, "values": values} for _, label, _, _, values in scored]}
    return best[1], best[2], best[3], record


def _lookup(result: dict[str, Any], column: str) -> float | None:
    row = result["row"]
    if column in row:
        return row[column]
    for name in result["columns"]:
        if name.startswith(column):
            return row.get(name)
    return None
