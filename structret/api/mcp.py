"""``structret mcp INDEX``: a project's index as tools a coding agent calls (Model Context Protocol).

Three tools, over stdio (the MCP SDK's ``MCPServer``):

- ``search(query, k=10, path=None)``: the project's units best first, each as a person reads it
  (``path:start-end``, score, the lines holding a query word; structret.snippets) with its enclosing
  class or module (``scope``), optionally only those under a folder or matching a glob (``src/io``, ``*.go``);
- ``related(path, line)``: the unit holding that line, the units that call it and that it calls (by name,
  within the project), and its nearest neighbours by meaning;
- ``refresh()``: index the folder the index records again (``structret index SOURCE``: only changed
  functions are encoded) and search the new index from then on.

The index and its model are loaded once, when the server starts.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from pathlib import Path
from typing import Any, cast

from structret.project.index import refresh_source
from structret.errors import StructretError
from structret.search.index import Hit, SearchIndex, load_index
from structret.snippets import locate, readable

INSTRUCTIONS = ("Search this project's code by what it does, in words ('parse the config file', 'retry a failed "
                "request') or by a symbol's name: 'search' returns units best first as path:start-end with the lines "
                "that match; 'related' gives a unit's callers, callees and neighbours; 'refresh' re-indexes the "
                "project after files changed.")
MAX_K = 50


class ProjectTools:
    """What the tools do, apart from the protocol (tests call it directly too)."""

    def __init__(self, index_dir: str | os.PathLike, *, verify: bool = True):
        self.index_dir = Path(index_dir)
        self.verify = verify
        self._lock = threading.Lock()  # a refresh swaps the index; a search in between sees one or the other
        self._fields: tuple[SearchIndex, dict[str, dict[str, str]]] | None = None  # related()'s calls, per index
        self.index = self._load()

    def _load(self) -> SearchIndex:
        index = load_index(self.index_dir, verify=self.verify)
        if not index.meta.get("backbone"):
            raise StructretError(f"{self.index_dir} records no model, so queries cannot be encoded; build it with "
                                 f"'structret index SOURCE --out {self.index_dir}'.")
        index.model  # loaded now, not on the first call
        return index

    @property
    def root(self) -> str | None:
        return (self.index.meta.get("source") or {}).get("path")

    def search(self, query: str, k: int = 10, path: str | None = None, lines: int = 8) -> list[dict[str, Any]]:
        if not query.strip():
            raise StructretError("query is empty: say what the code does, e.g. 'read a config file'.")
        if not 1 <= k <= MAX_K:
            raise StructretError(f"k={k}: ask for 1 to {MAX_K} hits.")
        with self._lock:
            index = self.index
        size = len(index)
        # a path filter drops hits after ranking: rank deeper so k of them can remain
        depth = min(size, k if not path else max(10 * k, 200))
        hits = cast("list[Hit]", index.search(index.model, query, depth))  # one query: a list of its hits
        rows = [readable(hit, query, rank=rank, root=self.root, lines=lines) for rank, hit in enumerate(hits, 1)]
        if path:
            rows = [row for row in rows if _under(row["path"] or row["id"], path)]
        units = index.units()
        for rank, row in enumerate(rows[:k], 1):
            row["rank"] = rank
            row["scope"] = units.name_of(row["id"]).rpartition(".")[0]  # the enclosing class or module
            row.pop("text")  # the snippet is what an agent reads first; the file is on its disk
        return rows[:k]

    def related(self, path: str, line: int, k: int = 5) -> dict[str, Any]:
        """The unit of ``path`` holding ``line``, its callers and callees (names resolved within the project, as
        the lexical side reads calls) and its ``k`` nearest neighbours."""
        with self._lock:
            index = self.index
        units = index.units()
        wanted = path.strip().lstrip("./")
        here = [i for i in units.ids if units.path_of(i) == wanted or units.path_of(i).endswith("/" + wanted)]
        if not here:
            raise StructretError(f"{path} is not a file of this index; give a path relative to the project, as "
                                 f"search shows it.")
        spans = {i: span for i in here if (span := _lines(i)) is not None}
        unit = next((i for i, (a, b) in spans.items() if a <= line <= b), None)
        if unit is None:
            raise StructretError(f"no unit of {path} holds line {line} (a blank line between units, or past the "
                                 f"file's end); its units span lines " + ", ".join(
                                     f"{a}-{b}" for a, b in sorted(spans.values())[:8]) + ".")
        split = getattr(index.lexical.retriever, "split", None) if index.lexical is not None else None
        if split is None:
            raise StructretError("this index's lexical side does not read calls; build it with 'structret index "
                                 "SOURCE' (bm25-project).")
        if self._fields is None or self._fields[0] is not index:  # every unit read once per loaded index
            self._fields = (index, {i: split(units.text_of(i)) for i in units.ids})
        fields = self._fields[1]
        name = fields[unit]["name"]
        calls = set(fields[unit]["calls"].split())
        callers = [i for i in units.ids if i != unit and name and name in fields[i]["calls"].split()]
        callees = [i for i in units.ids if i != unit and fields[i]["name"] in calls]
        neighbours = [h.id for h in cast("list[Hit]", index.search(index.model, units.text_of(unit), k + 1))
                      if h.id != unit][:k]

        def show(ids: list[str]) -> list[dict[str, Any]]:
            return [{"location": self._location(i, units), "name": units.name_of(i) or fields[i]["name"]}
                    for i in ids[:MAX_K]]

        return {"unit": {**show([unit])[0], "scope": units.name_of(unit).rpartition(".")[0]},
                "callers": show(callers), "callees": show(callees), "neighbours": show(neighbours)}

    def _location(self, doc_id: str, units: Any) -> str:
        span = _lines(doc_id)
        return units.path_of(doc_id) + (f":{span[0]}-{span[1]}" if span else "")

    def refresh(self) -> dict[str, Any]:
        if not self.root:
            raise StructretError(f"{self.index_dir} was not built from a source folder (structret index SOURCE), "
                                 f"so there is nothing to refresh from.")
        done = refresh_source(self.index_dir, show_progress=False, loaded=self.index.model)
        with self._lock:
            self.index = self._load()
        return {"summary": done.summary(), "units": done.units, "new_or_edited": done.new,
                "gone_or_edited": done.gone, "unchanged": done.unchanged, "encoded": done.encoded,
                "reused": done.reused, "files_cut": done.files_cut, "files_gone": done.files_gone,
                "failed": done.failed}


def _lines(doc_id: str) -> tuple[int, int] | None:
    """A unit's first and last line, from its id (structret.snippets.locate)."""
    where = locate(doc_id)
    return (where.start, where.end) if where is not None and where.start is not None and where.end is not None \
        else None


