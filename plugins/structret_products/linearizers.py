"""Products as text: ATTEMPT's aspect layout and SANTA's product template.

``aspects`` (Sun et al., "Pre-training with Aspect-Content Text Mutual Prediction for
Multi-Aspect Dense Retrieval", CIKM 2023) writes a record as::

    [A1] t_a1 [A2] t_a2 ... [SEP] [C] t_c [SEP]

one indicator token per aspect, then the content indicator ``[C]`` and the content.

* **Indicator tokens** are derived from the aspect name by one rule,
  :func:`indicator_token`: runs of characters that are not letters or digits become one
  ``_``, leading/trailing ``_`` are dropped, the rest is upper-cased and bracketed:
  ``brand`` -> ``[BRAND]``, ``category 1`` -> ``[CATEGORY_1]``, ``product-type`` ->
  ``[PRODUCT_TYPE]``. Names that would give ``[C]`` or a BERT special token
  (``[SEP]``, ``[CLS]``, ``[MASK]``, ``[PAD]``, ``[UNK]``), or nothing at all, are
  refused, as are two names giving one token. (ATTEMPT's code uses BERT's
  ``[unused0..3]``; named tokens say what they stand for and work for any vocabulary,
  so they are added to the tokenizer as special tokens instead:
  :meth:`AspectLinearizer.special_tokens`.)
* **An absent aspect keeps its indicator** with empty text (``[BRAND] nike [COLOR] [SEP]``):
  the paper's rule, and what its code does.
* **Which aspects, in which order**: ``aspects=[...]`` fixes the list, so every item has
  the same layout and an indicator always sits at the same place among the others, as in
  ATTEMPT (category, brand, color for every item). Left out, the aspects are the sorted
  keys the record itself has: nothing to configure, but items with different aspects get
  different layouts, and a query (whose aspects are empty at retrieval time) gets no
  aspect indicators at all. Aspects a record has beyond a fixed list are left out and
  counted in ``left_out``.
* **Several values of one aspect** are joined with ``", "`` (ATTEMPT joins its category
  levels with ``,``).
* **Content** is the title and the content text joined by one space, exactly
  ``ItemRecord.text()``, i.e. the paper's "title, description". ATTEMPT's code also
  appends the bullet points (title ``[SEP]`` description ``[SEP]`` bullets);
  ``content_fields=("title", "content", "bullets")`` adds them (space-joined), but SANTA
  uses bullet points as queries, so they stay out by default.
* **Queries**: content is the query text. ATTEMPT keeps the query's aspect text empty for
  relevance matching (the indicators stay); ``query_aspects=True`` writes them instead
  (pretraining uses them: see the ``aspect-mlm`` objective).

:func:`aspect_layout` returns an :class:`AspectLayout`: the text a tokenizer encodes (it
adds ``[CLS]`` and the closing ``[SEP]`` itself) and the character span of every segment
(indicator, aspect text per aspect, separator, content), which masking needs.
``linearize(record)`` returns the paper's tokens: the whitespace tokens of that text plus
the closing separator.

``product`` is SANTA's template for products, exactly as OpenMatch's
``build_test_product.py`` writes it, ``"title :" + " {} " + "text :" + " {}"``, i.e.
``title : {title} text : {description}`` (an empty description leaves ``text : `` with its
trailing space). A query is its text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from structret.errors import PluginError
from structret.records import ItemRecord, Layout, Query, Sequence, Span, TextRecord

CONTENT_INDICATOR = "[C]"
SEPARATOR = "[SEP]"
VALUE_SEPARATOR = ", "
CONTENT_FIELDS = ("title", "content")
_RESERVED = {"C", "SEP", "CLS", "MASK", "PAD", "UNK"}
_NOT_WORD = re.compile(r"[\W_]+")
_INDICATOR = re.compile(r"\[([A-Z0-9]+(?:_[A-Z0-9]+)*)\]")  # what indicator_token makes


def indicator_token(aspect: str) -> str:
    """The indicator token of an aspect name: ``brand`` -> ``[BRAND]``, ``category 1`` -> ``[CATEGORY_1]``."""
    if not isinstance(aspect, str):
        raise PluginError(f"an aspect name is a string, not {aspect!r}")
    key = _NOT_WORD.sub("_", aspect).strip("_").upper()
    if not key:
        raise PluginError(f"aspect name {aspect!r} has no letter or digit to make an indicator token from")
    if key in _RESERVED:
        raise PluginError(
            f"aspect name {aspect!r} would give the indicator [{key}], which is the content indicator or a "
            f"tokenizer's own special token; rename the aspect"
        )
    return f"[{key}]"


def indicator_tokens(aspects: Iterable[str]) -> list[str]:
    """Indicators of ``aspects`` in order, then ``[C]``; two names giving one token are refused."""
    tokens: dict[str, str] = {}
    for name in aspects:
        token = indicator_token(name)
        if token in tokens and tokens[token] != name:
            raise PluginError(f"aspects {tokens[token]!r} and {name!r} both give the indicator {token}; rename one")
        tokens[token] = name
    return [*tokens, CONTENT_INDICATOR]


def _check_aspects(aspects: Any) -> tuple[str, ...] | None:
    if aspects is None:
        return None
    if isinstance(aspects, str) or not all(isinstance(a, str) for a in aspects):
        raise PluginError(f"aspects is a list of aspect names, e.g. [\"brand\", \"color\"], not {aspects!r}")
    aspects = tuple(aspects)
    if len(set(aspects)) != len(aspects):
        raise PluginError(f"aspects lists a name twice: {list(aspects)}")
    indicator_tokens(aspects)  # every name gives a distinct, allowed token
    return aspects


def _check_fields(fields: Any) -> tuple[str, ...]:
    allowed = ("title", "content", "bullets")
    if isinstance(fields, str) or not fields or any(f not in allowed for f in fields):
        raise PluginError(f"content_fields is a non-empty list of {', '.join(allowed)}; got {fields!r}")
    return tuple(fields)


def aspect_text(values: Any, value_separator: str = VALUE_SEPARATOR) -> str:
    """One aspect's text: its non-empty values, stripped, joined by ``value_separator``."""
    if values is None:
        return ""
    if isinstance(values, str):
        values = [values]
    return value_separator.join(v.strip() for v in values if isinstance(v, str) and v.strip())


