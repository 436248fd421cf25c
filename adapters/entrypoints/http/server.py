"""`cronsource serve`: open the store, build the app, run uvicorn until SIGTERM/Ctrl-C."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from datetime import timedelta

import uvicorn

from cronsource.adapters.entrypoints.http.app import create_app
from cronsource.adapters.entrypoints.http.settings import ServeError, ServeSettings, load_token

log = logging.getLogger("cronsource.http")


def serve(
    store: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token_file: str | None = None,
    verbose: bool = False,
    retain: timedelta | None = None,
) -> None:
    """Run the API server until SIGTERM/Ctrl-C. Raises ServeError for a bad configuration.
    With `retain`, it also applies the retention (adapters/runtime/retention.py) when no
    projector holds the store."""
    from cronsource.adapters.bootstrap import bootstrap
    from cronsource.adapters.infrastructure.logs import configure_logging
    from cronsource.adapters.infrastructure.store.config import StoreConfig, StoreURLError

    settings = ServeSettings(host=host, port=port, token=load_token(token_file))
    settings.check()
    try:
        config = StoreConfig.parse(store)
    except StoreURLError as e:
        raise ServeError(str(e)) from None
    try:
        engine = bootstrap(config)
        engine.view.next_due()
    except Exception as e:
        hint = " (run `cronsource migrate` first)" if config.kind == "postgresql" else ""
        raise ServeError(f"cannot open store {config.shown}: {e}{hint}") from None
    try:
        listening = _listen(host, port)
    except ServeError:
        engine.close()
        raise
    configure_logging(logging.DEBUG if verbose else logging.INFO)
    remover = None
    try:
        if retain is not None:
            from cronsource.adapters.runtime.retention import RetentionThread

            remover = RetentionThread(engine, retain)
            remover.start()
        app = create_app(engine, settings)
        log.info(
            "serving on http://%s:%d (store %s, auth %s)",
            host,
            port,
            config.shown,
            "bearer token" if settings.token else "off (loopback only)",
        )
        _Server(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=verbose)).run(
            sockets=[listening]
        )
    finally:
        listening.close()
        if remover is not None:
            remover.stop()
        engine.close()


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says `serving on`: bound by uvicorn, a
    port in use or a host that is no address came as log lines after that one, in uvicorn's
    words (`[Errno -2] Name or service not known`, naming no flag)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as e:
        reason = e.strerror if isinstance(e, socket.gaierror) else str(e)
        raise ServeError(f"--host: {host!r} is no address to listen on ({reason})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn sets it
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise ServeError(f"--host/--port: cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


class _Server(uvicorn.Server):
    """uvicorn, except that SIGTERM/SIGINT end in a clean exit 0 (as `cronsource run` does)
    after the graceful shutdown and our `finally` (closing the store), instead of uvicorn
    re-raising the signal once it has stopped."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {s: signal.signal(s, self.handle_exit) for s in signals}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
