"""Calendars over real HTTP on PostgreSQL (issue 23 item 2): a calendar is PUT as its
ConfigMap (each change a version), a bad date is a 422 naming `data.dates` with nothing
stored, a CronWorkflow naming an unknown calendar is a 422 naming it, `next` marks the
excluded tick, the excluded tick is an `Excluded` skip naming the calendar's version in the
audit (filterable by reason), `why` names it, and the skip metric counts the reason.
"""

from __future__ import annotations

import pytest

from tests.http_helpers import manifest
from tests.integration.test_http import CW, Api, api, assert_problem, h, scrape

__all__ = ["api"]  # the fixture, imported for the tests below

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

CAL = "/api/v1/namespaces/default/calendars/holidays"


def configmap(dates: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "holidays", "labels": {"cronsource.io/calendar": "true"}},
        "data": {"dates": dates},
    }


def named(name: str) -> dict[str, object]:
    body = manifest(name)
    body["metadata"]["annotations"] = {"cronsource.io/calendars": "holidays"}  # type: ignore[index]
    return body


def test_calendars_over_http_from_admission_to_the_excluded_tick(api: Api) -> None:
    refused = assert_problem(api.apply(named("hourly")), 422)
    assert "calendar 'holidays' not found in namespace default" in refused["detail"]
    assert api.http.get(f"{CW}/hourly").status_code == 404

    bad = assert_problem(api.http.put(CAL, json=configmap("2026-05-04,2026-02-30")), 422)
    assert bad["errors"][0]["field"] == "data.dates"
    assert "'2026-02-30' is not a date" in bad["errors"][0]["message"]
    assert api.http.get(CAL).status_code == 404

    first = api.http.put(CAL, json=configmap("2026-05-05"))
    assert (first.status_code, first.json()["version"], first.json()["outcome"]) == (
        200,
        1,
        "created",
    )
    assert api.apply(named("hourly")).status_code == 201
    second = api.http.put(CAL, json=configmap("2026-05-05, 2026-05-04"))
    assert (second.json()["version"], second.json()["outcome"]) == (2, "updated")

    items = api.http.get(f"{CW}/hourly/next", params={"count": 2}).json()["items"]
    assert [i.get("excluded", {}).get("version") for i in items] == ["2", "2"]

    api.tick("hourly", h(11))
    history = api.http.get(f"{CW}/hourly/history", params={"reason": "Excluded"}).json()
    [skip] = history["items"]
    assert skip["values"] == {"calendar": "holidays", "version": "2", "date": "2026-05-04"}
    why = api.http.get(f"{CW}/hourly/decision", params={"at": "2026-05-04T11:00:00Z"}).json()
    assert why["outcome"] == "Skipped" and why["reason"] == "Excluded"
    assert "excluded by calendar holidays (version 2): 2026-05-04" in why["explanation"]
    reasons = {k[1] for k in scrape(api) if k[0] == "cronsource_skip_decisions_total"}
    assert (("namespace", "default"), ("reason", "Excluded")) in reasons


def test_a_stale_version_of_a_calendar_is_a_conflict_and_changes_nothing(api: Api) -> None:
    """If-Match and metadata.resourceVersion were ignored on calendars: a PUT or DELETE with a
    version another writer had moved past replaced or deleted the newer calendar."""
    assert api.http.put(CAL, json=configmap("2026-12-25")).status_code == 200  # version 1
    assert api.http.put(CAL, json=configmap("2026-12-24")).status_code == 200  # version 2

    stale = assert_problem(
        api.http.put(CAL, json=configmap("2026-01-01"), headers={"If-Match": '"1"'}), 409
    )
    assert stale["currentVersion"] == 2
    body = configmap("2026-01-01")
    body["metadata"]["resourceVersion"] = "1"  # type: ignore[index]
    assert_problem(api.http.put(CAL, json=body), 409)
    assert_problem(api.http.delete(CAL, headers={"If-Match": "1"}), 409)
    now = api.http.get(CAL).json()
    assert (now["version"], now["dates"]) == (2, "2026-12-24")

    fresh = api.http.put(CAL, json=configmap("2026-01-01"), headers={"If-Match": '"2"'})
    assert fresh.status_code == 200 and fresh.json()["version"] == 3
    assert api.http.delete(CAL, headers={"If-Match": "3"}).status_code == 200