def content_text(record: Any, fields: tuple[str, ...] = CONTENT_FIELDS) -> str | None:
    """The content of a record (``None`` for a kind of record that has none we know)."""
    if isinstance(record, str):
        return record.strip()
    if isinstance(record, Query):
        return record.text.strip()
    if isinstance(record, ItemRecord):
        pieces = {"title": [record.title], "content": [record.content], "bullets": list(record.bullets)}
        return " ".join(p.strip() for f in fields for p in pieces[f] if p and p.strip())
    if isinstance(record, TextRecord):
        return record.text().strip()
    return None


def record_aspects(record: Any) -> dict[str, list[str]]:
    return dict(getattr(record, "aspects", None) or {}) if isinstance(record, (ItemRecord, Query)) else {}


@dataclass(frozen=True)
class Segment:
    """One piece of the layout: ``text[start:end]`` of :class:`AspectLayout`.

    ``kind`` is ``"indicator"`` (``name`` = the aspect, or ``"content"`` for ``[C]``),
    ``"aspect"`` (an aspect's text; empty span when the record lacks it), ``"separator"``
    or ``"content"``.
    """

    kind: str
    name: str
    start: int
    end: int


@dataclass(frozen=True)
class AspectLayout:
    """A record in ATTEMPT's layout: ``text`` without ``[CLS]`` and the closing separator
    (a tokenizer adds both), and every segment's character span into it."""

    text: str
    segments: tuple[Segment, ...]
    separator: str = SEPARATOR

    def spans(self, kind: str) -> list[Segment]:
        return [s for s in self.segments if s.kind == kind]

    def piece(self, segment: Segment) -> str:
        return self.text[segment.start:segment.end]

    @property
    def aspects(self) -> dict[str, str]:
        """Aspect name -> its text in the layout (``""`` when absent)."""
        return {s.name: self.piece(s) for s in self.spans("aspect")}

    @property
    def content(self) -> str:
        return self.piece(self.spans("content")[0])

    @property
    def tokens(self) -> list[str]:
        """The paper's tokens: ``[A1] t_a1 ... [SEP] [C] t_c [SEP]``, texts split on whitespace."""
        return [*self.text.split(), self.separator]


