"""A ranking that reads a project's structure: the rules applied to a search's candidates after fusion.

A search of one project finds units (structret.project.units), and a person asking for ``Depends`` wants
the unit that defines it, a question about "routing" the file named ``routing.py``, and the code rather
than its tests. Each rule below has a strength (0 or 1: off), chosen on semble's validation repositories
(docs/results.md), recorded in the index (``structret.json["ranking"]``) and applied by every search of
it, shown by ``structret search --explain``:

- ``definition``: a unit that defines the symbol a query names (one identifier, CamelCase, dotted or
  ``::``; a CamelCase or snake_case word inside a sentence at ``embedded`` of the strength) gains
  ``definition`` times the best score;
  units that define it but were not among the candidates join them.
- ``stem``: a natural-language query's words (prefix-matched: "dependency" finds ``dependencies``)
  against the file's stem and folder: ``stem`` times the share of the words matched.
- ``penalty``: units of test, example, benchmark, vendored, generated or compatibility paths have their
  score multiplied by it.
- ``saturation``: each further unit of a file already ranked above is multiplied by it once more, so the
  top ten are not one file's.
- ``coherence``: a file's best unit gains ``coherence`` times the best score, scaled by its file's share
  of the candidates' scores (files with several matching units).
- ``symbol_weight``: in a hybrid index, a symbol-like query fuses with this lexical weight (an identifier
  is found by its letters), a sentence with the index's own.

Scores are first mapped onto [0, 1] within the query (the fused score's scale depends on the fusion),
so every strength means the same for a lexical index and for a hybrid.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Sequence
from structret.errors import StructretError
from structret.snippets import CAMEL, locate

# a query that names a symbol: dotted or ::-qualified, snake_case, camelCase, PascalCase or CONSTANT
_SYMBOL = re.compile(r"^(?:[A-Za-z_$][\w$]*(?:(?:::|\.|->|#|\\)[A-Za-z_$][\w$]*)+|_\w*|[A-Za-z][a-z0-9]*[A-Z_]\w*"
                     r"|[A-Z][\w$]*|\w+_\w+)[?!]?$")
_EMBEDDED = re.compile(r"\b(?:[A-Z][a-z0-9]+[A-Z]\w*|[a-z][a-z0-9]*[A-Z]\w*|[a-z0-9]+_[a-z0-9_]+)\b")
_SEPARATORS = re.compile(r"::|->|\.|#|\\")
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_STOPWORDS = frozenset("a an and are as at be by do does for from has have how if in into is it its not of on or "
                       "the their this that to was what when where which who why with use used using".split())
_DEFINES = ("class", "module", "defmodule", "def", "defp", "defmacro", "interface", "struct", "enum", "trait",
            "type", "typedef", "func", "function", "fn", "fun", "object", "protocol", "record", "impl",
            "namespace", "package", "union", "macro_rules!", "data", "newtype", "extension", "actor", "let",
            "const", "var", "val", "local function", "local")
_PENALISED = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec|specs|testing|testdata|test_?utils|examples?|_examples?|samples?|demos?|"
    r"docs?_src|benchmarks?|bench|vendor|vendored|third_party|thirdparty|external|compat|_compat|legacy|"
    r"generated|gen|dist|build)(?:/|$)"
    r"|(?:^|/)(?:test_[^/]*|[^/]*_test|[^/]*_spec|[^/]*Tests?|[^/]*Spec|[^/]*Suite|conftest)\.[A-Za-z]+$"
    r"|\.(?:test|spec)\.[jt]sx?$|\.d\.ts$|\.min\.js$|\.pb\.go$|_pb2\.py$|_generated\.\w+$")


@dataclass(frozen=True)
class Ranking:
    """The rules' strengths (the module docstring); the defaults switch every rule off."""

    definition: float = 0.0
    stem: float = 0.0
    penalty: float = 1.0
    saturation: float = 1.0
    coherence: float = 0.0
    embedded: float = 0.5  # the definition boost's share for a symbol named inside a sentence
    symbol_weight: float | None = None
    depth: int = 100  # fused candidates the rules re-order

    def __post_init__(self) -> None:
        for name in ("definition", "stem", "coherence", "embedded"):
            if not getattr(self, name) >= 0:
                raise StructretError(f"ranking: {name} is a boost, at least 0; got {getattr(self, name)!r}.")
        for name in ("penalty", "saturation"):
            if not 0 <= getattr(self, name) <= 1:
                raise StructretError(f"ranking: {name} multiplies a score, in [0, 1]; got {getattr(self, name)!r}.")
        if self.symbol_weight is not None and not 0 <= self.symbol_weight <= 1:
            raise StructretError(f"ranking: symbol_weight is a lexical weight in [0, 1]; got {self.symbol_weight!r}.")
        if self.depth < 1:
            raise StructretError(f"ranking: depth is how many candidates are re-ordered, at least 1; got {self.depth}.")

    @property
    def active(self) -> bool:
        return self != Ranking(depth=self.depth, embedded=self.embedded)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, value: Any) -> "Ranking":
        """A Ranking from itself, a dict (an index's ``structret.json["ranking"]``), a ``"stem=0.5,penalty=0.3"``
        spec, or None (every rule off)."""
        if value is None:
            return cls()
        if isinstance(value, Ranking):
            return value
        if isinstance(value, str):
            pairs = [part.partition("=") for part in value.split(",") if part.strip()]
            if any(not eq for _, eq, _ in pairs):
                raise StructretError(f"ranking {value!r}: give NAME=VALUE pairs, e.g. definition=1,penalty=0.3.")
            value = {name.strip(): text.strip() for name, _, text in pairs}
        if not isinstance(value, Mapping):
            raise StructretError(f"ranking: {value!r} is not a ranking (NAME=VALUE pairs).")
        known = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise StructretError(f"ranking: unknown rule(s) {', '.join(unknown)}; the rules are {', '.join(known)}.")
        try:
            given = {name: (None if v in (None, "none") else int(v) if name == "depth" else float(v))
                     for name, v in value.items()}
        except (TypeError, ValueError):
            raise StructretError(f"ranking {value!r}: every value is a number.") from None
        return cls(**given)  # type: ignore[arg-type]  # each value checked by __post_init__


