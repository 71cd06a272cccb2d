"""Turning a ``FORMAT:PATH`` spec into a Dataset through the reader registered for FORMAT."""

from __future__ import annotations

from typing import Any

from structret.errors import DataError
from structret.records import Dataset
from structret.registry import get_registry


def parse_data_spec(spec: str) -> tuple[str, str]:
    fmt, sep, path = spec.partition(":")
    if not sep or not fmt or not path:
        known = ", ".join(get_registry().names("dataset"))
        raise DataError(
            f"--data '{spec}' is not FORMAT:PATH. Formats: {known}. "
            f"Example: --data codesearchnet:python/final/jsonl/test"
        )
    return fmt, path


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


def load_dataset(spec: str, *, split: str | None = None, options: dict[str, Any] | None = None) -> Dataset:
    """The dataset ``FORMAT:PATH`` names, read by FORMAT's reader with ``options`` checked and
    completed by the reader's options model (an unknown or ill-typed option is a PluginError
    listing the reader's options)."""
    from structret.options import CORE_ARGUMENTS  # pydantic: kept out of import structret.api

    fmt, path = parse_data_spec(spec)
    options = dict(options or {})
    core = [key for key in CORE_ARGUMENTS["dataset"] if key in options]
    if core:
        raise DataError(f"'{core[0]}' is not a reader option: the path goes in --data FORMAT:PATH and the "
                        f"split in --split.")
    dataset = get_registry().create("dataset", fmt, path, split=split, **options)
    if dataset.name == fmt:  # tables name the data the user named
        dataset.name = spec + (f" [{split}]" if split else "")
    return dataset


def require(dataset: Dataset, *parts: str, spec: str = "", split: str | None = None) -> None:
    """Raise DataError if a part a command needs ("documents", "queries", "judgments") is empty,
    saying which dataset and split, and how many rows were read and skipped."""
    sizes = {"documents": len(dataset.corpus), "queries": len(dataset.queries),
             "judgments": sum(len(docs) for docs in dataset.qrels.values())}
    empty = [part for part in parts if sizes[part] == 0]
    if not empty:
        return
    where = spec or dataset.name
    split_text = f"the '{split}' split of " if split else ""
    raise DataError(
        f"{split_text}{where} has no {' and no '.join(empty)}: {dataset.stats.summary()}. "
        f"Check the path, the --split (a file in the published layout belongs to the split of its "
        f"folder; a mined file's rows carry a 'partition') and the skip reasons."
    )
