"""The plugin registry: every named thing a pipeline can use, and who provides it.

Built once per process from the ``structret`` entry-point group. Built-ins are
found exactly like third-party plugins, through their distribution's entry points.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import inspect
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pluggy

from structret import contracts, hookspecs
from structret.errors import PluginError, StructretError
from structret.registry.entry import _PLUGIN_FAULTS, BrokenPlugin, PluginEntry, _bind, _describe

ENTRY_POINT_GROUP = "structret"
ALLOW_ENV = "STRUCTRET_LOAD_PLUGINS"

# kind (as users type it) -> hook that registers it
KINDS: dict[str, str] = {
    "dataset": "register_datasets",
    "backbone": "register_backbones",
    "index": "register_indexes",
    "retriever": "register_retrievers",
    "miner": "register_miners",
    "chunker": "register_chunkers",
    "extractor": "register_extractors",
    "linearizer": "register_linearizers",
    "objective": "register_objectives",
    "protocol": "register_protocols",
    "recipe": "register_recipes",
    "suite": "register_suites",
    "command": "register_commands",
}
# kinds whose entries are files a plugin ships (a recipe; a suite, unless it is a function): read, never called
FILE_KINDS = ("recipe", "suite")


class PluginWarning(UserWarning):
    """A plugin could not be loaded; everything that does not need it still works."""


def _normalize(dist_name: str) -> str:
    return re.sub(r"[-_.]+", "-", dist_name).lower()


@dataclass
class Registry:
    entries: dict[str, dict[str, PluginEntry]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )
    broken: list[BrokenPlugin] = field(default_factory=list)
    # top-level package -> (plugin, distribution): whose code a traceback frame is (cli.unexpected)
    packages: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, entry: PluginEntry) -> None:
        table = self.entries[entry.kind]
        for key in (entry.name, *entry.aliases):
            if key in table:
                other = table[key]
                raise PluginError(
                    f"two plugins register the {entry.kind} name '{key}': plugin "
                    f"'{other.plugin}' from distribution '{other.distribution}' and plugin "
                    f"'{entry.plugin}' from distribution '{entry.distribution}'. Uninstall one, "
                    f"or limit loading with {ALLOW_ENV}=dist1,dist2."
                )
        for key in (entry.name, *entry.aliases):
            table[key] = entry

    def get(self, kind: str, name: str) -> PluginEntry:
        if kind not in self.entries:
            raise PluginError(f"unknown plugin kind '{kind}'; kinds are: {', '.join(KINDS)}")
        table = self.entries[kind]
        if name in table:
            return table[name]
        known = sorted(table)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        listing = ", ".join(known) if known else "(none installed)"
        broken = "".join(
            f"\n  note: plugin '{b.plugin}' from '{b.distribution}' failed to load: {b.error}"
            for b in self.broken
        )
        raise PluginError(f"unknown {kind} '{name}'.{hint} Known {plural(kind)}: {listing}.{broken}")

    def has(self, kind: str, name: str) -> bool:
        return name in self.entries.get(kind, {})

    def create(self, kind: str, name: str, *args: Any, **kwargs: Any) -> Any:
        """Resolve ``name`` and call its factory with its options checked and completed (the
        plugin's Options model: every option passed, defaults filled in). ``kwargs`` may also
        hold the arguments core gives every plugin of the kind (``structret.options.CORE_ARGUMENTS``).

        A factory registered with an Options model that has a parameter named ``options`` gets
        the validated model instance as ``options=``; any other gets one keyword per option."""
        from structret.options import CORE_ARGUMENTS

        entry = self.get(kind, name)
        if entry.is_file:
            raise PluginError(f"{entry.what} is a file ({entry.target}) to read, not a factory to call.")
        core = {k: v for k, v in kwargs.items() if k in CORE_ARGUMENTS.get(kind, ())}
        given = {k: v for k, v in kwargs.items() if k not in core}
        # checked before the factory's module is imported: a typo costs no torch
        made = entry.validate_options(given) if entry.options is None else entry.validated_options(given)
        factory = entry.load()
        kwargs = {**core, **({"options": made} if entry.options is not None and _takes_options(factory) else dict(made))}
        _bind(entry, factory, args, kwargs, partial=False)
        return _checked(entry, _call(entry, factory, args, kwargs))

    def check(self, kind: str, name: str, options: dict[str, Any] | None = None) -> PluginEntry:
        """Fail now, before any heavy work, if ``name`` is unknown or ``options`` are not its
        options. Names cost nothing; options import the plugin's options module (its factory's
        module when it declares none)."""
        entry = self.get(kind, name)
        if options:
            entry.validate_options(options)
        return entry

    def names(self, kind: str) -> list[str]:
        """Primary names of one kind (aliases left out), sorted."""
        return sorted({e.name for e in self.entries[kind].values()})

    def all(self) -> list[PluginEntry]:
        seen = {id(e): e for table in self.entries.values() for e in table.values()}
        return sorted(seen.values(), key=lambda e: (e.kind, e.name))


def plural(kind: str) -> str:
    return kind + ("es" if kind.endswith("x") else "s")


def _takes_options(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` has a parameter named ``options`` (it is then handed its Options model's instance)."""
    try:
        parameter = inspect.signature(factory).parameters.get("options")
    except (TypeError, ValueError):  # some builtins have no signature
        return False
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)


