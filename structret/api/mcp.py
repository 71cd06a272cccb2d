"""``structret mcp INDEX``: a project's index as tools a coding agent calls (Model Context Protocol).

Two tools, over stdio (the MCP SDK's ``MCPServer``):

- ``search(query, k=10, path=None)``: the project's functions best first, each as a person reads it
  (``path:start-end``, score, the lines holding a query word; structret.snippets), optionally only
  those under a folder or matching a glob (``src/io``, ``*.go``);
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
from structret.snippets import readable

INSTRUCTIONS = ("Search this project's code by what it does, in words ('parse the config file', 'retry a failed "
                "request'): 'search' returns functions best first as path:start-end with the lines that match; "
                "'refresh' re-indexes the project after files changed.")
MAX_K = 50


class ProjectTools:
    """What the tools do, apart from the protocol (tests call it directly too)."""

    def __init__(self, index_dir: str | os.PathLike, *, verify: bool = True):
        self.index_dir = Path(index_dir)
        self.verify = verify
        self._lock = threading.Lock()  # a refresh swaps the index; a search in between sees one or the other
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
        for rank, row in enumerate(rows[:k], 1):
            row["rank"] = rank
            row.pop("text")  # the snippet is what an agent reads first; the file is on its disk
        return rows[:k]

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
