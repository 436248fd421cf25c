"""The HTTP edge of `cronsource serve`: the app (`create_app`), its settings and the server.

The package's public names are these; everything else is the edge's own business
(routers, dependencies, the problem table, response models).
"""

from cronsource.adapters.entrypoints.http.app import create_app
from cronsource.adapters.entrypoints.http.server import serve
from cronsource.adapters.entrypoints.http.settings import (
    ServeError,
    ServeSettings,
    is_loopback,
    load_token,
)

__all__ = ["ServeError", "ServeSettings", "create_app", "is_loopback", "load_token", "serve"]