def is_symbol(query: str) -> bool:
    """Whether a query names a symbol (``Depends``, ``parse_args``, ``http.Client``, ``Router::new``) rather
    than describing something in words; a plain lowercase word ("session") is a word."""
    return _SYMBOL.match(query.strip()) is not None


def symbol_names(query: str, embedded: float = 0.5) -> tuple[set[str], float]:
    """The names a query asks for the definition of, and at which share of the boost: a symbol query's last
    part (and the whole, if qualified) at 1, CamelCase or snake_case words inside a sentence at ``embedded``."""
    text = query.strip()
    if is_symbol(text):
        last = _SEPARATORS.split(text.rstrip("?!"))[-1]
        return {last, text} if last != text else {last}, 1.0
    return set(_EMBEDDED.findall(text)), embedded


def parts(identifier: str) -> list[str]:
    """An identifier's lowercase parts, split at ``_`` and camelCase (``HTTPServer`` -> http, server), without
    the whole words snippets' ``words`` keeps too."""
    return [p.lower() for piece in identifier.split("_") for p in CAMEL.findall(piece) if p]


@lru_cache(maxsize=256)
def _definition(name: str) -> re.Pattern[str]:
    keywords = "|".join(re.escape(k) for k in sorted(_DEFINES, key=len, reverse=True))
    # the name itself, not a prefix of a longer qualified one (``defmodule Phoenix.Router.Scope`` is not Router's)
    return re.compile(rf"(?:^|[\s(@])(?:{keywords})\s+(?:[\w$.:<>*&]*[.:]+)?{re.escape(name)}(?![\w$]|[.:]+\w)",
                      re.MULTILINE)


def defines(name: str, unit_name: str, text: str) -> bool:
    """Whether a unit (its own name, its text) defines ``name``: its name is it, or a definition keyword
    precedes it in the text (a small class's methods, a type beside its functions)."""
    own = unit_name.rsplit(".", 1)[-1].lstrip("$")  # zod's $ZodType defines ZodType
    if unit_name and (unit_name == name or own == name.lstrip("$")):
        return True
    return name in text and _definition(name).search(text) is not None


