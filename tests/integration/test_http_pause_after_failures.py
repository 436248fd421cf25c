"""The pause after failures over real HTTP on PostgreSQL (issue 23 item 1): admission refuses a
bad `cronsource.io/pause-after-failures` with one line naming it and its value, stores nothing;
a paused CronWorkflow shows its condition (phase Active, no next run), its event names the
runs, the audit filters on the new skip reason, the metric counts it, and `resume` clears it.
"""

from __future__ import annotations

import pytest

from tests.http_helpers import manifest
from tests.integration.test_http import CW, Api, api, assert_problem, h, scrape, wf

__all__ = ["api"]  # the fixture, imported for the tests below

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

PAUSE = "cronsource.io/pause-after-failures"


def breaker(name: str, value: str) -> dict[str, object]:
    body = manifest(name)
    body["metadata"]["annotations"] = {PAUSE: value}  # type: ignore[index]
    return body


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_a_bad_threshold_is_refused_naming_the_annotation_and_its_value(
    api: Api, value: str
) -> None:
    body = assert_problem(api.apply(breaker("bad", value)), 422)
    [error] = body["errors"]
    assert error["field"] == "metadata.annotations"
    assert PAUSE in error["message"] and f"(value: {value!r})" in error["message"]
    assert api.http.get(f"{CW}/bad").status_code == 404  # nothing stored


def test_two_failed_runs_pause_until_resume(api: Api) -> None:
    assert api.apply(breaker("hourly", "2")).status_code == 201
    runs = [wf("hourly", h(11)), wf("hourly", h(12))]
    api.tick("hourly", h(11))
    api.run_completed("hourly", runs[0], "Failed", h(11, 5))
    api.tick("hourly", h(12))
    api.run_completed("hourly", runs[1], "Error", h(12, 5))

    obj = api.http.get(f"{CW}/hourly").json()
    status = obj["status"]
    assert status["phase"] == "Active" and status["nextScheduledTime"] is None
    [cond] = [c for c in status["conditions"] if c["type"] == "PausedAfterFailures"]
    assert cond["status"] == "True" and ", ".join(runs) in cond["message"]
    history = f"{CW}/hourly/history"
    events = api.http.get(history, params={"type": "PausedAfterFailures"}).json()["items"]
    assert [(e["workflows"], e["threshold"]) for e in events] == [(runs, 2)]
    ns = ("namespace", "default")
    assert scrape(api)[("cronsource_cronworkflows_paused_after_failures", (ns,))] == 1

    # The ticks of the pause wait; the resume decides them as PausedAfterFailures skips.
    api.at(h(14, 30))
    assert api.http.post(f"{CW}/hourly/resume", json={"by": "alice"}).status_code == 200
    api.tick("hourly", h(14, 30))
    skips = api.http.get(history, params={"reason": "PausedAfterFailures"}).json()["items"]
    assert [(e["scheduledTime"], e["count"]) for e in skips] == [("2026-05-04T13:00:00Z", 2)]
    after = api.http.get(f"{CW}/hourly").json()["status"]
    assert not [c for c in after["conditions"] if c["type"] == "PausedAfterFailures"]
    assert after["nextScheduledTime"] == "2026-05-04T15:00:00Z"
    assert scrape(api)[("cronsource_cronworkflows_paused_after_failures", (ns,))] == 0


def test_a_reason_filter_naming_an_unknown_reason_lists_the_new_one(api: Api) -> None:
    body = assert_problem(api.http.get("/api/v1/events", params={"reason": "Paused"}), 422)
    assert "PausedAfterFailures" in body["errors"][0]["message"]
