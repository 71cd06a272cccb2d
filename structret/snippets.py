"""What a person reads of a hit: where it is (``path:start-end``) and the lines that match the query.

A function found in a source folder carries its file and lines in its id (``file:///...#L12-L30``,
what the miners write); the snippet lists the function's lines that hold a word of the query first
(a word or a camelCase / snake_case part of an identifier: ``readConfig`` matches "read config"),
the most matching words first, then its opening lines. Pure text: the CLI, the search page and the
MCP server show the same thing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9]+")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")  # identifier parts (also search.ranking)
_LINES = re.compile(r"#L(\d+)-L(\d+)$")
# words a query is made of that say nothing about code
STOPWORDS = frozenset("a an and are as at be by for from how i in is it of on or that the this to was what when where "
                      "which with".split())


def words(text: str) -> set[str]:
    """The lowercase words of ``text``, identifiers split at camelCase and snake_case too."""
    found: set[str] = set()
    for word in _WORD.findall(text):
        found.add(word.lower())
        found.update(part.lower() for part in CAMEL.findall(word))
    return found


def query_terms(query: str) -> set[str]:
    """The words a snippet marks: the query's words and identifier parts, minus stopwords and single letters."""
    return {w for w in words(query) if len(w) > 1 and w not in STOPWORDS}


@dataclass
class Location:
    """Where a hit is: its file (relative to ``root`` when under it) and its first and last line."""

    path: str
    start: int | None = None
    end: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.start}-{self.end}" if self.start is not None else self.path


def locate(doc_id: str, root: str | None = None) -> Location | None:
    """A hit's file and lines from its id (``file:///p/a.py#L3-L9`` or ``p/a.py#L3-L9``), None for an id
    that names no file."""
    lines = _LINES.search(doc_id)
    base = doc_id[:lines.start()] if lines else doc_id
    if base.startswith("file://"):
        base = unquote(urlparse(base).path)
    elif not lines:
        return None
    path = Path(base)
    if root:
        try:
            path = path.relative_to(root)
        except ValueError:
            pass
    return Location(str(path), *(int(n) for n in lines.groups())) if lines else Location(str(path))


@dataclass
class Snippet:
    """Lines of a hit to show: ``(line number in the file or None, text, matched words)``, matching ones first."""

    lines: list[tuple[int | None, str, set[str]]] = field(default_factory=list)
    matched: int = 0  # how many of the shown lines hold a query word

    def as_dict(self) -> list[dict]:
        return [{"line": n, "text": text, "matches": sorted(found)} for n, text, found in self.lines]


def snippet(text: str, query: str, *, first_line: int | None = None, limit: int = 8) -> Snippet:
    """Up to ``limit`` lines of ``text``: those holding a query word first (most words first, then in
    order), then the opening lines not shown yet; numbered from ``first_line`` when the text is the
    file's lines from there (None: unnumbered, e.g. a function whose docstring was taken out)."""
    terms = query_terms(query)
    rows = [(i, line, words(line) & terms) for i, line in enumerate(text.splitlines())]
    if limit <= 0:
        return Snippet()
    matching = sorted((row for row in rows if row[2]), key=lambda row: (-len(row[2]), row[0]))[:limit]
    shown = {row[0] for row in matching}
    rest = [row for row in rows if row[0] not in shown][:limit - len(matching)]
    return Snippet([(None if first_line is None else first_line + i, line, found) for i, line, found in matching + rest],
                   len(matching))


def mark_terms(line: str, terms: set[str], style: Callable[[str], str],
               plain: Callable[[str], str] = lambda text: text) -> str:
    """``line`` with every word or identifier part in ``terms`` passed through ``style`` and the text
    between them through ``plain`` (``html.escape`` for a page: marks never land inside an entity)."""
    if not terms:
        return plain(line)
    out, last = [], 0
    for word in _WORD.finditer(line):
        parts = [(m.start(), m.end()) for m in CAMEL.finditer(word.group())] or [(0, len(word.group()))]
        if word.group().lower() in terms:
            parts = [(0, len(word.group()))]
        for start, end in parts:
            if word.group()[start:end].lower() in terms:
                out.append(plain(line[last:word.start() + start]))
                out.append(style(line[word.start() + start:word.start() + end]))
                last = word.start() + end
    out.append(plain(line[last:]))
    return "".join(out)


def readable(hit: Any, query: str, *, rank: int, root: str | None = None, lines: int = 8) -> dict:
    """One hit as a person (or a script) reads it: rank, score, id, where it is, which sides found it,
    and the snippet (line numbers from the file when the id names its lines)."""
    where = locate(hit.id, root)
    shown = Snippet()
    if hit.text is not None:
        # numbered only when the text is the file's lines start..end (an index of a source folder keeps
        # each function as written; a CodeSearchNet row's code has its docstring taken out)
        exact = where is not None and where.start is not None and where.end is not None and \
            where.end - where.start + 1 == len(hit.text.splitlines())
        shown = snippet(hit.text, query, first_line=where.start if exact and where else None, limit=lines)
    # PATH:START-END for an index of a source folder (``root``); other indexes keep their dataset's ids
    return {"rank": rank, "score": float(hit.score), "id": hit.id,
            "location": str(where) if where and root else hit.id, "path": where.path if where else None,
            "start": where.start if where else None, "end": where.end if where else None,
            "sources": list(hit.sources), "why": list(getattr(hit, "why", ())), "snippet": shown.as_dict(),
            "text": hit.text}