def _stem_is(path: str, name: str) -> bool:
    """Whether a file is named after ``name`` (``Router`` -> router.ex, routers.py, HTTP_router? no)."""
    base = path.rsplit("/", 1)[-1]
    stem = base.split(".", 1)[0].lower()
    wanted = name.lower()
    return stem in (wanted, wanted + "s") or stem.replace("_", "").replace("-", "") == wanted.replace("_", "")


def penalised(path: str) -> bool:
    """Whether a path is a test, example, benchmark, vendored, generated or compatibility file."""
    return _PENALISED.search(path) is not None


def _path_words(path: str) -> set[str]:
    pieces = [p for p in path.split("/") if p]
    if not pieces:
        return set()
    stem = pieces[-1].rsplit(".", 1)[0] if "." in pieces[-1].lstrip(".") else pieces[-1]
    found = set(parts(stem)) | {stem.lower(), stem.lower().replace("_", "")}
    if len(pieces) > 1:
        found |= set(parts(pieces[-2])) | {pieces[-2].lower()}
    return found


def _matches(word: str, words: set[str]) -> bool:
    """``word`` is one of ``words``, or shares with one a prefix of at least 4 letters that leaves at most 2
    letters of the shorter (route/routing, dependency/dependencies)."""
    if word in words:
        return True
    for w in words:
        shorter = min(len(word), len(w))
        if shorter < 4:
            continue
        common = next((n for n, (a, b) in enumerate(zip(word, w)) if a != b), shorter)
        if common >= max(4, shorter - 2):
            return True
    return False


@dataclass
class Ranked:
    """One hit after the rules: its id, score, which sides listed it, and why it moved."""

    id: str
    score: float
    sources: tuple[str, ...] = ()
    why: tuple[str, ...] = ()


class UnitView:
    """What the rules read of an index's units: each one's file path, name and text, by id (read lazily)."""

    def __init__(self, ids: Sequence[str], path_of: Callable[[str], str], name_of: Callable[[str], str],
                 text_of: Callable[[str], str]):
        self.ids = ids
        self.path_of = path_of
        self.name_of = name_of
        self.text_of = text_of
        self._by_name: dict[str, list[str]] | None = None

    @classmethod
    def of(cls, ids: Sequence[str], root: str, readings: Mapping[str, str], texts: Mapping[str, str]) -> "UnitView":
        """An index's documents: ``ids``, the folder ``root`` their files are under, the lexical side's
        ``readings`` (a unit's qualified name) and the ``texts``."""
        files: dict[str, str] = {}  # every rule asks each candidate's file, every query: parse each id once

        def path_of(i: str) -> str:
            found = files.get(i)
            if found is None:
                found = files[i] = _file_of(i, root or None)
            return found

        return cls(ids, path_of, lambda i: _name_of(readings.get(i)), lambda i: texts.get(i) or "")

    def named(self, name: str) -> list[str]:
        """The units whose own name (last part) is ``name``, every unit's name read once."""
        if self._by_name is None:
            by_name: dict[str, list[str]] = {}
            for i in self.ids:
                unit_name = self.name_of(i).rsplit(".", 1)[-1].lstrip("$")
                if unit_name:
                    by_name.setdefault(unit_name, []).append(i)
            self._by_name = by_name
        return self._by_name.get(name.lstrip("$"), [])


