"""The HTTP edge of `cronsource serve`: the app (`create_app`), its settings and the server.

The package's public names are these; everything else is the edge's own business
(routers, dependencies, the problem table, response models).
"""

from adapters.http.app import create_app
from adapters.http.server import serve
from adapters.http.settings import ServeError, ServeSettings, is_loopback, load_token

__all__ = ["ServeError", "ServeSettings", "create_app", "is_loopback", "load_token", "serve"]
