"""The search page, rendered on the server: a form, the ranked hits, nothing to build.

Code is highlighted by Pygments (its token classes, with the CSS its HtmlFormatter
writes for them) and each entity is a ``<mark class="entity">`` around its characters,
so the two can be told apart: colour is the token kind, the mark is what the model
was trained to predict. Everything taken from a request or an index is escaped.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any, Sequence
from urllib.parse import urlencode

from structret.records import Entity
from structret.snippets import mark_terms, query_terms

_PAGE_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #222; }
form { display: flex; gap: .5rem; margin-bottom: 1rem; }
form input[name=q] { flex: 1; font-size: 1rem; padding: .4rem; }
form input[name=k] { width: 4.5rem; }
#error { background: #fde8e8; border: 1px solid #e0a0a0; padding: .6rem; border-radius: 4px; }
.note { color: #666; font-size: .9rem; }
ol.hits { padding-left: 0; list-style: none; }
li.hit { border-top: 1px solid #ddd; padding: .6rem 0; }
.hit-head { display: flex; gap: 1rem; align-items: baseline; }
.side { font-size: 0.8em; padding: 0 0.4em; margin-left: 0.4em; border-radius: 0.3em; background: #eef; }
.rank { font-weight: bold; } .score { font-family: monospace; } .hit-id { color: #555; font-family: monospace; }
pre.code { background: #f8f8f8; padding: .6rem; overflow-x: auto; font-size: .85rem; }
div.text { white-space: pre-wrap; }
mark.entity { background: none; border-bottom: 2px solid #d0a000; padding: 0; }
pre.snippet { background: #fbfbf4; padding: .6rem; overflow-x: auto; font-size: .85rem; margin-bottom: .3rem; }
pre.snippet .ln { color: #999; display: inline-block; min-width: 3.5em; user-select: none; }
mark.term { background: #fff0a0; padding: 0; }
details.whole summary { cursor: pointer; color: #555; font-size: .85rem; }
dl.aspects { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .4rem 0; }
dl.aspects dt { color: #555; } dl.aspects dd { margin: 0; }
"""


@lru_cache(maxsize=1)
def _pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs("pre.code")


def _lexer(language: str | None):
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        return TextLexer()


def _css_class(ttype: Any) -> str:
    from pygments.token import STANDARD_TYPES

    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    return STANDARD_TYPES[ttype]


def _disjoint(entities: Sequence[Entity], start: int, end: int) -> list[Entity]:
    """Entities inside ``[start, end)``, overlaps dropped (the earlier wins): marks cannot cross."""
    kept, reach = [], start
    for e in sorted(entities, key=lambda e: (e.start, -e.end)):
        if e.start >= reach and e.end <= end and e.end > e.start:
            kept.append(e)
            reach = e.end
    return kept


def marked(text: str, entities: Sequence[Entity], start: int = 0, end: int | None = None,
           language: str | None = None) -> str:
    """``text[start:end]`` as HTML: Pygments token spans for ``language`` (plain text for
    None), entity marks around the entities' characters. Token spans are cut at entity
    boundaries so the tags always nest."""
    end = len(text) if end is None else end
    piece = text[start:end]
    tokens = [(start + i, ttype, value) for i, ttype, value in _lexer(language).get_tokens_unprocessed(piece)]
    if "".join(v for _, _, v in tokens) != piece:  # a lexer that rewrites its input: show the text plainly
        from pygments.token import Text

        tokens = [(start, Text, piece)]
    cuts = sorted({start, end, *(p for e in _disjoint(entities, start, end) for p in (e.start, e.end)),
                   *(i for i, _, _ in tokens)})
    marks = {e.start: e for e in _disjoint(entities, start, end)}
    out, open_until = [], None
    token_at = iter(tokens)
    current = next(token_at, None)
    following = next(token_at, None)
    for a, b in zip(cuts, cuts[1:]):
        while following is not None and following[0] <= a:
            current, following = following, next(token_at, None)
        if open_until is None and a in marks:
            e = marks[a]
            out.append(f'<mark class="entity" data-kind="{escape(e.kind)}" title="{escape(e.kind)}">')
            open_until = e.end
        css = _css_class(current[1]) if current is not None else ""
        chunk = escape(text[a:b])
        out.append(f'<span class="{css}">{chunk}</span>' if css else chunk)
        if open_until is not None and b >= open_until:
            out.append("</mark>")
            open_until = None
    return "".join(out)


