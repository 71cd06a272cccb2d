"""The command line's ``KEY=VALUE`` options and settings, as dicts of text."""

from __future__ import annotations

from structret.errors import DataError


def parse_pairs(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict of strings, a later key winning: the one parser of the
    command line's options and settings. Values stay text: the options model of the plugin
    they go to decides their types (``query_prefix=1`` is the text "1", ``limit=20`` the number)."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DataError(f"option '{pair}' is not KEY=VALUE (for example: locale=us)")
        found[key.strip()] = value.strip()
    return found


def parse_options(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """A plugin's ``KEY=VALUE`` options (``parse_pairs``), dashes in keys read as underscores."""
    return {key.replace("-", "_"): value for key, value in parse_pairs(pairs).items()}