def aspect_layout(
    record: Any,
    aspects: Iterable[str] | None = None,
    *,
    content_fields: tuple[str, ...] = CONTENT_FIELDS,
    query_aspects: bool = True,
    separator: str = SEPARATOR,
    value_separator: str = VALUE_SEPARATOR,
) -> AspectLayout:
    """``record`` (an ``ItemRecord``, a ``Query``, a ``TextRecord`` or a string) in the aspect layout.

    ``aspects``: which aspects, in order; ``None`` = the record's own keys, sorted.
    ``query_aspects=False`` writes a query's aspects empty (ATTEMPT's relevance matching).
    Raises ``PluginError`` for a record with no content we can read.
    """
    content = content_text(record, content_fields)
    if content is None:
        raise PluginError(f"the aspects layout reads items, queries and text, not {type(record).__name__}")
    own = record_aspects(record)
    if isinstance(record, Query) and not query_aspects:
        own = {}
    names = tuple(aspects) if aspects is not None else tuple(sorted(own))
    parts: list[tuple[str, str, str]] = []  # (kind, name, text)
    for name in names:
        parts.append(("indicator", name, indicator_token(name)))
        parts.append(("aspect", name, aspect_text(own.get(name), value_separator)))
    parts += [("separator", "", separator), ("indicator", "content", CONTENT_INDICATOR), ("content", "content", content)]

    text, segments = "", []
    for kind, name, piece in parts:
        if piece and text:
            text += " "
        segments.append(Segment(kind, name, len(text), len(text) + len(piece)))
        text += piece
    return AspectLayout(text, tuple(segments), separator)


class AspectLinearizer:
    """ATTEMPT's input layout (see the module docstring)."""

    name = "aspects"

    def __init__(
        self,
        aspects: Iterable[str] | None = None,
        content_fields: Iterable[str] = CONTENT_FIELDS,
        query_aspects: bool = False,
        separator: str = SEPARATOR,
        value_separator: str = VALUE_SEPARATOR,
    ):
        if not isinstance(query_aspects, bool):
            raise PluginError(f"query_aspects is true or false, not {query_aspects!r}")
        self.aspects = _check_aspects(aspects)
        self.content_fields = _check_fields(content_fields)
        self.query_aspects = query_aspects
        self.separator = separator
        self.value_separator = value_separator
        self.failures: Counter = Counter()
        self.left_out: Counter = Counter()  # aspects records had beyond the fixed list

    def layout(self, record: Any) -> AspectLayout | None:
        """The record's :class:`AspectLayout`, or ``None`` (counted in ``failures``) for a record it cannot read."""
        if content_text(record, self.content_fields) is None:
            self.failures[f"not an item, query or text: {type(record).__name__}"] += 1
            return None
        if self.aspects is not None:
            for name in record_aspects(record):
                if name not in self.aspects:
                    self.left_out[name] += 1
        try:
            return aspect_layout(
                record, self.aspects, content_fields=self.content_fields, query_aspects=self.query_aspects,
                separator=self.separator, value_separator=self.value_separator,
            )
        except PluginError as exc:  # an aspect name without an indicator: one record, not the corpus
            self.failures[str(exc)] += 1
            return None

    def text(self, record: Any) -> str | None:
        """What a tokenizer encodes (it adds ``[CLS]`` and the closing ``[SEP]``)."""
        layout = self.layout(record)
        return None if layout is None else layout.text

    def linearize(self, record: Any) -> Sequence | None:
        layout = self.layout(record)
        return None if layout is None else Sequence(layout.tokens)

    def fields(self, text: str) -> Layout | None:
        """A text :meth:`text` wrote, read back: each aspect by its indicator, the content after
        ``[SEP] [C]`` (contracts.OPTIONAL). A best effort: an aspect value that itself holds an
        indicator-like ``[WORD]`` is split there; the text itself is always shown unchanged."""
        marker = f"{self.separator} {CONTENT_INDICATOR}"
        cut = text.find(marker)
        if cut < 0:
            return None
        by_indicator = {}
        for name in self.aspects or ():
            try:
                by_indicator[indicator_token(name)] = name
            except PluginError:  # a name without an indicator never reached a text
                pass
        found = []
        indicators = list(_INDICATOR.finditer(text, 0, cut))
        for this, following in zip(indicators, indicators[1:] + [None]):
            start, end = _strip(text, this.end(), following.start() if following is not None else cut)
            found.append(Span(by_indicator.get(this.group(0), this.group(1).lower().replace("_", " ")), start, end))
        return Layout(self.name, tuple(found), Span("content", *_strip(text, cut + len(marker), len(text))))

    def special_tokens(self, names_or_records: Iterable[Any] = ()) -> list[str]:
        """The indicator tokens to add to a tokenizer (as special tokens), ``[C]`` last.

        With a fixed ``aspects`` list, its indicators; otherwise those of the aspect names
        (or of the aspects of the records) given, sorted.
        """
        if self.aspects is not None:
            return indicator_tokens(self.aspects)
        names: set[str] = set()
        for x in names_or_records:
            names.update([x] if isinstance(x, str) else record_aspects(x))
        return indicator_tokens(sorted(names))

    def __repr__(self) -> str:
        return f"aspects(aspects={list(self.aspects) if self.aspects is not None else None!r})"