def _snippet(hit: Any, terms: set[str]) -> str:
    """The hit's lines that hold a query word (numbered by their line in the file), words marked."""
    rows = []
    for row in hit.snippet:
        number = f'<span class="ln">{row["line"]}</span>' if row["line"] is not None else ""
        line = mark_terms(row["text"], terms, lambda w: f'<mark class="term">{escape(w)}</mark>', escape)
        rows.append(f"{number}{line}")
    return f'<pre class="snippet">{chr(10).join(rows)}</pre>'


def _hit(hit: Any, language: str | None, query: str = "") -> str:
    where = escape(hit.location) if getattr(hit, "location", None) else escape(hit.id)
    head = (f'<div class="hit-head"><span class="rank">{hit.rank}.</span>'
            f'<span class="score">{hit.score:.4f}</span><span title="{escape(hit.id)}" class="hit-id">{where}</span>'
            f'{_sides(hit)}</div>')
    if hit.text is None:
        return f'<li class="hit" id="hit-{hit.rank}">{head}<p class="note">(this index keeps no texts)</p></li>'
    layout = hit.layout
    parts = [head]
    if layout is not None and layout.fields:
        rows = "".join(f"<dt>{escape(f.name)}</dt><dd>{escape(hit.text[f.start:f.end]) or '&mdash;'}</dd>"
                       for f in layout.fields)
        parts.append(f'<dl class="aspects">{rows}</dl>')
    body = layout.body if layout is not None and layout.body is not None else None
    start, end = (body.start, body.end) if body is not None else (0, len(hit.text))
    if layout is not None and layout.kind:  # a product's description: prose, not code
        parts.append(f'<div class="text">{marked(hit.text, hit.entities, start, end)}</div>')
    elif getattr(hit, "snippet", ()):  # a function from a source folder: the lines that match, the whole one a click away
        parts.append(_snippet(hit, query_terms(query)))
        parts.append(f'<details class="whole"><summary>the whole function</summary>'
                     f'<pre class="code">{marked(hit.text, hit.entities, start, end, language)}</pre></details>')
    else:
        parts.append(f'<pre class="code">{marked(hit.text, hit.entities, start, end, language)}</pre>')
    if hit.entities_note:
        parts.append(f'<p class="note">{escape(hit.entities_note)}</p>')
    return f'<li class="hit" id="hit-{hit.rank}">{"".join(parts)}</li>'


def render(*, info: dict[str, Any], query: str = "", k: Any = 10, answer: Any = None, error: str | None = None,
           language: str | None = None) -> str:
    """The whole page: the form (keeping what was typed), then the error, or the answer's hits."""
    title = f"{escape(query[:80])} - structret" if query else "structret search"
    form = (f'<form method="get" action="./" role="search">'
            f'<input name="q" value="{escape(query)}" placeholder="a query, e.g. read a config file" autofocus>'
            f'<input name="k" value="{escape(str(k))}" inputmode="numeric" title="how many hits">'
            f'<button type="submit">Search</button></form>')
    about = (f'<p class="note" id="about">{info["index_size"]} documents ({escape(info["index_kind"] or "an")} index), '
             f'model {escape(info["model"])}{_hybrid(info)}; entities: {escape(info["extractor"] or "none")}</p>')
    body = [f"<h1>structret search</h1>", form, about]
    if error is not None:
        body.append(f'<p id="error" class="error" role="alert">{escape(error)}</p>')
    elif answer is not None:
        body.append(f'<p id="timing" class="note">query <q class="query">{escape(answer.query)}</q>: '
                    f'{len(answer.hits)} hits in {answer.took_ms:.1f} ms '
                    f'(encoding {answer.model_ms:.1f} ms, search {answer.took_ms - answer.model_ms:.1f} ms)</p>')
        body += [f'<p class="note">{escape(n)}</p>' for n in answer.notes]
        api = escape("api/search?" + urlencode({"q": answer.query, "k": answer.k}))
        body.append(f'<ol class="hits">{"".join(_hit(h, language, answer.query) for h in answer.hits)}</ol>'
                    f'<p class="note"><a href="{api}">these hits as JSON</a></p>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<style>{_PAGE_CSS}{_pygments_css()}</style></head><body>{"".join(body)}</body></html>')


def _sides(hit: Any) -> str:
    """Which side of a hybrid index listed the hit: a badge each (nothing for a dense-only index)."""
    names = {"dense": "dense", "lexical": "lexical"}
    return "".join(f'<span class="side side-{escape(s)}" title="found by the {escape(names.get(s, s))} side">'
                   f'{escape(names.get(s, s))}</span>' for s in hit.sources)


def _hybrid(info: dict[str, Any]) -> str:
    if not info.get("fusion"):
        return ""
    return f' fused with {escape(info.get("lexical") or "a lexical side")} ({escape(info["fusion"])})'
