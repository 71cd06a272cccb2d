"""Run one entity extractor over one file and show what it found (``structret extract``).

The point is to look at entities before pretraining on them: which spans an extractor
picks, how many are distinct (SANTA masks each distinct entity with its own sentinel),
and how much of the text they cover.
"""

from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from structret.contracts import HasFailures
from structret.errors import DataError, PluginError
from structret.records import Entity
from structret.registry import get_registry

# file suffix -> language, for extractors that need one (tree-sitter) when none is given
LANGUAGE_OF_SUFFIX = {
    ".py": "python",
    ".go": "go",
    ".java": "java",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".php": "php",
    ".rb": "ruby",
}


@dataclass
class ExtractionResult:
    path: str
    extractor: str
    language: str | None
    text: str
    entities: list[Entity]
    # what the extractor counted while reading this file, e.g. code that did not parse
    failures: Counter = field(default_factory=Counter)

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def n_distinct(self) -> int:
        return len({e.text for e in self.entities})

    @property
    def covered_chars(self) -> int:
        return _covered(self.entities)

    @property
    def coverage(self) -> float:
        """Share of the text's characters inside some entity."""
        return self.covered_chars / len(self.text) if self.text else 0.0

    def format(self) -> str:
        """The entity listing, and a note when the extractor could not read the text."""
        listing = format_entities(self.text, self.entities)
        if not self.failures:
            return listing
        reasons = "; ".join(f"{reason} ({n}x)" if n > 1 else reason for reason, n in self.failures.items())
        return f"{listing}\nnote: {self.extractor} could not read {self.path}: {reasons}"


def extract_file(
    path: str | Path,
    extractor_name: str,
    language: str | None = None,
    *,
    title: str | None = None,
    **options,
) -> ExtractionResult:
    """Read ``path`` (UTF-8) and run the extractor registered as ``extractor_name`` on it.

    ``language`` defaults to the one the file suffix names (``.go`` -> go), if any;
    ``title`` is passed to extractors that take one (the product rules); ``options``
    go to the extractor's factory (``tagger=``, ``model=``, ``node_types=`` ...).
    """
    path = Path(path)
    text = read_text(path)
    if language is None:
        language = LANGUAGE_OF_SUFFIX.get(path.suffix.lower())
    extractor = get_registry().create("extractor", extractor_name, **options)
    kwargs = {"language": language}
    if title is not None:
        if "title" not in inspect.signature(extractor.extract).parameters:
            raise PluginError(
                f"extractor '{extractor_name}' takes no title; a title is for the product extractors "
                f"(nltk-nouns, spacy-nouns, title-overlap)"
            )
        kwargs["title"] = title
    failures_before = Counter(extractor.failures if isinstance(extractor, HasFailures) else {})
    entities = extractor.extract(text, **kwargs)
    failures = Counter(extractor.failures if isinstance(extractor, HasFailures) else {})
    failures.subtract(failures_before)
    _check_spans(text, entities, extractor_name)
    return ExtractionResult(str(path), extractor_name, language, text, entities, +failures)


def read_text(path: Path) -> str:
    """The file's text, exactly (no newline translation: entity offsets count every character)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a directory; give one file") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}) "
            f"cannot be decoded. Convert the file to UTF-8 first, e.g. iconv -f latin1 -t utf-8 {path}"
        ) from None


def format_entities(text: str, entities: list[Entity]) -> str:
    """One line per entity, ``start-end  kind  text``, then a summary line."""
    spans = [f"{e.start}-{e.end}" for e in entities]
    span_width = max(map(len, spans), default=0)
    kind_width = max((len(e.kind) for e in entities), default=0)
    lines = [
        f"{span:<{span_width}}  {e.kind:<{kind_width}}  {visible(e.text)}".rstrip()
        for span, e in zip(spans, entities)
    ]
    distinct = len({e.text for e in entities})
    covered = _covered(entities)
    share = covered / len(text) if text else 0.0
    lines.append(
        f"{len(entities)} entities, {distinct} distinct, {covered} of {len(text)} characters covered ({share:.1%})"
    )
    return "\n".join(lines)


def visible(text: str) -> str:
    # one entity per line, whatever it holds
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _covered(entities: list[Entity]) -> int:
    """Characters inside at least one entity (overlaps counted once)."""
    covered, reach = 0, 0
    for e in sorted(entities, key=lambda e: e.start):
        start = max(e.start, reach)
        if e.end > start:
            covered += e.end - start
            reach = e.end
    return covered


def _check_spans(text: str, entities: list[Entity], extractor_name: str) -> None:
    """Every entity must be the text it points at: later stages align tokenizers to these spans."""
    for e in entities:
        if not (0 <= e.start <= e.end <= len(text)) or text[e.start : e.end] != e.text:
            raise PluginError(
                f"extractor '{extractor_name}' returned the entity {e.text!r} at {e.start}-{e.end}, but the "
                f"text there is {text[e.start:e.end]!r}. Entities must be character spans of the text; "
                f"this is a bug in that extractor."
            )