def rerank(query: str, hits: Iterable[tuple[str, float, tuple[str, ...]]], ranking: Ranking, units: UnitView,
           k: int) -> list[Ranked]:
    """The rules applied to one query's fused candidates ``(id, score, sources)``, best first: the top ``k``."""
    listed = [Ranked(i, float(s), tuple(src)) for i, s, src in hits]
    if not listed:
        return []
    low = min(h.score for h in listed)
    high = max(h.score for h in listed)
    span = high - low
    for h in listed:  # onto [0, 1] within the query; a lone candidate (or all equal) scores 1
        h.score = (h.score - low) / span if span > 0 else 1.0
    by_id = {h.id: h for h in listed}
    if ranking.coherence:
        _coherence(listed, ranking.coherence, units)
    names, share = symbol_names(query, ranking.embedded)
    if ranking.definition and names:
        boost = ranking.definition * share
        for name in names:
            for i in units.named(name):  # a definition the candidates missed joins them
                if i not in by_id:
                    by_id[i] = Ranked(i, 0.0, ())
                    listed.append(by_id[i])
        for h in listed:
            if any(defines(name, units.name_of(h.id), units.text_of(h.id)) for name in names):
                # the file named after it holds the definition itself, not an extension or a re-export
                gain = boost * (1.5 if any(_stem_is(units.path_of(h.id), name) for name in names) else 1.0)
                h.score += gain
                h.why += (f"+{gain:g} defines {'/'.join(sorted(names))}",)
    if ranking.stem and not is_symbol(query):
        keywords = {w.lower() for w in _WORDS.findall(query) if len(w) > 2 and w.lower() not in _STOPWORDS}
        if keywords:
            seen: dict[str, float] = {}
            for h in listed:
                path = units.path_of(h.id)
                if path not in seen:
                    in_path = _path_words(path)
                    seen[path] = sum(_matches(w, in_path) for w in keywords) / len(keywords)
                if seen[path]:
                    h.score += ranking.stem * seen[path]
                    h.why += (f"+{ranking.stem * seen[path]:.2g} path {path.rsplit('/', 1)[-1]} matches",)
    if ranking.penalty < 1:
        for h in listed:
            if penalised(units.path_of(h.id)):
                h.score *= ranking.penalty
                h.why += (f"x{ranking.penalty:g} test/example/vendored path",)
    listed.sort(key=lambda h: -h.score)
    if ranking.saturation < 1:
        listed = _saturate(listed, ranking.saturation, units, k)
    return listed[:k]


def _coherence(listed: list[Ranked], strength: float, units: UnitView) -> None:
    total: dict[str, float] = {}
    best: dict[str, Ranked] = {}
    for h in listed:
        path = units.path_of(h.id)
        total[path] = total.get(path, 0.0) + h.score
        if path not in best or h.score > best[path].score:
            best[path] = h
    most = max(total.values())
    if most <= 0:
        return
    for path, h in best.items():
        gain = strength * total[path] / most
        if gain:
            h.score += gain
            h.why += (f"+{gain:.2g} its file holds several matches",)


def _saturate(listed: list[Ranked], decay: float, units: UnitView, k: int) -> list[Ranked]:
    """Greedy: the best remaining hit, each further one of a file it ranks after multiplied by ``decay`` once
    more; beyond ``k`` the rest keep their order."""
    chosen: list[Ranked] = []
    taken: dict[str, int] = {}
    remaining = list(listed)
    while remaining and len(chosen) < k:
        best_n, best_score = 0, -1.0
        for n, h in enumerate(remaining):
            if h.score <= best_score:
                break  # sorted by score: no later hit can beat it
            score = h.score * decay ** taken.get(units.path_of(h.id), 0)
            if score > best_score:
                best_n, best_score = n, score
        h = remaining.pop(best_n)
        count = taken.get(units.path_of(h.id), 0)
        if count:
            h.score = best_score
            h.why += (f"x{decay ** count:.2g} its file's unit {count + 1} in the list",)
        taken[units.path_of(h.id)] = count + 1
        chosen.append(h)
    return chosen + remaining


def _file_of(doc_id: str, root: str | None) -> str:
    """A document's file (relative to the indexed folder ``root``), or its id where it names none."""
    where = locate(doc_id, root)
    return where.path if where is not None else doc_id


def _name_of(reading: str | None) -> str:
    """The qualified name in a lexical side's reading of a unit (bm25-fields' code_reading JSON), or ""."""
    if not reading or not reading.startswith('{"code": '):
        return ""
    try:
        found = json.loads(reading)
    except ValueError:
        return ""
    return str(found.get("func_name") or "") if isinstance(found, dict) else ""
