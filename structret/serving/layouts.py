"""Index texts read back into their fields, for showing a product hit as a record.

An index keeps the text its model read, not the record. A model trained with a text
format (``structret.linearization.TextFormat``) read products in one of two layouts
(plugins/structret_products/linearizers.py):

- ``aspects`` (ATTEMPT): ``[BRAND] nike [COLOR] red [SEP] [C] title and description``
- ``product`` (SANTA): ``title : {title} text : {description}``

Both are read back here by their markers. The reading is a best effort: an aspect's text
that itself holds an indicator-like ``[WORD]``, or a title holding `` text : ``, is split
at the first marker, so the fields shown may differ from the record's; the hit's text
itself is always returned unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# the indicator tokens plugins/structret_products/linearizers.py:indicator_token makes
_INDICATOR = re.compile(r"\[([A-Z0-9]+(?:_[A-Z0-9]+)*)\]")
_PRODUCT = re.compile(r"title : (?P<title>.*?) text : (?P<text>.*)\Z", re.S)


@dataclass(frozen=True)
class Span:
    """One field of a hit's text: its name and the span ``text[start:end]`` it covers."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class Layout:
    """A hit's text split into named fields; ``body`` is the free text (content, description)
    that code or entity marks are shown on, ``fields`` the short ones (aspects, title)."""

    kind: str  # "aspects", "product" or "" (the text as it is)
    fields: tuple[Span, ...] = field(default_factory=tuple)
    body: Span | None = None


def read_layout(text: str, text_format: str = "", *, aspects: list[str] | None = None,
                separator: str = "[SEP]") -> Layout:
    """``text`` in the layout of ``text_format`` (``aspects``, ``product``); a layout with no
    fields and the whole text as body when the format is another or the text does not fit it.

    ``aspects``: the run's aspect names, so that ``[CATEGORY_1]`` is shown as ``category 1``
    as the run named it; without them the indicator's own name is shown, lower-cased.
    """
    whole = Layout("", (), Span("text", 0, len(text)))
    if text_format == "aspects":
        return _aspects(text, aspects or [], separator) or whole
    if text_format == "product":
        found = _PRODUCT.match(text)
        if found is None:
            return whole
        return Layout("product", (Span("title", *found.span("title")),), Span("text", *found.span("text")))
    return whole


def _aspects(text: str, names: list[str], separator: str) -> Layout | None:
    marker = f"{separator} [C]"
    cut = text.find(marker)
    if cut < 0:
        return None
    by_indicator = {_indicator(name): name for name in names}
    fields = []
    indicators = list(_INDICATOR.finditer(text, 0, cut))
    for this, following in zip(indicators, indicators[1:] + [None]):
        start, end = this.end(), (following.start() if following is not None else cut)
        start, end = _strip(text, start, end)
        label = by_indicator.get(this.group(0), this.group(1).lower().replace("_", " "))
        fields.append(Span(label, start, end))
    body_start = cut + len(marker)
    return Layout("aspects", tuple(fields), Span("content", *_strip(text, body_start, len(text))))


def _indicator(name: str) -> str:
    # the rule of structret_products.linearizers.indicator_token, without its refusals:
    # a name it refuses never reached a layout
    return "[" + re.sub(r"[\W_]+", "_", name).strip("_").upper() + "]"


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
