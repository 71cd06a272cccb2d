"""The web app of ``structret serve``: a Starlette ASGI app over one loaded :class:`Searcher`.

Routes: ``GET /`` (the search page), ``GET /api/search?q=...&k=...`` (JSON hits; also
``POST /api/search`` with ``{"q": ..., "k": ...}``, for queries longer than a URL holds) and
``GET /api/health``. A request the app cannot answer gets a 4xx that says what was wrong
(JSON for /api, the page with the message in ``#error`` for /); anything unexpected is
logged with its traceback and answered with a 500 that names no internals.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

from structret.errors import StructretError
from structret.models import Model
from structret.search.index import SearchIndex
from structret.serving.page import render
from structret.serving.searcher import open_searcher

log = logging.getLogger("structret.serve")

DEFAULT_K = 10
MAX_K = 1000
# models read a few hundred tokens of a query; this is far above that, and keeps a pasted
# file (or a hostile URL) from costing a tokenizer pass over megabytes
MAX_QUERY_CHARS = 10_000


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Limits:
    max_k: int = MAX_K
    max_query_chars: int = MAX_QUERY_CHARS


def parse_request(query: Any, raw_k: Any, limits: Limits) -> tuple[str, int]:
    """(query, k) from what a request gave (strings from a URL, or JSON values), or
    BadRequest naming what to change."""
    if query is not None and not isinstance(query, str):
        raise BadRequest(400, f"q must be a string, not {type(query).__name__}.")
    if query is None or not query.strip():
        raise BadRequest(400, "the query is empty: give one as q=..., e.g. /?q=read+a+config+file")
    if len(query) > limits.max_query_chars:
        raise BadRequest(413, _too_long(f"{len(query):,} characters", limits))
    if raw_k is None or (isinstance(raw_k, str) and raw_k.strip() == ""):
        return query, DEFAULT_K
    if isinstance(raw_k, int) and not isinstance(raw_k, bool):
        k = raw_k
    else:
        try:
            if not isinstance(raw_k, str):
                raise ValueError
            k = int(raw_k.strip())
        except ValueError:
            raise BadRequest(400, f"k={str(raw_k)[:40]!r} is not a whole number; give how many hits to show, "
                                  f"1 to {limits.max_k}.") from None
    if not 1 <= k <= limits.max_k:
        raise BadRequest(400, f"k={k} is out of range; give how many hits to show, 1 to {limits.max_k}.")
    return query, k


def _too_long(size: str, limits: Limits) -> str:
    return (f"the query is {size} long; the limit is {limits.max_query_chars:,} characters. Search with a "
            f"shorter query (models read only its first few hundred tokens).")


async def read_json_body(request: Any, limits: Limits) -> dict[str, Any]:
    """The JSON object of a POST, read no further than the limit allows (413 beyond it)."""
    # UTF-8 takes at most 4 bytes a character, escapes 6 (\uXXXX); a little room for k and the braces
    most = limits.max_query_chars * 6 + 1024
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > most:
        raise BadRequest(413, _too_long(f"{int(declared):,} bytes", limits))
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > most:
            raise BadRequest(413, _too_long(f"over {most:,} bytes", limits))
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadRequest(400, 'the body is not JSON; send {"q": "a query", "k": 10} with '
                              "Content-Type: application/json, or use GET /api/search?q=...&k=...") from None
    if not isinstance(value, dict):
        raise BadRequest(400, 'the body must be a JSON object: {"q": "a query", "k": 10}')
    return value


def require_web_stack() -> None:
    """StructretError naming the install command when a package the app runs on is missing
    (an environment installed before serve existed, or with --no-deps)."""
    missing = [name for name in ("starlette", "uvicorn", "pygments") if _missing(importlib.util, name)]
    if missing:
        raise StructretError(f"structret serve needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                             f"not installed: pip install 'starlette>=0.40' 'uvicorn>=0.30' 'pygments>=2.17' "
                             f"(or reinstall structret, which depends on them).")


def _missing(util: Any, name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is None  # None: imports of it fail (as a test sets it)
    return util.find_spec(name) is None


def create_app(index: SearchIndex | str | os.PathLike, model: Model | str | None = None, *, extractor: str | None = None,
               extractor_options: dict[str, Any] | None = None, language: str | None = None,
               verify: bool = True, max_k: int = MAX_K, max_query_chars: int = MAX_QUERY_CHARS,
               model_options: dict[str, Any] | None = None):
    """The ASGI app serving ``index`` (a directory of ``structret index`` or a SearchIndex),
    its model loaded now, once (``model``: a Model or a name/run/path; None: the index's
    own; ``model_options`` go to its backbone, e.g. ``{"runtime": "onnx-int8"}``). ``extractor``: the entities to mark (None: chosen as structret.serving.entities
    says; ``"none"``: no marks). Mount it in another Starlette/FastAPI app, or run it with
    any ASGI server (``uvicorn.run(app)``).

    Raises StructretError (with what to do) when the index, the model or the extractor
    cannot be used, before any request is served.
    """
    require_web_stack()  # before minutes of loading, not after
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    searcher = open_searcher(index, model, extractor=extractor, extractor_options=extractor_options,
                             language=language, verify=verify, model_options=model_options)
    limits = Limits(max_k, max_query_chars)
    info = searcher.health()
    highlight = searcher.highlight_language

    async def search_page(request):
        query = request.query_params.get("q", "")
        k = request.query_params.get("k", str(DEFAULT_K))
        if "q" not in request.query_params:
            return HTMLResponse(render(info=info, k=k))
        try:
            query, k_value = parse_request(request.query_params.get("q"), k, limits)
            answer = await run_in_threadpool(searcher.search, query, k_value)
            return HTMLResponse(render(info=info, query=query, k=k, answer=answer, language=highlight))
        except BadRequest as exc:
            shown = query if len(query) <= limits.max_query_chars else query[:200] + "..."
            return HTMLResponse(render(info=info, query=shown, k=k, error=exc.message), status_code=exc.status)
        except Exception as exc:
            message = _internal(exc, request)
            return HTMLResponse(render(info=info, query=query[:200], k=k, error=message), status_code=500)

    async def api_search(request):
        try:
            if request.method == "POST":  # for long queries (code as the query), beyond what a URL holds
                given = await read_json_body(request, limits)
                query, k = parse_request(given.get("q"), given.get("k"), limits)
            else:
                query, k = parse_request(request.query_params.get("q"), request.query_params.get("k"), limits)
            answer = await run_in_threadpool(searcher.search, query, k)
            return JSONResponse(answer.as_json())
        except BadRequest as exc:
            return JSONResponse({"error": exc.message, "status": exc.status}, status_code=exc.status)
        except Exception as exc:
            return JSONResponse({"error": _internal(exc, request), "status": 500}, status_code=500)

    async def api_health(request):
        return JSONResponse(info)

    app = Starlette(routes=[Route("/", search_page), Route("/api/search", api_search, methods=["GET", "POST"]),
                            Route("/api/health", api_health)])
    app.state.searcher = searcher  # for Python users: the loaded index and model
    return app


def _internal(exc: Exception, request: Any) -> str:
    """Log ``exc`` with its traceback; the sentence the client gets instead."""
    log.exception("error answering %s %s", request.method, request.url.path)
    if isinstance(exc, StructretError):  # structret's own errors are written for the user
        return f"the search failed: {exc}"
    return (f"the search failed with an internal error ({type(exc).__name__}); the server's log has the "
            f"details. Try again, or report it with that log.")
