"""A registered plugin: its kind, name and target, who provides it, and its options checked
against the model it declares. ``structret.registry`` collects them from the installed plugins."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from structret.errors import PluginError

# What a plugin may throw that must not end the process: any error, and also SystemExit
# (a module calling sys.exit() at import) or any other BaseException. Each ``except
# _PLUGIN_FAULTS`` is preceded by ``except KeyboardInterrupt: raise``: Ctrl-C is the user's.
_PLUGIN_FAULTS = BaseException


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return repr(exc)


@dataclass(frozen=True)
class PluginEntry:
    kind: str
    name: str
    target: Any
    aliases: tuple[str, ...] = ()
    help: str = ""
    plugin: str = ""
    distribution: str = ""
    options: Any = None  # its Options model, or a lazy "module:attr" string; None: read off the factory

    @property
    def is_file(self) -> bool:
        """A file the plugin ships (a recipe or suite TOML), to read rather than call."""
        return isinstance(self.target, os.PathLike)

    def read_text(self) -> str:
        """The text of a file entry (a recipe or suite TOML)."""
        try:
            return Path(self.target).read_text(encoding="utf-8")
        except OSError as exc:
            raise PluginError(f"{self.what} (plugin '{self.plugin}' from distribution '{self.distribution}') "
                              f"points at {self.target}, which cannot be read ({exc.strerror}): reinstall it "
                              f"(pip install --force-reinstall {self.distribution}).") from None

    def load(self) -> Callable[..., Any]:
        """The factory; a lazy ``"module:attr"`` target is imported now."""
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            who = f"{self.what} (plugin '{self.plugin}' from distribution '{self.distribution}')"
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                # the plugin's own module, not a dependency: the distribution is what is broken
                raise PluginError(f"{who} points at the module {module_name}, which its distribution does not "
                                  f"hold: reinstall it (pip install --force-reinstall {self.distribution}), or "
                                  f"report the broken target '{self.target}' to its authors.") from exc
            raise PluginError(f"{who} needs the Python module '{exc.name}', which is not installed. Install it "
                              f"(pip install {(exc.name or '?').split('.')[0].replace('_', '-')}) or pick another "
                              f"{self.kind}.") from exc
        except KeyboardInterrupt:
            raise
        except _PLUGIN_FAULTS as exc:
            raise PluginError(f"{self.what} (plugin '{self.plugin}' from distribution '{self.distribution}') "
                              f"failed to import {module_name}: {_describe(exc)}") from exc
        for part in attr.split(".") if attr else ():
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise PluginError(
                    f"{self.kind} '{self.name}' (plugin '{self.plugin}' from distribution "
                    f"'{self.distribution}') points at '{self.target}', but {module_name} has no "
                    f"'{attr}'. This is a bug in that plugin; report it to its authors."
                ) from None
        return obj

    @property
    def what(self) -> str:
        return f"{self.kind} '{self.name}'"

    def options_model(self) -> Any:
        """The plugin's Options model (structret.options); read off the factory's signature when
        it declares none, ``None`` when that signature takes ``**options``."""
        from structret import options as opts

        if self.options is None:
            return opts.from_signature(self.load(), self.kind, self.name)
        if not isinstance(self.options, str):
            return self.options
        model = PluginEntry(self.kind, self.name, self.options, plugin=self.plugin,
                            distribution=self.distribution).load()
        if not (isinstance(model, type) and issubclass(model, opts.BaseModel)):
            raise PluginError(f"{self.what} (plugin '{self.plugin}' from distribution '{self.distribution}') "
                              f"declares options {self.options!r}, which is not a structret.options.Options "
                              f"class. This is a bug in that plugin; report it to its authors.")
        return model

    def validate_options(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` checked against the plugin's declared options, every option filled in. A plugin
        that declares none gets its keys checked against its factory's signature and its values
        converted by the signature's annotations (a factory taking ``**options`` checks them itself)."""
        from structret import options as opts

        if self.options is None:
            _bind(self, self.load(), (), values, partial=True)
            model = self.options_model()  # read off the signature: its annotations convert text
            if model is None:  # **options: the plugin checks its own
                return dict(values)
            return {key: opts.convert(model, key, value, what=self.what) for key, value in values.items()}
        return dict(self.validated_options(values))

    def validated_options(self, values: dict[str, Any]) -> Any:
        """``values`` as an instance of the plugin's declared Options model (checked, defaults filled)."""
        from structret import options as opts

        return opts.validate(self.options_model(), values, what=self.what)


@dataclass
class BrokenPlugin:
    plugin: str
    distribution: str
    error: str


def _bind(entry: PluginEntry, factory: Callable[..., Any], args: tuple, kwargs: dict, *, partial: bool) -> None:
    """Raise PluginError naming the options the factory accepts if ``kwargs`` does not fit its signature."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # some builtins have no signature; let the call decide
        return
    try:
        (signature.bind_partial if partial else signature.bind)(*args, **kwargs)
    except TypeError as exc:
        accepted = [p.name for p in signature.parameters.values()
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        close = [c for key in kwargs if key not in accepted
                 for c in ([a for a in accepted if a.lower() == key.lower()]
                           or difflib.get_close_matches(key, accepted, n=1))]
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise PluginError(
            f"{entry.kind} '{entry.name}' (from distribution '{entry.distribution}'): {exc}.{hint} "
            f"Options it accepts: {', '.join(accepted) or '(none)'}."
        ) from None
