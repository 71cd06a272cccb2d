"""Running the app with uvicorn on a local address, saying where, and warning when it is public."""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from typing import Any, Callable

from structret.errors import StructretError
from structret.models import Model
from structret.search.index import SearchIndex
from structret.serving.app import create_app, require_web_stack

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def bind_lines(host: str, port: int) -> list[str]:
    """What to tell the user about the address, before serving on it."""
    shown = f"[{host}]" if ":" in host else host
    lines = [f"serving on http://{shown}:{port}/ (the search page; JSON at /api/search?q=...&k=10 and /api/health)"]
    if is_loopback(host):
        lines.append(f"only this machine can connect ({host}); --host 0.0.0.0 serves the network, --port N "
                     f"another port. Ctrl-C stops it.")
    else:
        lines.append(f"warning: bound to {host}, so anyone who can reach this machine on port {port} can search "
                     f"the index and read its texts; there is no authentication. Use --host 127.0.0.1 to keep it "
                     f"local.")
    return lines


def serve(index: SearchIndex | str | os.PathLike, model: Model | str | None = None, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          echo: Callable[[str], None] | None = None, **app_options: Any) -> None:
    """Load ``index`` and its model (see :func:`structret.serving.create_app`), then answer
    requests on ``host:port`` until interrupted."""
    require_web_stack()
    import uvicorn

    echo = echo or (lambda line: print(line, file=sys.stderr))
    logger = logging.getLogger("structret.serve")
    if not logger.handlers:  # uvicorn configures only its own loggers; ours say what went wrong
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    app = create_app(index, model, **app_options)  # loads everything before the port is opened
    searcher = app.state.searcher
    marks = searcher.marker
    echo(f"loaded {searcher.size} documents ({searcher.index.kind or 'index'}) and model {searcher.model.name}")
    echo(f"entities: {marks.name}, because {marks.reason}" if marks else
         f"entities: none, because {searcher.no_marker_reason}")
    for line in bind_lines(host, port):
        echo(line)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info"))
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits when it cannot bind, having logged why
        if not server.started:
            raise StructretError(f"could not listen on {host}:{port} (the line above says why); if another "
                                 f"program uses the port, pass --port with a free one.") from None
        raise exc
