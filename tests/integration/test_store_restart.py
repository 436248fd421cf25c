"""The API right after PostgreSQL restarted under it: every idle pooled connection is dead
then (adapters/infrastructure/pgpool.py). The first requests after the restart answered 503
(one per dead connection, the event store's read after three seconds of backoff), and a
command failed on the projector lock's dead session. Now each is answered on a fresh
connection, and a write lands exactly once."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.entrypoints.http.app import create_app
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.domain.service import event_type
from tests import pgserver
from tests.http_helpers import manifest

CW = "/api/v1/namespaces/default/cronworkflows"


@pytest.mark.postgres
@pytest.mark.timeout(120)
def test_the_first_requests_after_a_restart_are_answered() -> None:
    handle = pgserver.start_server()  # a server of its own: this test restarts it
    try:
        config = StoreConfig.parse(handle.url)
        migrate(config)
        engine = bootstrap(config)
        try:
            client = TestClient(create_app(engine), base_url="http://127.0.0.1")
            assert client.post(CW, json=manifest("a")).status_code == 201
            for _ in range(3):  # several connections in both pools, idle between requests
                assert client.get(CW).status_code == 200
                assert client.get(f"{CW}/a").status_code == 200
            handle.restart()
            started = time.monotonic()
            answers = [
                client.get(CW).status_code,
                client.get(f"{CW}/a").status_code,
                client.post(f"{CW}/a/suspend").status_code,
                client.get(f"{CW}/a").status_code,
            ]
            seconds = time.monotonic() - started
            assert answers == [200, 200, 200, 200]
            assert seconds < 3, f"the first requests took {seconds:.1f}s"
            assert client.get(f"{CW}/a").json()["spec"]["suspend"] is True
            stream = engine.service.events.get(engine.service.find("default", "a").id)
            kinds = [event_type(e) for e in stream]
            assert kinds == ["CronWorkflowCreated", "Suspended"]
        finally:
            engine.close()
    finally:
        handle.stop()
