"""Schemathesis against /openapi.json: no generated request, valid or not, gets a 5xx.

One server for the module (real HTTP, real PostgreSQL), holding `default/hello` so the
explicit path examples in the document reach a CronWorkflow that exists. Each operation gets
its explicit examples, then a few valid (positive) and invalid (negative) generated requests,
so the file runs in well under a minute. The failures this found while the API was written
(numbers overflowing date arithmetic, NaN in YAML, NUL in query strings) are pinned by name
in tests/integration/test_http.py.

Schemathesis' own pytest loader (`schemathesis.pytest.from_fixture`) fails under pytest 9
(`'Function' object has no attribute '_nodeid'`), so the operations are listed here and driven
through their Hypothesis strategies; `test_every_operation_is_fuzzed` keeps the list whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from tests import pgserver
from tests.http_helpers import manifest, pg_engine, serving
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

NS = "/api/v1/namespaces/{namespace}/cronworkflows"
CAL = "/api/v1/namespaces/{namespace}/calendars"
OPERATIONS = [
    ("POST", NS),
    ("GET", NS),
    ("GET", NS + "/{name}"),
    ("PUT", NS + "/{name}"),
    ("PATCH", NS + "/{name}"),
    ("DELETE", NS + "/{name}"),
    ("POST", NS + "/{name}/suspend"),
    ("POST", NS + "/{name}/resume"),
    ("POST", NS + "/{name}/trigger"),
    ("POST", NS + "/{name}/backfill"),
    ("GET", NS + "/{name}/next"),
    ("GET", NS + "/{name}/history"),
    ("GET", NS + "/{name}/decision"),
    ("GET", NS + "/{name}/timeline"),
    ("GET", NS + "/{name}/workflows"),
    ("PUT", CAL + "/{name}"),
    ("GET", CAL + "/{name}"),
    ("DELETE", CAL + "/{name}"),
    ("GET", "/api/v1/scheduler"),
    ("GET", "/api/v1/cronworkflows"),
    ("GET", "/api/v1/timeline"),
    ("GET", "/api/v1/events"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
]
EXAMPLES = 8  # generated requests per operation and mode


@pytest.fixture(scope="module")
def api_schema(pg_server_url: str) -> Iterator[schemathesis.BaseSchema]:
    url = pgserver.fresh_database(pg_server_url)
    engine = pg_engine(url)
    try:
        with serving(create_app(engine, ServeSettings(), VirtualClock(T0))) as base:
            created = httpx.post(
                base + "/api/v1/namespaces/default/cronworkflows", json=manifest("hello")
            )
            assert created.status_code == 201, created.text
            yield schemathesis.openapi.from_url(base + "/openapi.json")
    finally:
        engine.close()
        pgserver.drop_database(url)


def test_every_operation_is_fuzzed(api_schema: schemathesis.BaseSchema) -> None:
    documented = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert documented == set(OPERATIONS)


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_generated_request_gets_a_server_error(
    api_schema: schemathesis.BaseSchema, method: str, path: str
) -> None:
    operation = api_schema[path][method]
    strategies = [
        *api_schema.get_strategies_from_examples(operation),
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
    ]
    if operation.query or operation.path_parameters or operation.headers or operation.body:
        strategies.append(operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

    @given(case=st.one_of(strategies))
    @settings(
        max_examples=EXAMPLES * len(strategies),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=[not_a_server_error], timeout=30)

    check()
