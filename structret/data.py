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


def parse_options(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``key=value`` strings to a dict; ints, floats and true/false are converted."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise DataError(f"option '{pair}' is not key=value (for example: locale=us)")
        options[key.strip().replace("-", "_")] = _convert(raw.strip())
    return options


def _convert(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def load_dataset(spec: str, *, split: str | None = None, options: dict[str, Any] | None = None) -> Dataset:
    """The dataset ``FORMAT:PATH`` names, read by FORMAT's reader with ``options`` checked and
    completed by the reader's options model (an unknown or ill-typed option is a PluginError
    listing the reader's options)."""
    from structret.options import CORE_ARGUMENTS

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
