"""Hashed `H` schedules over real HTTP (uvicorn on 127.0.0.1): the HTTP API shows the same
resolution as every other surface (tests/unit/test_hashed_schedules_surfaces.py) and refuses a
malformed H."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.adapters.infrastructure.store.config import StoreConfig
from tests.http_helpers import serving
from tests.instants import T0
from tests.unit.test_hashed_schedules_surfaces import RESOLVED, manifest

CW = "/api/v1/namespaces/default/cronworkflows"


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    engine = bootstrap(StoreConfig.parse("memory:"))
    app = create_app(engine, ServeSettings(), VirtualClock(T0))
    try:
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            yield client
    finally:
        engine.close()


def test_the_http_api_shows_the_resolution_and_refuses_a_malformed_h(http: httpx.Client) -> None:
    assert http.post(CW, json=manifest("report-a", "H * * * *")).status_code == 201
    obj = http.get(f"{CW}/report-a").json()
    assert obj["spec"]["schedules"] == ["H * * * *"]
    assert obj["status"]["resolvedSchedules"] == {"H * * * *": RESOLVED["report-a"]}
    assert obj["status"]["nextScheduledTime"] == "2026-05-04T10:08:00Z"
    listed = http.get(CW).json()["items"]
    assert [o["status"]["resolvedSchedules"] for o in listed] == [{"H * * * *": "8 * * * *"}]

    assert http.post(CW, json=manifest("plain", "0 * * * *")).status_code == 201
    assert "resolvedSchedules" not in http.get(f"{CW}/plain").json()["status"]  # not null

    refused = http.post(CW, json=manifest("bad", "H(30-10) * * * *"))
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith(
        'spec.schedules[0]: "H(30-10)" is malformed: range "30-10" is inverted'
    )
    assert http.get(f"{CW}/bad").status_code == 404

    schema = http.get("/openapi.json").json()["components"]["schemas"]["CronWorkflowStatus"]
    assert schema["properties"]["resolvedSchedules"]["anyOf"][0] == {
        "type": "object",
        "additionalProperties": {"type": "string"},
    }