SANTA_PRODUCT = "title :" + " {} " + "text :" + " {}"  # OpenMatch scripts/santa/.../build_test_product.py
_PRODUCT = re.compile(r"title : (?P<title>.*?) text : (?P<text>.*)\Z", re.S)


def product_text(record: Any) -> str | None:
    """SANTA's text of a product (``title : {t} text : {d}``); a query's own text; ``None`` otherwise."""
    if isinstance(record, Query):
        return record.text
    if isinstance(record, ItemRecord):
        return SANTA_PRODUCT.format(record.title, record.content)
    if isinstance(record, TextRecord):
        return SANTA_PRODUCT.format(record.title, record.text_)
    return None


class ProductLinearizer:
    """SANTA's product template; tokens are its whitespace tokens."""

    name = "product"

    def __init__(self):
        self.failures: Counter = Counter()

    def text(self, record: Any) -> str | None:
        text = product_text(record)
        if text is None:
            self.failures[f"not a product or query: {type(record).__name__}"] += 1
        return text

    def linearize(self, record: Any) -> Sequence | None:
        text = self.text(record)
        return None if text is None else Sequence(text.split())

    def fields(self, text: str) -> Layout | None:
        """A text :meth:`text` wrote, read back: the title and the description (contracts.OPTIONAL);
        a title that itself holds `` text : `` is cut there."""
        found = _PRODUCT.match(text)
        if found is None:
            return None
        return Layout(self.name, (Span("title", *found.span("title")),), Span("text", *found.span("text")))

    def __repr__(self) -> str:
        return "product()"


def aspects(aspects: Iterable[str] | str | None = None, content_fields: Iterable[str] = CONTENT_FIELDS,
            query_aspects: bool = False, separator: str = SEPARATOR,
            value_separator: str = VALUE_SEPARATOR) -> AspectLinearizer:
    if isinstance(aspects, str):  # "brand,color" from a command line or recipe
        aspects = [a.strip() for a in aspects.split(",") if a.strip()] or None
    return AspectLinearizer(aspects, content_fields, query_aspects, separator, value_separator)


def product() -> ProductLinearizer:
    return ProductLinearizer()


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
