"""What is installed: the plugins by kind and one plugin's options (the command line's ``plugins``
command), and whose code an unexpected error came from. Light: ``structret --help`` imports it."""

from __future__ import annotations

import difflib
from typing import Any, Sequence

from structret.errors import StructretError
from structret.registry import KINDS, BrokenPlugin, PluginEntry, PluginWarning, get_registry

__all__ = ["KINDS", "PluginWarning", "broken_plugins", "describe_plugin", "list_plugins", "plugin_of_error"]

# kinds whose options a run's recipe holds, as a [NAME] table or --set NAME.KEY=VALUE
_RECIPE_KINDS = ("objective", "backbone", "linearizer", "dataset")


def list_plugins(kind: str | None = None) -> list[PluginEntry]:
    """Every loaded plugin (of ``kind``), as registered: name, aliases, kind, distribution, help."""
    return [e for e in get_registry().all() if kind is None or e.kind == kind]


def broken_plugins() -> list[BrokenPlugin]:
    """Plugins that failed to load, each with its distribution and the error."""
    return list(get_registry().broken)


def describe_plugin(name: str, kind: str | None = None) -> str:
    """The options of plugin ``name`` (of every kind that has one so named, or of ``kind``): type,
    default and documentation of each, and how a command or recipe sets them."""
    from structret.options import describe  # pydantic: kept out of import structret.api

    registry = get_registry()
    if kind:
        registry.get(kind, name)  # unknown: lists that kind's names
    kinds = [kind] if kind else [k for k in KINDS if registry.has(k, name)]
    if not kinds:
        close = difflib.get_close_matches(name, sorted({e.name for e in registry.all()}), n=1)
        raise StructretError(f"no plugin is named '{name}'.{f' Did you mean {close[0]!r}?' if close else ''} "
                             f"'structret plugins' lists them all.")
    blocks = []
    for k in kinds:
        entry = registry.get(k, name)
        model = entry.options_model()
        head = f"{entry.kind} {entry.name} (distribution {entry.distribution})"
        if model is None:
            blocks.append(f"{head}: takes **options and checks them itself; its documentation lists them.")
            continue
        infos = describe(model)
        lines = [head + (":" if infos else ": no options")]
        for o in infos:
            default = "required" if o.required else f"default {o.default!r}"
            lines.append(f"  {o.name}  ({o.type}, {default})")
            if o.doc:
                lines.append(f"      {o.doc}")
        if infos and k in _RECIPE_KINDS:
            lines.append(f"In a run: a recipe's [{entry.name}] table, or --set {entry.name}.{infos[0].name}=VALUE")
        elif infos:
            lines.append("Given as KEY=VALUE where a command names this plugin (--index-option, --option, ...)")
        if infos and entry.options is None:
            lines.append("(read off the factory's signature: the plugin declares no options model)")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def plugin_of_error(exc: BaseException) -> tuple[str, str] | None:
    """``(plugin, distribution)`` whose code raised ``exc``: the innermost frame of its traceback in
    a plugin's package (frames of torch and other libraries in between are passed over)."""
    packages = get_registry().packages
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    return next((packages[m.partition(".")[0]] for m in reversed(frames) if m.partition(".")[0] in packages), None)