def _call(entry: PluginEntry, factory: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """The factory's result; an error that is not structret's own (a plugin's bug, or a
    library failing inside it) is reported with the plugin and its distribution."""
    try:
        return factory(*args, **kwargs)
    except (StructretError, KeyboardInterrupt):
        raise  # already a sentence for the user, or the user's own stop
    except _PLUGIN_FAULTS as exc:
        raise PluginError(f"{entry.what} (plugin '{entry.plugin}' from distribution '{entry.distribution}') "
                          f"failed while being created: {type(exc).__name__}: {exc}") from exc


def _checked(entry: PluginEntry, made: Any) -> Any:
    if entry.kind == "objective":  # its rules say more than a list of members
        contracts.check_objective(made, entry.name)
        return made
    needs = contracts.shape(entry.kind)
    missing = [attr for attr in needs if not hasattr(made, attr)]
    if missing:
        raise PluginError(f"{entry.what} (plugin '{entry.plugin}' from distribution '{entry.distribution}') "
                          f"returned {type(made).__name__}, which has no {', '.join(missing)}; {'an' if entry.kind[0] in 'aeiou' else 'a'} {entry.kind} needs "
                          f"{', '.join(needs)} (structret/contracts.py declares them).")
    return made


def _allowed() -> set[str] | None:
    raw = os.environ.get(ALLOW_ENV)
    if raw is None or not raw.strip():
        return None
    return {_normalize(n.strip()) for n in raw.split(",") if n.strip()}


def _misspelled_hooks(module: Any) -> list[str]:
    """Functions marked ``@hookimpl`` whose name is no structret hook."""
    bad = []
    for attr in dir(module):
        obj = getattr(module, attr, None)
        if callable(obj) and hasattr(obj, "structret_impl") and attr not in KINDS.values():
            close = difflib.get_close_matches(attr, KINDS.values(), n=1)
            bad.append(attr + (f" (did you mean {close[0]}?)" if close else ""))
    return bad


def build_registry() -> Registry:
    """Load every allowed plugin distribution and collect what it registers."""
    registry = Registry()
    pm = pluggy.PluginManager("structret")
    pm.add_hookspecs(hookspecs)
    allowed = _allowed()
    dist_of: dict[str, str] = {}

    def broken(plugin: str, dist: str, error: str) -> None:
        registry.broken.append(BrokenPlugin(plugin, dist, error))
        warnings.warn(f"structret plugin '{plugin}' from distribution '{dist}' was not loaded: {error}. "
                      f"Commands that do not need it still work.", PluginWarning, stacklevel=3)

    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "?"
        if allowed is not None and _normalize(dist) not in allowed:
            continue
        if pm.has_plugin(ep.name):
            # the same distribution seen twice on sys.path (editable + regular install)
            if dist_of.get(ep.name) == dist:
                continue
            raise PluginError(
                f"two distributions declare the structret plugin '{ep.name}': "
                f"'{dist_of[ep.name]}' and '{dist}'. Uninstall one of them."
            )
        try:
            module = ep.load()
        except KeyboardInterrupt:
            raise
        except _PLUGIN_FAULTS as exc:  # a broken plugin must not take the CLI down
            broken(ep.name, dist, f"import failed: {_describe(exc)}")
            continue
        misspelled = _misspelled_hooks(module)
        if misspelled:
            broken(ep.name, dist, f"unknown hook(s): {', '.join(misspelled)}")
            continue
        try:
            pm.register(module, name=ep.name)
        except pluggy.PluginValidationError as exc:
            broken(ep.name, dist, f"invalid hook: {exc}")
            continue
        dist_of[ep.name] = dist
        registry.packages.setdefault(module.__name__.partition(".")[0], (ep.name, dist))

    # a distribution loads whole or not at all: one raising hook drops what its other hooks registered,
    # so "was not loaded" is true and nothing half-registered is listed or used
    made: list[PluginEntry] = []
    failed: set[str] = set()
    for kind, hook_name in KINDS.items():
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            plugin, dist = impl.plugin_name, dist_of.get(impl.plugin_name, "?")
            collected: list[PluginEntry] = []

            def register(name, target, *, aliases=(), help="", options=None, _kind=kind, _p=plugin, _d=dist,
                         _c=collected):
                if _kind in FILE_KINDS and not isinstance(target, (os.PathLike, str)):
                    raise PluginError(f"{_kind} '{name}': the target is a pathlib.Path to its TOML file"
                                      + (" or a 'module:function' string" if _kind == "suite" else "")
                                      + f", not {type(target).__name__}")
                if _kind == "recipe" and isinstance(target, str):
                    target = Path(target)  # a recipe is always a file: a path given as text reads the same
                _c.append(PluginEntry(_kind, name, target, tuple(aliases), help, _p, _d, options))

            try:
                impl.function(register=register)
            except KeyboardInterrupt:
                raise
            except _PLUGIN_FAULTS as exc:
                failed.add(plugin)
                broken(plugin, dist, f"{hook_name} raised {_describe(exc)}; none of what it registers is used")
                continue
            made.extend(collected)
    for entry in made:
        if entry.plugin in failed:
            continue
        registry.add(entry)
        # a target in core's own package (a protocol class) does not make core's code that plugin's
        if isinstance(entry.target, str) and entry.target.partition(".")[0].partition(":")[0] != __name__.partition(".")[0]:
            registry.packages.setdefault(entry.target.partition(".")[0].partition(":")[0],
                                         (entry.plugin, entry.distribution))
    return registry


@functools.lru_cache(maxsize=1)
def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    return build_registry()


def reset_registry() -> None:
    """Forget the cached registry (tests, or after installing a plugin at run time)."""
    get_registry.cache_clear()
