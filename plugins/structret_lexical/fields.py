"""BM25 per field of a function: its name, signature, the names it calls, its comments and
strings, and its whole text, each an index of its own, scores added with a weight per field;
and, where the function comes as a record (``format_document``), where it sits in its project:
its file's path, the class (or type) it belongs to, and the names of the functions that call it.

A query that names what a function does ("read the config file") matches the function's
name and the names it calls more tellingly than a word somewhere in its body; one BM25
over the whole text weighs them alike. Per-field BM25 with weighted sums is the simple form
of BM25F (Robertson et al., 2004: "Simple BM25 extension to multiple weighted fields") that
Pyserini's and Lucene's multi-field queries use. Fields are read from the code's text with
patterns that hold across C-like languages, Python and Ruby (no parser: a retriever sees
text), so a field can come out empty, and then adds nothing.

The place fields are what semble and ripvec enrich a project's BM25 with (the file's stem and
last directories) and a call graph read at fit time: a call is resolved by name within the
documents fitted together, to a function of the caller's own file when one has that name, else
to every function of that name (no import resolution: a retriever sees names, not modules).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np

from structret_lexical.bm25 import BM25Retriever, _top
from structret_lexical.term_counts import NoWords, TermCounts

FIELDS = ("name", "signature", "calls", "comments", "body", "path", "scope", "callers")
PATH_PARTS = 3  # the path field: the file's stem and the directories just above it
OPTIONS_FILE = "fields.json"
# what an update needs of each function to read the call graph again without reading the function:
# its name, scope, file, the names it calls and its callers (FieldBM25Retriever.update)
GRAPH_FILE = "graph.json"
GRAPH = ("name", "scope", "file", "calls", "callers")
_CALLERS = GRAPH.index("callers")

_CALL = re.compile(r"([A-Za-z_$][\w$]*)\s*\(")
# words before "(" that are not a function's name
_KEYWORDS = frozenset(
    "if for while switch catch return func function def fn sub elif elsif unless until with new typeof sizeof "
    "assert print await yield lambda super this self public private protected static final async".split())
_DEF = re.compile(r"\b(?:def|func|function|fn|sub)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$?!]*)")
# JavaScript's `name: function (...)`, `const name = (...) =>`, `obj.name = function`
_ASSIGNED = re.compile(r"^(?:(?:const|let|var)\s+)?([A-Za-z_$][\w$.]*)\s*[:=]\s*(?:async\s+)?(?:function\b|\()")
_COMMENTS = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|/\*[\s\S]*?\*/|//[^\n]*|#[^\n]*|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
    r"|`[^`]*`")


def _first_line(code: str) -> str:
    for line in code.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(("@", "#", "//", "/*", "*")):
            return stripped
    return ""


def code_reading(code: str, *, path: str = "", func_name: str = "") -> str:
    """A function as ``split_fields`` reads it with its place: its code, the file it is in and its
    qualified name (``Class.method``), as JSON; a function without a place reads as its code."""
    if not path and not func_name:
        return code
    return json.dumps({"code": code, "path": path, "func_name": func_name}, ensure_ascii=False)


def _place(text: str) -> tuple[str, str, str]:
    """(code, path, qualified name) of what ``code_reading`` wrote; any other text is code alone."""
    if text.startswith('{"code": '):
        try:
            found = json.loads(text)
        except ValueError:
            found = None
        if isinstance(found, dict) and isinstance(found.get("code"), str):
            return found["code"], str(found.get("path") or ""), str(found.get("func_name") or "")
    return text, "", ""


def path_words(path: str) -> str:
    """The path field: the file's stem and the PATH_PARTS - 1 directories above it (``a/b/c/d.py``: ``b c d``)."""
    parts = [p for p in re.split(r"[\\/]", path) if p]
    if not parts:
        return ""
    parts[-1] = parts[-1].rsplit(".", 1)[0] if "." in parts[-1].lstrip(".") else parts[-1]
    return " ".join(parts[-PATH_PARTS:])


