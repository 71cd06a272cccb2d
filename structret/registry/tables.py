"""Which plugins a run uses, and the tables of their options.

A run uses its objectives, its backbone, its text format (a linearizer) and the reader of its
data; each has a table of options, named after it (``[mep]``), that its own Options model
checks (``structret.options``). This module turns what a recipe file and the overrides say
(tables, ``name.option``, an option alone, the old ``backbone_options`` strings) into those
tables; ``structret.recipes`` owns the core fields and the files.
"""

from __future__ import annotations

import difflib
import math
import re
import warnings
from typing import AbstractSet, Any

from structret.datasets import parse_data_spec
from structret.registry.keyvalue import parse_options, parse_pairs
from structret.errors import DataError, ObjectiveError, PluginError, RecipeError, RecipeWarning, StructretError
from structret.registry import get_registry

# settings that used to be core fields and are now plugin options: still read, with a warning
SLOT_FIELDS = {"backbone_options": "backbone", "data_options": "dataset"}


def parse_settings(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``--set FIELD=VALUE`` / ``--set PLUGIN.OPTION=VALUE`` pairs -> {key: value}, for
    ``resolve_recipe`` (which reads dashes in core fields; plugin names keep theirs)."""
    try:
        return parse_pairs(pairs)
    except DataError as exc:
        raise RecipeError(f"--set: {exc}; write FIELD=VALUE or PLUGIN.OPTION=VALUE (for example --set lr=2e-5 "
                          f"or --set mep.extractor=tree-sitter)") from None


def parse_options_field(text: str) -> dict[str, Any]:
    """``"informed_layers=1,strict=false"`` -> ``{"informed_layers": "1", "strict": "false"}`` (the old
    backbone_options and data_options strings). A comma starts a new pair only before ``KEY=``, so a
    value may hold commas: ``"aspect_slots=brand,color"`` is one option."""
    try:
        return parse_options([part for part in re.split(r",(?=\s*[A-Za-z_][\w.-]*=)", text) if part.strip()])
    except StructretError as exc:
        raise RecipeError(f"options {text!r}: {exc}; write KEY=VALUE pairs joined by commas") from None


# --- objectives ------------------------------------------------------------------------


def parse_objectives(spec: str) -> list[tuple[str, float]]:
    """``"sda+0.5*mep"`` -> ``[("sda", 1.0), ("mep", 0.5)]``; names checked against the registry."""
    if not isinstance(spec, str) or not spec.strip():
        raise ObjectiveError("no objective given: name one or more, e.g. --objective sda+mep")
    parsed: list[tuple[str, float]] = []
    for term in spec.split("+"):
        term = term.strip()
        if not term:
            raise ObjectiveError(f"objective '{spec}' has an empty term; write names joined by '+', e.g. sda+mep")
        weight_text, star, name = term.rpartition("*")
        name = name.strip()
        weight = 1.0
        if star:
            try:
                weight = float(weight_text)
            except ValueError:
                raise ObjectiveError(
                    f"objective term '{term}': '{weight_text.strip()}' is not a number; "
                    f"weights go before the name, e.g. 0.5*{name or 'NAME'}"
                ) from None
            if not math.isfinite(weight) or weight <= 0:
                raise ObjectiveError(f"objective term '{term}': the weight must be a positive number")
        get_registry().get("objective", name)  # unknown: lists the known ones and the closest
        if any(name == seen for seen, _ in parsed):
            raise ObjectiveError(f"objective '{name}' appears twice in '{spec}'; give it once with a weight")
        parsed.append((name, weight))
    return parsed


def run_plugins(values: dict[str, Any], core_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """The plugins a run with these core values uses, by primary name: its objectives, its
    backbone, its text format (a linearizer) and the reader of its data. Unknown names raise."""
    registry = get_registry()
    slots = [("objective", name) for name, _ in parse_objectives(values.get("objective") or "")]
    slots.append(("backbone", values["backbone"]))
    if values.get("text_format"):
        slots.append(("linearizer", values["text_format"]))
    if values.get("data"):
        slots.append(("dataset", parse_data_spec(values["data"])[0]))
    used: dict[str, Any] = {}
    for kind, name in slots:
        entry = registry.get(kind, name)
        other = used.get(entry.name)
        if other is not None and other.kind != kind:
            raise RecipeError(f"this run uses two plugins named '{entry.name}' ({other.kind} and {kind}), so a "
                              f"[{entry.name}] table would be ambiguous; uninstall one or pick another {kind}.")
        if entry.name in core_fields:
            raise RecipeError(f"{kind} '{entry.name}' has the name of a recipe field, so its options cannot be "
                              f"written as a table; this is a bug in its plugin, report it to its authors.")
        used[entry.name] = entry
    return used


def used_text(used: dict[str, Any]) -> str:
    return ", ".join(f"{e.kind} {name}" for name, e in used.items())


def _unknown_field(key: str, where: str, used: dict[str, Any], core_fields: tuple[str, ...]) -> RecipeError:
    names = list(core_fields)
    options = [f"{name}.{option}" for name, entry in used.items() for option in _option_names(entry)]
    close = difflib.get_close_matches(key, names + [o.partition(".")[2] for o in options], n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    plugin_part = (f" Options of this run's plugins ({used_text(used)}): {', '.join(options)}."
                   if options else f" This run's plugins ({used_text(used)}) have no options.")
    return RecipeError(f"{where}: unknown recipe field '{key}'.{hint} Fields: {', '.join(names)}.{plugin_part} "
                       f"A plugin's option is set as NAME.OPTION, e.g. --set mep.extractor=tree-sitter.")


def _option_names(entry: Any) -> list[str]:
    try:
        model = entry.options_model()
    except PluginError:
        return []
    return list(model.model_fields) if model is not None else []


def _warn(message: str) -> None:
    warnings.warn(message, RecipeWarning, stacklevel=4)


class Settings:
    """What a recipe file and the overrides say, in the order said (a later one wins), before
    the run's plugins are known."""

    def __init__(self, core_fields: tuple[str, ...]) -> None:
        self.core_fields = core_fields
        self.core: dict[str, Any] = {}
        # ("table", plugin, options, where, given as an override) | ("loose", option, value, where, old style)
        # | ("slot", kind, options, where, old style)
        self.items: list[tuple[str, str, Any, str, bool]] = []

    def add(self, key: str, value: Any, where: str, *, from_file: bool) -> None:
        if isinstance(value, dict) and key == "plugins":  # a resolved recipe's to_dict(): like a file's tables
            for name, table in value.items():
                self.items.append(("table", name, dict(table), where, False))
        elif key.replace("-", "_") in SLOT_FIELDS:  # backbone_options / data_options: "K=V,..." pairs, or a dict
            key = key.replace("-", "_")
            options = parse_options_field(value) if isinstance(value, str) else dict(value)
            self.items.append(("slot", SLOT_FIELDS[key], options, where, from_file))
        elif isinstance(value, dict):  # [name] table
            self.items.append(("table", key, dict(value), where, not from_file))
        elif "." in key:  # name.option
            name, _, option = key.partition(".")
            self.items.append(("table", name, {option.replace("-", "_"): value}, where, True))
        else:
            key = key.replace("-", "_")
            if key in self.core_fields:
                self.core[key] = value
            else:
                self.items.append(("loose", key, value, where, from_file))


def plugin_options(settings: Settings, used: dict[str, Any],
                   quiet: AbstractSet[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Every used plugin's options, from the tables, loose keys and slot options, validated.
    A file's table for a plugin the run does not use is dropped, with a warning unless the
    plugin is in ``quiet`` (the file used it; an override dropped it)."""
    from structret.options import plain

    registry = get_registry()
    given: dict[str, dict[str, Any]] = {name: {} for name in used}
    by_kind = {entry.kind: name for name, entry in used.items()}
    aliases = {alias: name for name, entry in used.items() for alias in entry.aliases}

    for what, key, value, where, flag in settings.items:
        if what == "slot":  # backbone_options / data_options: whatever the run's backbone / reader is
            name = by_kind.get(key)
            if name is None:
                if value:
                    _warn(f"{where}: {key} options {value} are not used: this run has no {key}")
                continue
            if flag:
                field = next(k for k, v in SLOT_FIELDS.items() if v == key)
                _warn(f"{where}: {field} is deprecated; write the options in a [{name}] table")
            given[name].update(value)
        elif what == "loose":  # an option without its plugin: every plugin of the run that has it
            if flag and value == "":
                continue  # an old recipe.toml wrote an unset option as ""
            takers = [name for name, entry in used.items() if key in _option_names(entry)]
            if not takers:
                others = sorted({e.name for e in registry.all()
                                 if isinstance(e.options, str | type) and key in _option_names(e)})
                if not others:
                    raise _unknown_field(key, where, used, settings.core_fields)
                _warn(f"{where}: '{key}' is an option of {', '.join(others)}, which this run does not use "
                      f"({used_text(used)}); it is ignored")
                continue
            if flag:
                _warn(f"{where}: '{key}' as a top-level field is deprecated; write it in the "
                      f"{' and '.join(f'[{t}]' for t in takers)} table")
            for name in takers:
                given[name][key] = value
        else:  # a [name] table, or name.option
            target = key if key in used else aliases.get(key)
            if target is None:
                if not any(registry.has(kind, key) for kind in registry.entries):
                    raise RecipeError(f"{where}: [{key}] names no installed plugin. This run uses "
                                      f"{used_text(used)}; their options go in tables named after them.")
                if flag:
                    raise RecipeError(f"{where}: '{key}' is not a plugin of this run ({used_text(used)}), so "
                                      f"its options {sorted(value)} would not be used.")
                if key not in quiet:
                    _warn(f"{where}: the options for '{key}' are not used: this run uses {used_text(used)}")
                continue
            given[target].update(value)

    resolved = {}
    for name, entry in used.items():
        try:
            values = entry.validate_options(given[name])
        except PluginError as exc:
            raise RecipeError(str(exc)) from None
        if values:
            resolved[name] = {k: plain(v) for k, v in values.items()}
    return resolved


