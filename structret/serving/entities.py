"""Which entities a served hit shows, and finding them in the hit's text.

The entities worth marking are the ones the model was trained to predict: a run of
``structret train`` records, per language, the extractor its objectives found entities with
(``entities`` in its structret.json, from an objective's ``entity_extractors()``), and that
extractor is used. For a model that records none, ``--extractor NAME`` chooses; left out,
Python code is marked by the default Python extractor (structret.defaults), code of a
language named with ``--language`` by the default code extractor, and anything else not at
all (prose marked with every word would say nothing). Every choice comes with a sentence
saying why, shown at start-up and by ``/api/health``.
"""

from __future__ import annotations

import ast
import inspect
import logging
from dataclasses import dataclass
from itertools import islice
from typing import Any, Iterable

from structret import defaults
from structret.contracts import Extractor
from structret.errors import PluginError
from structret.records import Entity
from structret.registry import get_registry

log = logging.getLogger("structret.serve")

NONE = "none"  # --extractor none: mark nothing
_SAMPLE = 50  # texts read to tell whether an index holds Python code
_MAX_SAMPLE_CHARS = 100_000  # longer texts are skipped by that check: parsing them says little more


@dataclass
class Marker:
    """An extractor and how to call it on hit texts; ``reason`` says why it was chosen."""

    name: str
    extractor: Extractor
    language: str | None
    reason: str

    @property
    def takes_title(self) -> bool:
        return "title" in inspect.signature(self.extractor.extract).parameters

    def entities(self, text: str, start: int = 0, end: int | None = None, title: str | None = None) -> list[Entity]:
        """Entities of ``text[start:end]`` as spans into ``text``; spans that are not the text
        they point at are dropped (logged): a page must not show a mark in the wrong place."""
        end = len(text) if end is None else end
        piece = text[start:end]
        kwargs: dict[str, Any] = {}
        if self.language:
            kwargs["language"] = self.language
        if title is not None and self.takes_title:
            kwargs["title"] = title
        found = self.extractor.extract(piece, **kwargs)
        kept = [Entity(e.start + start, e.end + start, e.text, e.kind) for e in found
                if 0 <= e.start <= e.end <= len(piece) and piece[e.start:e.end] == e.text]
        if len(kept) < len(found):
            log.warning("extractor %s gave %d spans that are not the text they point at; not shown",
                        self.name, len(found) - len(kept))
        return kept


def looks_like_python(texts: Iterable[str | None]) -> bool:
    """True when most of the first texts parse as Python holding a statement (a def, an
    assignment, an import ...): a single English word parses too, as an expression."""
    sample = list(islice((t for t in texts if t and len(t) <= _MAX_SAMPLE_CHARS), _SAMPLE))
    if not sample:
        return False
    python = 0
    for text in sample:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        python += any(not isinstance(node, ast.Expr) for node in tree.body)
    return python * 2 >= len(sample)


def choose_marker(entities: dict[str, str], texts: Iterable[str | None], *, name: str | None = None,
                  options: dict[str, Any] | None = None, language: str | None = None) -> Marker | None:
    """The extractor whose entities hits show (None: no marks), by the rules of this module's
    docstring. ``entities``: what the model's run recorded (``Model.entities``, {} for none);
    ``name``/``options``/``language``: what ``--extractor``, ``--extractor-option`` and
    ``--language`` say."""
    registry = get_registry()
    options = dict(options or {})
    if name == NONE:
        return None
    if name:
        return Marker(name, registry.create("extractor", name, **options), language, f"--extractor {name}")
    if options:
        raise PluginError("--extractor-option goes with --extractor NAME: say which extractor takes it.")
    python = language is None and looks_like_python(texts)
    code = "python" if python or (language or "").lower() in ("python", "py") else (language or "").lower()
    if entities:
        chosen, of = entities.get(code), code
        if chosen is None and len(set(entities.values())) == 1:  # one extractor for everything it saw
            of, chosen = next(iter(entities.items()))
        if chosen is None:
            log.warning("the model's run learned entities of %s, but the indexed texts are not Python and no "
                        "--language names theirs, so no entities are marked; pass --language or --extractor NAME",
                        ", ".join(f"{lang or 'records without a language'} ({n})" for lang, n in entities.items()))
            return None
        return Marker(chosen, registry.create("extractor", chosen), language or of or None,
                      f"the model's run learned to predict {chosen} entities"
                      + (f" of {of} code" if of else "") + " (entities in its structret.json)")
    if code == "python":
        why = "the indexed texts are Python code" if python else "--language python"
        return Marker(defaults.PYTHON_EXTRACTOR, registry.create("extractor", defaults.PYTHON_EXTRACTOR), language,
                      f"the model records no entity extractor (not a run that learned entities) and {why}; "
                      f"--extractor NAME chooses another, --extractor none marks nothing")
    if language:
        return Marker(defaults.CODE_EXTRACTOR, registry.create("extractor", defaults.CODE_EXTRACTOR), language,
                      f"the model records no entity extractor and --language {language} says the texts are code")
    log.info("no entity extractor: the model records none and the texts are not Python code")
    return None
