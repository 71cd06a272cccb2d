"""``structret serve``: a local web app searching one index with its model, loaded once.

    from structret.serving import create_app
    app = create_app("runs/idx")          # an ASGI app: uvicorn.run(app), or mount it

Starlette, uvicorn and Pygments are imported only when an app is made or served.
"""

from structret.serving.app import create_app
from structret.serving.server import serve

__all__ = ["create_app", "serve"]