def split_fields(text: str) -> dict[str, str]:
    """The fields of one function (each may be empty): its code, or what ``code_reading`` wrote. The
    ``callers`` field needs the other functions, and is filled by the retriever's fit (``add_callers``)."""
    code, path, func_name = _place(text)
    head = _first_line(code)
    found = _DEF.search(head) or _ASSIGNED.search(head)
    # the name as the patterns read it, never the miner's: a function read with its place scores as its
    # code alone does while the place fields weigh 0 (bm25-fields' default, tuned on the corpus' pools)
    name = found.group(1).rpartition(".")[2] if found else next(
        (m.group(1) for m in _CALL.finditer(head) if m.group(1) not in _KEYWORDS), "")
    rest = code[code.find(head) + len(head):] if head else code
    calls = [m.group(1) for m in _CALL.finditer(rest) if m.group(1) not in _KEYWORDS]
    comments = [m.group(0).strip("\"'`#/* \n") for m in _COMMENTS.finditer(rest)]
    return {"name": name, "signature": head, "calls": " ".join(calls), "comments": " ".join(comments),
            "body": code, "path": path_words(path), "scope": func_name.rpartition(".")[0].replace(".", " "),
            "callers": "", "file": path}


def add_callers(split: list[dict[str, str]]) -> None:
    """Fill each function's ``callers`` field with the names of the functions (of ``split``) that call it;
    a call goes to the function of that name in the caller's own file if there is one, else to every
    function of that name."""
    anywhere: dict[str, list[int]] = {}
    in_file: dict[tuple[str, str], list[int]] = {}
    for n, fields in enumerate(split):
        if fields["name"]:
            anywhere.setdefault(fields["name"], []).append(n)
            in_file.setdefault((fields["file"], fields["name"]), []).append(n)
    callers: list[list[str]] = [[] for _ in split]
    for n, fields in enumerate(split):
        caller = fields["name"] or fields["scope"]
        if not caller:
            continue
        for name in set(fields["calls"].split()):
            same_file = in_file.get((fields["file"], name)) if fields["file"] else None
            for callee in same_file or anywhere.get(name) or ():
                if callee != n:
                    callers[callee].append(caller)
    for fields, names in zip(split, callers):
        fields["callers"] = " ".join(names)


def parse_weights(text: str | dict, *, name: str = "bm25-fields",
                  known: Callable[[str], bool] = FIELDS.__contains__, fields: str = ", ".join(FIELDS)
                  ) -> dict[str, float]:
    """``"name:2,calls:1,body:1"`` (or a dict) as {field: weight}; fields left out weigh 0.
    ``known`` says which field names ``name`` (the retriever, for messages) has."""
    if isinstance(text, dict):
        pairs = list(text.items())
    else:
        pairs = []
        for item in filter(None, (part.strip() for part in str(text).split(","))):
            field, colon, weight = item.partition(":")
            if not colon:
                raise ValueError(f"{name}: {item!r} is not FIELD:WEIGHT (e.g. {fields.split(',')[0]}:2)")
            pairs.append((field.strip(), weight))
    weights = {}
    for field, weight in pairs:
        if not known(field):
            raise ValueError(f"{name}: unknown field {field!r}; the fields are {fields}")
        try:
            weights[field] = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: the weight of {field} must be a number, not {weight!r}") from None
        if weights[field] < 0:
            raise ValueError(f"{name}: the weight of {field} must be >= 0, not {weights[field]}")
    if not any(weights.values()):
        raise ValueError(f"{name}: every field weighs 0; give at least one a positive weight")
    return weights


