"""What is installed: the plugins by kind and one plugin's options (the command line's ``plugins``
command), and whose code an unexpected error came from. Light: ``structret --help`` imports it."""

from __future__ import annotations

import difflib
import warnings
from typing import Any, Sequence

import click

from structret.errors import PluginError, StructretError
from structret.registry import KINDS, BrokenPlugin, PluginEntry, PluginWarning, get_registry

__all__ = ["KINDS", "PluginWarning", "broken_plugins", "command_names", "describe_plugin", "list_plugins",
           "load_command", "plugin_of_error"]

# kinds whose options a run's recipe holds, as a [NAME] table or --set NAME.KEY=VALUE
_RECIPE_KINDS = ("objective", "backbone", "linearizer", "dataset")


def list_plugins(kind: str | None = None) -> list[PluginEntry]:
    """Every loaded plugin (of ``kind``), as registered: name, aliases, kind, distribution, help."""
    return [e for e in get_registry().all() if kind is None or e.kind == kind]


def command_names(taken: Sequence[str] = ()) -> list[str]:
    """Names of the commands plugins add to the command line (``register_commands``), less those
    in ``taken`` (core's own, which win: a warning names each plugin command they hide)."""
    registry = get_registry()
    names = []
    for name in registry.names("command"):
        if name in taken:
            entry = registry.get("command", name)
            warnings.warn(f"plugin '{entry.plugin}' from distribution '{entry.distribution}' adds the command "
                          f"'{name}', which structret has already: theirs is not used. Report it to its authors.",
                          PluginWarning, stacklevel=2)
        else:
            names.append(name)
    return names


def load_command(name: str) -> Any:
    """The ``click.Command`` a plugin registered as ``name``, or None when there is none or it cannot
    be loaded (a PluginWarning says why, so ``structret --help`` still lists everything else)."""
    registry = get_registry()
    if not registry.has("command", name):
        return None
    entry = registry.get("command", name)
    try:
        command = entry.load()
    except PluginError as exc:
        warnings.warn(str(exc), PluginWarning, stacklevel=2)
        return None
    if not isinstance(command, click.Command):
        warnings.warn(f"{entry.what} (plugin '{entry.plugin}' from distribution '{entry.distribution}') is "
                      f"{type(command).__name__}, not a click command: it is not used. Report it to its authors.",
                      PluginWarning, stacklevel=2)
        return None
    return command


def broken_plugins() -> list[BrokenPlugin]:
    """Plugins that failed to load, each with its distribution and the error."""
    return list(get_registry().broken)


def describe_plugin(name: str, kind: str | None = None) -> str:
    """The options of plugin ``name`` (of every kind that has one so named, or of ``kind``): type,
    default and documentation of each, and how a command or recipe sets them."""
    from structret.options import describe

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
        head = f"{entry.kind} {entry.name} (distribution {entry.distribution})"
        if entry.is_file:  # a recipe or suite: its settings are the file
            blocks.append(f"{head}: {entry.target}\n\n{entry.read_text().rstrip()}")
            continue
        if entry.kind == "command":
            blocks.append(f"{head}: a command; 'structret {entry.name} --help' lists its options.")
            continue
        if entry.kind == "suite":  # one built from folders of data: it takes what bench gives it
            blocks.append(f"{head}: a table over folders of data; run it as 'structret bench --suite {entry.name} "
                          f"--data-root PATH --system NAME ...'.")
            continue
        model = entry.options_model()
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
