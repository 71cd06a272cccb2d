"""Datasets by ``FORMAT:PATH`` spec: the spec parsed, read by FORMAT's registered reader with its
options checked, the parts a caller needs checked, and the spec remembered so that another split
of the same data can be read (``structret.api.load_dataset``)."""

from __future__ import annotations

from typing import Any, Sequence

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


def load_dataset(spec: str, split: str | None = None, *, need: Sequence[str] = (), **options: Any) -> Dataset:
    """The dataset ``"FORMAT:PATH"`` names (any registered reader: codesearchnet, adv, esci,
    beir, ...), one ``split`` of it (None: what the reader reads by default, for
    codesearchnet every row); ``options`` go to the reader (``locale="us"``), checked and
    completed by its options model. Raises DataError for a bad spec or unreadable file, or when
    a part in ``need`` ("documents", "queries", "judgments") is empty; PluginError for an
    unknown format or option (listing the reader's options)."""
    from structret.options import CORE_ARGUMENTS

    fmt, path = parse_data_spec(spec)
    core = [key for key in CORE_ARGUMENTS["dataset"] if key in options]
    if core:
        raise DataError(f"'{core[0]}' is not a reader option: the path goes in --data FORMAT:PATH and the "
                        f"split in --split.")
    dataset = get_registry().create("dataset", fmt, path, split=split, **options)
    if dataset.name == fmt:  # tables name the data the user named
        dataset.name = spec + (f" [{split}]" if split else "")
    dataset.source = (spec, split, dict(options))
    require(dataset, *need, spec=spec, split=split)
    return dataset


def dataset_split(data: Dataset | str, split: str | None) -> Dataset:
    """``data`` as a Dataset of ``split``: a spec is read; a Dataset from ``load_dataset`` that
    holds another split is read again with ``split``; any other Dataset is used as it is."""
    if isinstance(data, str):
        return load_dataset(data, split)
    if split is not None and data.source is not None and data.source[1] != split:
        spec, _, options = data.source
        return load_dataset(spec, split, **options)
    return data


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