def _under(path: str, wanted: str) -> bool:
    """Whether a hit's path is ``wanted``, lies under it (a folder), or matches it (a glob)."""
    if any(c in wanted for c in "*?["):
        return fnmatch.fnmatch(path, wanted) or fnmatch.fnmatch(Path(path).name, wanted)
    wanted = wanted.strip("/")
    return path == wanted or path.startswith(wanted + "/")


def create_mcp_server(index_dir: str | os.PathLike, *, verify: bool = True) -> Any:
    """The MCP server (``mcp.server.mcpserver.MCPServer``) over the index in ``index_dir``."""
    try:
        # mcp: the mcp extra, loaded to serve agents only
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise StructretError("structret mcp needs the MCP SDK: pip install 'structret[mcp]'.") from exc

    tools = ProjectTools(index_dir, verify=verify)
    server = MCPServer("structret", instructions=INSTRUCTIONS, log_level="WARNING")  # stderr: warnings only

    @server.tool()
    def search(query: str, k: int = 10, path: str | None = None) -> list[dict[str, Any]]:
        """Find the project's functions that do what the query says, best first. Each hit: location
        (path:start-end, relative to the project), score, which sides found it (dense, lexical), and
        snippet, the function's lines holding a word of the query first (line numbers of the file).
        path: only hits in this file or folder (src/io), or matching this glob (*.go)."""
        try:
            return tools.search(query, k, path)
        except StructretError as exc:  # a sentence for the agent, not "Error executing tool"
            raise ToolError(str(exc)) from exc

    @server.tool()
    def related(path: str, line: int, k: int = 5) -> dict[str, Any]:
        """What is related to the code at path:line: the unit holding that line (its location, name and
        enclosing class or module), the units that call it, the units it calls, and its k nearest
        neighbours by meaning. path as search shows it (relative to the project)."""
        try:
            return tools.related(path, line, k)
        except StructretError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    def refresh() -> dict[str, Any]:
        """Index the project folder again after files changed: only new or edited functions are encoded.
        Returns how many functions are new or edited, gone, and unchanged."""
        try:
            return tools.refresh()
        except StructretError as exc:
            raise ToolError(str(exc)) from exc

    return server


def run_mcp(index_dir: str | os.PathLike, *, verify: bool = True) -> None:
    """Serve the index's tools over stdio until the client closes the connection."""
    create_mcp_server(index_dir, verify=verify).run("stdio")