class FieldBM25Retriever:
    """One BM25 (structret_lexical.bm25, identifiers split) per field; score = sum of weight x field score.

    A subclass for other documents says what their fields are (``_field_texts``) and how a
    field's weight is found (``_weight``); fitting, scoring and saving are the same."""

    name = "bm25-fields"
    kind = "field"  # for settings(): "BM25 per field"
    graph = True  # its fields are a function's, read by split_fields (what update relies on)

    def __init__(self, *, weights: str | dict = "name:1,signature:0.5,calls:0,comments:0.25,body:1", k1: float = 1.5,
                 b: float = 0.75, method: str = "lucene", stopwords: str | list[str] | None = "en",
                 lowercase: bool = True, split_identifiers: bool = True):
        self.weights = self._parse_weights(weights)
        # every field's BM25 reads text alike (structret_lexical.bm25's options)
        self._bm25_options: dict[str, Any] = {"k1": k1, "b": b, "method": method, "stopwords": stopwords,
                                              "lowercase": lowercase, "split_identifiers": split_identifiers}
        self._fields: dict[str, BM25Retriever | None] = {}
        self._n_docs = 0
        self._graph: list[list[str]] | None = None  # each document's GRAPH entries (update), read on first need
        self._saved_in: Path | None = None

    @staticmethod
    def _parse_weights(text: str | dict) -> dict[str, float]:
        return parse_weights(text)

    def _weight(self, field: str) -> float:
        return self.weights.get(field, 0.0)

    @staticmethod
    def split(text: str) -> dict[str, str]:
        """One function's fields (``split_fields``): what a call graph is read from (its name, its calls)."""
        return split_fields(text)

    def format_document(self, record: Any) -> str:
        """A code record read with its place (``code_reading``: its file's path and qualified name); any
        other record as its text. What ``fit`` reads for the path, scope and callers fields."""
        return code_reading(record.text(), path=getattr(record, "path", "") or "",
                            func_name=getattr(record, "func_name", "") or "")

    def _field_texts(self, docs: list[str]) -> dict[str, list[str]]:
        """Each field's text of every document, by field name."""
        return {field: [parts[field] for parts in self._split(docs)] for field in FIELDS}

    def _split(self, docs: list[str]) -> list[dict[str, str]]:
        split = [split_fields(doc) for doc in docs]
        if self._weight("callers"):
            add_callers(split)
        return split

    def terms(self, texts: Sequence[str], kind: str = "document") -> list[list[str]]:
        """The tokens of a document's weighted fields, one list (contracts.OPTIONAL: what an index holding
        one BM25 of its own is given: one field, so the weights are lost, and a term in two fields counts
        twice); a query's tokens as every field's BM25 reads them."""
        probe = BM25Retriever(**self._bm25_options)
        if kind == "query":
            return probe.terms(texts)
        fields = [(field, values) for field, values in self._field_texts(list(texts)).items() if self._weight(field)]
        return [[token for _, values in fields for token in probe.tokenize(values[n])] for n in range(len(texts))]

    def fields(self, texts: Sequence[str]) -> dict[str, tuple[float, list[list[str]]]]:
        """Each weighted field's weight and its tokens per document (contracts.OPTIONAL: what an index holding
        a BM25 of its own holds, one BM25 per field, so that its weighted sum scores as this retriever does)."""
        probe = BM25Retriever(**self._bm25_options)
        return {field: (self._weight(field), [probe.tokenize(text) for text in values])
                for field, values in self._field_texts(list(texts)).items() if self._weight(field)}

    def settings(self) -> str:
        probe = BM25Retriever(**self._bm25_options)
        weights = ", ".join(f"{f} {w:g}" for f, w in self.weights.items() if w)
        return f"BM25 per {self.kind}, weights {weights}; each: {probe.settings()}"

    def fit(self, docs: Sequence[str]) -> None:
        if isinstance(docs, str):
            raise TypeError(f"{self.name}: fit() takes a sequence of documents, not a single string")
        docs = list(docs)
        if not docs:
            raise ValueError(f"{self.name}: cannot index an empty corpus; fit() needs at least one document")
        self._fields = {}
        retriever: BM25Retriever | None
        words: dict[str, tuple[str, ...]] = {}
        split = self._split(docs) if self.graph else None
        self._graph = [[parts[key] for key in GRAPH] for parts in split] if split is not None else None
        field_texts = ({field: [parts[field] for parts in split] for field in FIELDS} if split is not None
                       else self._field_texts(docs))
        for field, texts in field_texts.items():
            if not self._weight(field):
                continue
            retriever = BM25Retriever(**self._bm25_options)
            # the fields read their words alike (the same options), and most recur across fields (a name
            # in the signature, the body and its callers'): each is split into tokens once
            retriever._word_tokens = words
            try:
                retriever.fit(texts)
            except ValueError:  # no document has a word in this field: it adds nothing
                retriever = None
            self._fields[field] = retriever
        self._n_docs = len(docs)

    def update(self, rows: Sequence[int | str]) -> bool:
        """``fit`` of a new corpus, reading only its new documents: one entry per document, the position of
        one this index holds, or a new one's text. A function whose callers changed (the call graph is read
        again from every function's name and calls) has its callers field read again. The scores are what
        fit gives. False, and nothing changed, where this index cannot (saved by an older structret): fit
        it then."""
        graph = self._graph_entries()
        if graph is None:
            return False
        if any(isinstance(r, (int, np.integer)) and not 0 <= r < self._n_docs for r in rows):
            raise ValueError(f"{self.name}: update rows must be positions in 0..{self._n_docs - 1} or texts")
        entries = [dict(zip(GRAPH, graph[r])) if isinstance(r, (int, np.integer)) else split_fields(r) for r in rows]
        if self._weight("callers"):
            add_callers(entries)
        made: dict[str, TermCounts | None] = {}
        for field, retriever in self._fields.items():
            if retriever is None:  # no document had a word in it: each kept one has none still
                retriever = BM25Retriever(**self._bm25_options)
                retriever._counts, retriever._n_docs = TermCounts.empty(self._n_docs), self._n_docs
            # a kept function is read again only where what it is read as changed: its callers
            picks: list[int | str] = [r if isinstance(r, (int, np.integer)) and (
                field != "callers" or entries[n]["callers"] == graph[r][_CALLERS]) else entries[n][field]
                for n, r in enumerate(rows)]
            try:
                counts = retriever.updated_counts(picks)
            except NoWords:  # still no word in this field: it adds nothing, as fit leaves it out
                made[field] = None
                continue
            if counts is None:  # saved by an older structret: fit
                return False
            made[field] = counts
        for field, counts in made.items():  # every field's counts made: now change them all
            if counts is None:
                self._fields[field] = None
                continue
            retriever = self._fields[field] or BM25Retriever(**self._bm25_options)
            retriever._build(counts)
            self._fields[field] = retriever
        self._graph = [[entry[key] for key in GRAPH] for entry in entries]
        self._n_docs = len(rows)
        return True

    def _graph_entries(self) -> list[list[str]] | None:
        if self._graph is None and self._saved_in is not None and self.graph:
            try:
                self._graph = json.loads((self._saved_in / GRAPH_FILE).read_text(encoding="utf-8"))
            except FileNotFoundError:  # saved by an older structret
                return None
            if len(self._graph or ()) != self._n_docs:
                raise ValueError(f"{self.name}: {self._saved_in / GRAPH_FILE} holds {len(self._graph or ())} "
                                 f"functions for {self._n_docs}; rebuild the index")
        return self._graph

    def __len__(self) -> int:
        return self._n_docs

    def field_scores(self, queries: Sequence[str], doc_indices: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Each weighted field's unweighted scores [len(queries), n] (zeros for a field with no words)."""
        if not self._n_docs:
            raise RuntimeError(f"{self.name}: call fit(docs) before scoring or searching")
        width = self._n_docs if doc_indices is None else len(doc_indices)
        return {field: (retriever.score(queries, doc_indices) if retriever is not None
                        else np.zeros((len(queries), width), dtype=np.float32))
                for field, retriever in self._fields.items()}

    def score(self, queries: Sequence[str], doc_indices: np.ndarray | None = None) -> np.ndarray:
        if isinstance(queries, str):
            raise TypeError(f"{self.name}: score() takes a sequence of queries, not a single string")
        scores = self.field_scores(queries, doc_indices)
        # an array, never sum()'s 0: a field weighs > 0 (parse_weights), so fit kept one
        return cast(np.ndarray, sum(self._weight(field) * rows for field, rows in scores.items())).astype(np.float32)

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k per query: scores [nq, k'] best first and document indices, k' = min(k, n)."""
        if k < 1:
            raise ValueError(f"{self.name}: k must be at least 1, not {k}")
        rows = self.score(queries)
        k = min(k, self._n_docs)
        top = np.stack([_top(row, k) for row in rows]) if len(rows) else np.empty((0, k), dtype=np.int64)
        return np.take_along_axis(rows, top, axis=1), top

    def save(self, directory: str | os.PathLike) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for field, retriever in self._fields.items():
            if retriever is not None:
                retriever.save(directory / field)
        saved = {"weights": self.weights, "options": self._bm25_options, "documents": self._n_docs,
                 "fields": list(self._fields), "empty": [f for f, r in self._fields.items() if r is None]}
        (directory / OPTIONS_FILE).write_text(json.dumps(saved), encoding="utf-8")
        graph = self._graph_entries()
        if graph is not None:
            (directory / GRAPH_FILE).write_text(json.dumps(graph, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "FieldBM25Retriever":
        directory = Path(directory)
        try:
            saved = json.loads((directory / OPTIONS_FILE).read_text(encoding="utf-8"))
            retriever = cls(weights=saved["weights"], **saved["options"])
            retriever._fields = {field: None if field in saved["empty"] else BM25Retriever.load(directory / field)
                                 for field in saved["fields"]}
            retriever._n_docs = int(saved["documents"])
            retriever._saved_in = directory  # the call graph is read only by an update
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{cls.name}: {directory} does not hold a saved index ({type(exc).__name__}: {exc}); "
                             f"rebuild it") from None
        return retriever


class ProjectFieldBM25Retriever(FieldBM25Retriever):
    """bm25-fields for searching one whole project (``structret index SRC``'s lexical side): the same
    fields, and by default also the function's place in the project, its file's path, its class and
    the names of its callers, weighted as they scored best on the whole-project benchmark's validation
    projects (benchmarks/project_search.py). bm25-fields keeps the place fields at 0: in a pool of
    many projects' functions (CodeSearchNet's) a path or a caller says little."""

    name = "bm25-project"

    def __init__(self, *, weights: str | dict = "name:1,signature:0.5,calls:0,comments:0.25,body:1,path:0.5,scope:1,"
                 "callers:1", k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stopwords: str | list[str] | None = "en", lowercase: bool = True, split_identifiers: bool = True):
        super().__init__(weights=weights, k1=k1, b=b, method=method, stopwords=stopwords, lowercase=lowercase,
                         split_identifiers=split_identifiers)


ITEM_FIELDS = ("title", "content", "aspects")


class ItemFieldBM25Retriever(FieldBM25Retriever):
    """BM25 per field of a catalog item: its title, its content and each of its aspects (brand,
    color, Debian's section and debtags facets, ...), weighted; the products' bm25-fields.

    It reads records itself (``format_document``), so in a hybrid the aspects reach BM25 even
    when the dense side reads the content alone. Weights: ``title``, ``content``, ``aspects``
    (every aspect not named) and ``aspect.NAME`` for one aspect.
    """

    name = "bm25-item-fields"
    kind = "item field"
    graph = False  # an update refits: a new aspect is a new field

    def __init__(self, *, weights: str | dict = "title:0.25,content:3,aspects:0,aspect.section:0.5",
                 k1: float = 1.5, b: float = 0.75, method: str = "lucene", stopwords: str | list[str] | None = "en",
                 lowercase: bool = True, split_identifiers: bool = True):
        super().__init__(weights=weights, k1=k1, b=b, method=method, stopwords=stopwords, lowercase=lowercase,
                         split_identifiers=split_identifiers)

    @staticmethod
    def _parse_weights(text: str | dict) -> dict[str, float]:
        return parse_item_weights(text)

    def format_document(self, record) -> str:
        """The record's fields as JSON: what ``fit`` reads (a record that is not an item: its text as content)."""
        if not hasattr(record, "content"):  # not an item: all of it is content
            return json.dumps({"content": record.text()}, ensure_ascii=False)
        aspects = {name: " ".join(map(str, values)) if isinstance(values, (list, tuple)) else str(values)
                   for name, values in (getattr(record, "aspects", None) or {}).items()}
        return json.dumps({"title": record.title or "", "content": record.content or "", "aspects": aspects},
                          ensure_ascii=False)

    def _weight(self, field: str) -> float:
        if field in self.weights:
            return self.weights[field]
        return self.weights.get("aspects", 0.0) if field.startswith("aspect.") else 0.0

    def _field_texts(self, docs: list[str]) -> dict[str, list[str]]:
        parsed = [_item_fields(doc) for doc in docs]
        aspects = sorted({a for item in parsed for a in item["aspects"]})
        return {"title": [item["title"] for item in parsed], "content": [item["content"] for item in parsed],
                **{f"aspect.{a}": [item["aspects"].get(a, "") for item in parsed] for a in aspects}}


def _item_fields(doc: str) -> dict:
    """What ``format_document`` wrote; any other text is taken as the content."""
    try:
        item = json.loads(doc)
    except ValueError:
        item = None
    if not isinstance(item, dict):
        return {"title": "", "content": doc, "aspects": {}}
    return {"title": str(item.get("title") or ""), "content": str(item.get("content") or ""),
            "aspects": {str(k): str(v) for k, v in (item.get("aspects") or {}).items()}}


def parse_item_weights(text: str | dict) -> dict[str, float]:
    """``"title:2,content:1,aspects:0.5,aspect.section:1"`` as {field: weight}."""
    return parse_weights(text, name="bm25-item-fields", fields="title, content, aspects or aspect.NAME",
                         known=lambda f: f in ITEM_FIELDS or (f.startswith("aspect.") and len(f) > 7))
