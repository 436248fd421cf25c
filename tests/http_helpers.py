"""Helpers for the HTTP tests: a fixed clock, a real uvicorn server on 127.0.0.1 in a thread,
and manifests. The server gets a socket bound before it starts, so there is no window in
which another process could take the port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine


def pg_engine(url: str) -> Engine:
    """An engine on a fresh PostgreSQL database, migrated as `cronsource migrate` would."""
    config = StoreConfig.parse(url)
    migrate(config)
    return bootstrap(config)


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Serve `app` over real HTTP on 127.0.0.1 until the block ends; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", log_config=None)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def manifest(
    name: str,
    schedule: str = "0 * * * *",
    *,
    namespace: str | None = "default",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": meta,
        "spec": {
            "schedules": [schedule],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }
