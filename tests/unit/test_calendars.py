"""Calendars (issue 23 item 2): given/when/then tests of `cronsource.io/exclude-dates` and
named calendars (`cronsource.io/calendars`, ConfigMaps labelled `cronsource.io/calendar`)
through CronService on the memory store, the pure rule (domain/decisions.py), admission and
its bounds (a malformed date, 100,000 dates, rules that never end or never match), the
projections passing over calendar events, `next`/`why`, HTTP and simulate's scenarios.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import IntegrityError
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from cronsource.adapters.application.explain import explain
from cronsource.adapters.application.objects import next_fire_times
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.adapters.entrypoints.simulate.scenario import ScenarioError, load_scenario
from cronsource.adapters.infrastructure.readside.queries import Queries
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.engine import Engine
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.domain.calendars import (
    MAX_DATE_ENTRIES,
    CalendarError,
    calendar_spec,
    check_rrule,
    parse_dates,
)
from cronsource.domain.decisions import RunState, Skip, TickPolicy, decide_ticks
from cronsource.domain.manifest import ManifestError
from cronsource.domain.service import CronService, event_type
from tests.unit.test_aggregate import decisions, manifest, of_type, service

EXCLUDE = "cronsource.io/exclude-dates"
CALENDARS = "cronsource.io/calendars"


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)  # type: ignore[misc]


def configmap(name: str = "holidays", dates: str = "", rrule: str = "", **meta: Any) -> Any:
    data = {k: v for k, v in (("dates", dates), ("rrule", rrule)) if v}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"cronsource.io/calendar": "true"},
            **meta,
        },
        "data": data,
    }


def daily(svc: CronService, annotations: dict[str, str], t0: datetime) -> UUID:
    """`0 9 * * *` in New York (14:00 UTC in winter), created at t0."""
    m = manifest(annotations=annotations, schedules=["0 9 * * *"], timezone="America/New_York")
    cron_id, outcome = svc.apply(m, t0)
    assert outcome == "created"
    return cron_id


def skips(svc: CronService, cron_id: UUID) -> list[tuple[str, str, dict[str, str] | None]]:
    return [
        (e.scheduled_time.date().isoformat(), e.reason, e.values)
        for e in of_type(svc, cron_id, "ScheduleSkipped")
    ]


# ---------------------------------------------------------------- the annotation


def test_an_excluded_date_is_skipped_naming_the_annotation_its_version_and_the_date() -> None:
    svc = service()
    cron_id = daily(svc, {EXCLUDE: "2026-12-25, 2026-12-27..2026-12-28"}, utc(2026, 12, 24))

    for day in range(24, 30):
        svc.tick([cron_id], utc(2026, 12, day, 14))

    fired = [e.scheduled_time.day for e in of_type(svc, cron_id, "ScheduleFired")]
    assert fired == [24, 26, 29]
    assert skips(svc, cron_id) == [
        (f"2026-12-{d}", "Excluded", {"calendar": EXCLUDE, "version": "1", "date": f"2026-12-{d}"})
        for d in (25, 27, 28)
    ]
    [first] = of_type(svc, cron_id, "ScheduleSkipped")[:1]
    assert first.message == f"excluded by {EXCLUDE} (version 1): 2026-12-25"


def test_the_date_is_the_cronworkflows_local_date_not_utcs() -> None:
    # 21:00 in New York on 12-24 is 02:00 UTC on 12-25: not excluded by 2026-12-25.
    svc = service()
    m = manifest(
        annotations={EXCLUDE: "2026-12-25"}, schedules=["0 21 * * *"], timezone="America/New_York"
    )
    cron_id, _ = svc.apply(m, utc(2026, 12, 24, 3))
    svc.tick([cron_id], utc(2026, 12, 25, 2))
    svc.tick([cron_id], utc(2026, 12, 26, 2))

    assert decisions(svc, cron_id) == [
        "fire 02:00:00 schedule",
        "skip 02:00:00..02:00:00 x1 Excluded",
    ]


def test_an_outage_over_an_excluded_day_folds_its_ticks_and_keeps_the_catch_up_rules() -> None:
    # Hourly with a 10 h deadline; the scheduler comes back at 01:00 on 12-26 (UTC zone): the
    # excluded 12-25 ticks are one Excluded skip, the missed ones around them skipped by the
    # usual rules (past the deadline, or superseded), and the on-time tick fires.
    svc = service()
    m = manifest(
        annotations={EXCLUDE: "2026-12-25"}, schedules=["0 * * * *"], startingDeadlineSeconds=36000
    )
    cron_id, _ = svc.apply(m, utc(2026, 12, 24, 20))
    svc.tick([cron_id], utc(2026, 12, 26, 1))

    assert decisions(svc, cron_id) == [
        "skip 21:00:00..23:00:00 x3 DeadlineExceeded",
        "skip 00:00:00..23:00:00 x24 Excluded",
        "skip 00:00:00..00:00:00 x1 CatchupLimit",
        "fire 01:00:00 schedule",
    ]


def test_a_later_excluded_tick_still_supersedes_older_missed_ones() -> None:
    # A missed tick within its deadline is not run as a catch-up when the latest tick (the
    # one that would have superseded it) is excluded: as if that one had run.
    ticks = [utc(2026, 12, 24, 23), utc(2026, 12, 25, 0)]
    x = Skip(ticks[1], ticks[1], 1, "Excluded", "excluded")
    out = decide_ticks(
        ticks,
        utc(2026, 12, 25, 0, 0) + timedelta(seconds=5),
        TickPolicy(deadline=timedelta(hours=2)),
        RunState(),
        excluded=lambda t: x if t == ticks[1] else None,
    )
    assert [(type(d).__name__, getattr(d, "reason", "")) for d in out.decisions] == [
        ("Skip", "CatchupLimit"),
        ("Skip", "Excluded"),
    ]
    assert out.decided_until == ticks[1]


def test_an_excluded_tick_after_one_waiting_for_a_run_waits_with_it() -> None:
    # Forbid with a deadline, catch-up All and a run active: the missed tick t2 waits for
    # the run; the excluded t3 after it must not be decided, or the watermark would pass
    # the waiting one. The excluded t1 before it is decided.
    t1, t2, t3 = utc(2026, 12, 24, 10), utc(2026, 12, 24, 11), utc(2026, 12, 24, 12)
    out = decide_ticks(
        [t1, t2, t3],
        t3 + timedelta(seconds=1),
        TickPolicy(concurrency="Forbid", deadline=timedelta(hours=5), catchup_all=True),
        RunState(active=("run-1",)),
        excluded=lambda t: Skip(t, t, 1, "Excluded", "excluded") if t in (t1, t3) else None,
    )
    assert out.waiting
    assert [d.first for d in out.decisions if isinstance(d, Skip)] == [t1]
    assert out.decided_until == t1


# ---------------------------------------------------------------- named calendars


def test_a_calendar_change_is_read_by_the_next_decision_and_named_with_its_version() -> None:
    svc = service()
    version, what = svc.apply_calendar(
        calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 1)
    )
    assert (version, what) == (1, "created")
    cron_id = daily(svc, {CALENDARS: "holidays"}, utc(2026, 12, 20))
    svc.tick([cron_id], utc(2026, 12, 21, 14))
    # A copy the scheduler keeps between decisions, as its cache does.
    copy = svc.load(cron_id)

    version, what = svc.apply_calendar(
        calendar_spec(configmap(dates="2026-12-22, 2026-12-25")), utc(2026, 12, 21, 20)
    )
    assert (version, what) == (2, "updated")
    svc.commit_batch(
        svc.decide_batch([cron_id], utc(2026, 12, 22, 14), {cron_id: copy}), utc(2026, 12, 22, 14)
    )
    svc.tick([cron_id], utc(2026, 12, 25, 14))

    assert [(d, r, (v or {}).get("version")) for d, r, v in skips(svc, cron_id)] == [
        ("2026-12-20", "DeadlineExceeded", None),  # before the first decision: missed
        ("2026-12-22", "Excluded", "2"),  # the copy held from before version 2 read it
        ("2026-12-23", "DeadlineExceeded", None),
        ("2026-12-25", "Excluded", "2"),
    ]


def test_a_calendar_changed_by_another_process_is_seen_by_the_next_decision() -> None:
    # `cronsource apply` in one process, `run` in another: the scheduler's service holds a
    # copy of the calendar from its last decision and must read what follows it.
    scheduler = service()
    scheduler.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 1))
    cron_id = daily(scheduler, {CALENDARS: "holidays"}, utc(2026, 12, 21, 15))
    scheduler.tick([cron_id], utc(2026, 12, 22, 14))  # reads (and keeps) version 1
    other = CronService(env=scheduler.env, recorder=scheduler.recorder)

    other.apply_calendar(
        calendar_spec(configmap(dates="2026-12-23,2026-12-25")), utc(2026, 12, 22, 20)
    )
    scheduler.tick([cron_id], utc(2026, 12, 23, 14))

    assert skips(scheduler, cron_id) == [
        ("2026-12-23", "Excluded", {"calendar": "holidays", "version": "2", "date": "2026-12-23"})
    ]


def test_an_unchanged_calendar_is_no_new_version() -> None:
    svc = service()
    spec = calendar_spec(configmap(dates="2026-12-25"))
    assert svc.apply_calendar(spec, utc(2026, 12, 1)) == (1, "created")
    assert svc.apply_calendar(spec, utc(2026, 12, 2)) == (1, "unchanged")


def test_a_deleted_calendar_skips_ticks_as_spec_error_naming_it() -> None:
    svc = service()
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 1))
    cron_id = daily(svc, {CALENDARS: "holidays"}, utc(2026, 12, 20))
    assert svc.delete_calendar("default", "holidays", utc(2026, 12, 20, 1)) == 2

    svc.tick([cron_id], utc(2026, 12, 21, 14))

    [skip] = of_type(svc, cron_id, "ScheduleSkipped")
    assert skip.reason == "SpecError"
    assert "calendar 'holidays' not found in namespace default" in skip.message
    assert of_type(svc, cron_id, "ScheduleFired") == []

    # Applied again, the stream goes on (version 3) and the ticks run again; the calendar
    # was created again, as Kubernetes says of an object made after its delete.
    assert svc.apply_calendar(
        calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 21, 20)
    ) == (3, "created")
    svc.tick([cron_id], utc(2026, 12, 22, 14))
    assert len(of_type(svc, cron_id, "ScheduleFired")) == 1


def test_a_calendar_rrule_that_never_ends_is_evaluated_per_date() -> None:
    svc = service()
    svc.apply_calendar(
        calendar_spec(configmap(rrule="RRULE:FREQ=WEEKLY;BYDAY=SA,SU\nEXDATE:20261226T000000")),
        utc(2026, 12, 1),
    )
    cron_id = daily(svc, {CALENDARS: "holidays"}, utc(2026, 12, 24))
    for day in range(25, 29):
        svc.tick([cron_id], utc(2026, 12, day, 14))
    # 12-26 is a Saturday the EXDATE takes out of the rule; 12-27 a Sunday.
    fired = [e.scheduled_time.day for e in of_type(svc, cron_id, "ScheduleFired")]
    assert fired == [25, 26, 28]


# ---------------------------------------------------------------- admission and bounds


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({EXCLUDE: "2026-02-30"}, "cronsource.io/exclude-dates: '2026-02-30' is not a date"),
        ({EXCLUDE: "2026-12-25,tomorrow"}, "cronsource.io/exclude-dates: 'tomorrow' is not a date"),
        ({EXCLUDE: "2026-12-31..2026-12-01"}, "ends before it starts"),
        ({EXCLUDE: "2300-01-01"}, "is outside 1970-01-01..2199-12-31"),
        (
            {CALENDARS: "Holidays_US"},
            "cronsource.io/calendars: 'Holidays_US' is not a ConfigMap name",
        ),
    ],
)
def test_admission_refuses_a_bad_date_or_name_in_one_line(
    annotations: dict[str, str], expected: str
) -> None:
    with pytest.raises(ManifestError) as e:
        manifest(annotations=annotations)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


def test_a_hundred_thousand_dates_are_refused_naming_the_count() -> None:
    # Counted before any is parsed (bench/calendars.py times it).
    dates = ",".join(["2026-12-25"] * 100_000)
    with pytest.raises(CalendarError) as e:
        calendar_spec(configmap(dates=dates))
    assert str(e.value).startswith(
        f"data.dates: 100000 entries, more than the {MAX_DATE_ENTRIES} a calendar may list"
    )


def test_ten_thousand_entries_and_long_ranges_are_taken_without_expanding_them() -> None:
    dates = ",".join(
        f"{2000 + i // 365:04d}-01-01..{2000 + i // 365:04d}-01-02" for i in range(10_000)
    )
    assert len(parse_dates(dates, "data.dates")) == 28
    assert parse_dates("1970-01-01..2199-12-31", "f") == (
        (datetime(1970, 1, 1).date(), datetime(2199, 12, 31).date()),
    )


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("RRULE:FREQ=HOURLY", "data.rrule: FREQ=HOURLY: a calendar excludes whole days"),
        ("RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "data.rrule: the rule matches no date"),
        ("RRULE:FREQ=SOMETIMES", "data.rrule: FREQ=SOMETIMES"),
        ("NOT A RULE", "data.rrule: 'NOT A RULE' is not an RFC 5545 rule dateutil reads"),
    ],
)
def test_a_bad_rule_is_refused_in_one_line(rule: str, expected: str) -> None:
    with pytest.raises(CalendarError) as e:
        check_rrule(rule, "data.rrule")
    assert str(e.value).startswith(expected)


def test_a_configmap_without_the_label_or_any_dates_is_no_calendar() -> None:
    cm = configmap(dates="2026-12-25")
    cm["metadata"]["labels"] = {}
    with pytest.raises(CalendarError, match="needs the label cronsource.io/calendar"):
        calendar_spec(cm)
    with pytest.raises(CalendarError, match="neither data.dates nor data.rrule"):
        calendar_spec(configmap())


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_apply_refuses_a_cronworkflow_naming_an_unknown_calendar_and_stores_nothing(
    engine: Engine,
) -> None:
    from cronsource.adapters.application.operations import Operations

    ops = Operations(engine)
    m = manifest(annotations={CALENDARS: "maintenance"})
    with pytest.raises(ManifestError) as e:
        ops.apply(m, three_way=True)
    assert "cronsource.io/calendars: calendar 'maintenance' not found in namespace default" in str(
        e.value
    )
    assert engine.view.status("default", "nightly") is None
    # Named in the same batch (a calendar applied before it), it is admitted.
    ops.apply(m, three_way=True, dry_run=True, pending_calendars={("default", "maintenance")})


# ---------------------------------------------------------------- projections, next, why


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_the_read_model_passes_over_calendar_events(engine: Engine) -> None:
    svc = engine.service
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 1))
    cron_id = daily(svc, {CALENDARS: "holidays"}, utc(2026, 12, 24))
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25,2026-12-26")), utc(2026, 12, 2))
    svc.tick([cron_id], utc(2026, 12, 25, 14))
    engine.projector.settle()

    queries = Queries(engine.view.db)
    assert [r.name for r in queries.statuses("default")] == ["nightly"]
    audit = queries.audit("default")
    assert all(r.cron_id == str(cron_id) for r in audit)  # no row for a calendar's event
    [skip] = queries.decisions_at("default", "nightly", utc(2026, 12, 25, 14))
    assert skip.reason == "Excluded"
    assert skip.detail["values"] == {"calendar": "holidays", "version": "2", "date": "2026-12-25"}


def test_next_marks_excluded_ticks_and_why_names_the_calendar() -> None:
    svc = service()
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 1))
    cron_id = daily(svc, {CALENDARS: "holidays"}, utc(2026, 12, 23))
    agg = svc.load(cron_id)

    items = next_fire_times(agg, utc(2026, 12, 23), 3)

    assert [i.get("excluded") for i in items] == [
        None,
        None,
        {
            "reason": "Excluded",
            "message": "excluded by calendar holidays (version 1): 2026-12-25",
            "calendar": "holidays",
            "version": "1",
            "date": "2026-12-25",
        },
    ]
    pending = explain(agg, utc(2026, 12, 25, 14), [])
    assert pending["outcome"] == "Pending"
    assert "excluded by calendar holidays (version 1): 2026-12-25" in pending["explanation"]


# ---------------------------------------------------------------- HTTP


@pytest.fixture
def client(engine: Engine, clock: VirtualClock) -> TestClient:
    app = create_app(engine, ServeSettings(token="t"), clock)
    return TestClient(app, headers={"Authorization": "Bearer t"}, raise_server_exceptions=False)


def test_http_calendars_put_get_delete_and_admission(client: TestClient) -> None:
    cal = "/api/v1/namespaces/default/calendars/holidays"
    cw = "/api/v1/namespaces/default/cronworkflows"
    body = manifest(annotations={CALENDARS: "holidays"}).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )

    refused = client.post(cw, json=body)
    assert refused.status_code == 422
    assert "calendar 'holidays' not found in namespace default" in refused.json()["detail"]

    bad = client.put(cal, json=configmap(dates="2026-02-30"))
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "data.dates"
    assert client.get(cal).status_code == 404  # nothing stored

    put = client.put(cal, json=configmap(dates="2026-12-25"))
    assert put.status_code == 200, put.text
    assert (put.json()["version"], put.json()["outcome"]) == (1, "created")
    assert client.post(cw, json=body).status_code == 201
    assert client.get(cal).json()["dates"] == "2026-12-25"

    gone = client.delete(cal)
    assert gone.json()["version"] == 2 and gone.json()["deleted"]
    assert client.get(cal).status_code == 404
    # The delete says who named it (it was silent), and those CronWorkflows can still be
    # changed while they name it (every update that kept the annotation was a 422).
    name = body["metadata"]["name"]
    assert f"({name})" in gone.headers["Warning"] and "SpecError" in gone.headers["Warning"]
    patched = client.patch(
        f"{cw}/{name}",
        json={"spec": {"concurrencyPolicy": "Forbid"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    # A new reference to a calendar that does not exist is still refused.
    other = {**body, "metadata": {**body["metadata"], "name": "another"}}
    assert client.post(cw, json=other).status_code == 422


# ---------------------------------------------------------------- simulate


def scenario(*docs: Any) -> dict[str, Any]:
    return {
        "start": "2026-12-20T00:00:00Z",
        "end": "2026-12-27T00:00:00Z",
        "cronWorkflows": list(docs),
    }


def test_a_scenario_takes_calendar_configmaps_and_refuses_an_unknown_name() -> None:
    cw = manifest(annotations={CALENDARS: "holidays"}).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    load_scenario(scenario(cw, configmap(dates="2026-12-25")))  # order does not matter
    with pytest.raises(ScenarioError) as e:
        load_scenario(scenario(cw))
    assert str(e.value).startswith(
        "cronWorkflows[0].metadata.annotations: cronsource.io/calendars: calendar 'holidays'"
        " not found in namespace default"
    )
    with pytest.raises(ScenarioError, match=r"cronWorkflows\[1\]\.data\.dates: '2026-02-30'"):
        load_scenario(scenario(cw, configmap(dates="2026-02-30")))


# ---------------------------------------------------------------- decisions made in advance


@pytest.mark.stores("memory", "sqlite", "postgres")
def test_a_calendar_changed_after_a_decision_made_in_advance_is_read_at_the_instant(
    engine: Engine,
) -> None:
    """The scheduler decides the next instant a few seconds ahead; a calendar applied by
    another process in between names that tick's date: the decision made in advance (a
    fire) is dropped and the tick decided again, Excluded by the new version. The
    CronWorkflow's own version check cannot see it: the calendar is a stream of its own."""
    h = utc(2026, 5, 4, 11)
    svc = engine.service
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), h - timedelta(hours=1))
    m = manifest(annotations={CALENDARS: "holidays"}, schedules=["0 * * * *"])
    cron_id, _ = svc.apply(m, h - timedelta(minutes=30))
    engine.projector.catch_up(h - timedelta(minutes=30))
    clock = VirtualClock(h - timedelta(seconds=2))
    loop = SchedulerLoop(engine, SoleOwner(), role="scheduler", clock=clock)
    assert loop.prepare_once(clock.now()) == 1

    engine.replica().apply_calendar(
        calendar_spec(configmap(dates="2026-05-04")), h - timedelta(seconds=1)
    )
    clock.set(h)
    loop.schedule_once(h)

    assert of_type(svc, cron_id, "ScheduleFired") == []
    [skip] = of_type(svc, cron_id, "ScheduleSkipped")
    assert (skip.reason, skip.values["version"]) == ("Excluded", "2")


# ---------------------------------------------------------------- the rule, as a property


@given(
    n=st.integers(1, 30),
    excluded_at=st.sets(st.integers(0, 29)),
    concurrency=st.sampled_from(["Allow", "Forbid", "Replace"]),
    deadline_minutes=st.sampled_from([None, 0, 5, 90]),
    catchup_all=st.booleans(),
    active=st.booleans(),
    late_seconds=st.sampled_from([0, 5, 45, 600]),
    suspended=st.booleans(),
)
def test_every_tick_gets_one_decision_and_no_excluded_tick_runs(
    n: int,
    excluded_at: set[int],
    concurrency: Any,
    deadline_minutes: int | None,
    catchup_all: bool,
    active: bool,
    late_seconds: int,
    suspended: bool,
) -> None:
    """Whatever the policy: the decisions cover exactly the ticks up to the watermark, each
    once, in order; no excluded tick fires and each is an Excluded skip; the watermark
    never passes a tick that waits; without exclusions the outcome is what it was."""
    ticks = [utc(2026, 12, 24) + timedelta(minutes=m) for m in range(n)]
    now = ticks[-1] + timedelta(seconds=late_seconds)
    deadline = None if deadline_minutes is None else timedelta(minutes=deadline_minutes)
    policy = TickPolicy(concurrency, deadline, catchup_all)
    runs = RunState(("run-0",) if active else ())
    marked = {ticks[i] for i in excluded_at if i < n}

    def excluded(t: datetime) -> Skip | None:
        return Skip(t, t, 1, "Excluded", "x") if t in marked else None

    hold: Any = "Suspended" if suspended else None
    out = decide_ticks(ticks, now, policy, runs, suspension=hold, excluded=excluded)

    covered: list[datetime] = []
    for d in out.decisions:
        if isinstance(d, Skip):
            span = [t for t in ticks if d.first <= t <= d.last]
            assert len(span) == d.count
            assert (d.reason == "Excluded") == all(t in marked for t in span)
            covered += span
        else:
            assert d.scheduled_time not in marked
            covered.append(d.scheduled_time)
    assert covered == sorted(covered) and len(set(covered)) == len(covered)
    assert covered == [t for t in ticks if out.decided_until and t <= out.decided_until]
    if not out.waiting:
        assert covered == ticks
    if not marked:
        assert out == decide_ticks(ticks, now, policy, runs, suspension=hold)


def test_an_excluded_tick_never_joins_the_buffer() -> None:
    # Forbid with BufferAll, a run active from 22:00: 23:00 waits in the buffer; 00:00 and
    # 01:00 of the excluded date are Excluded skips, not buffered; when the run ends, 23:00
    # starts.
    svc = service()
    m = manifest(
        annotations={"cronsource.io/overlap": "BufferAll", EXCLUDE: "2026-05-04"},
        schedules=["0 * * * *"],
        concurrencyPolicy="Forbid",
    )
    cron_id, _ = svc.apply(m, utc(2026, 5, 3, 21, 30))
    svc.tick([cron_id], utc(2026, 5, 3, 22))
    for t in (utc(2026, 5, 3, 23), utc(2026, 5, 4, 0), utc(2026, 5, 4, 1)):
        svc.tick([cron_id], t)
    agg = svc.load(cron_id)
    assert agg.buffered == [utc(2026, 5, 3, 23)]
    assert [(d, r) for d, r, _ in skips(svc, cron_id)] == [
        ("2026-05-04", "Excluded"),
        ("2026-05-04", "Excluded"),
    ]
    [run] = agg.active
    svc.run_completed(cron_id, run, "Succeeded", utc(2026, 5, 4, 1, 30), utc(2026, 5, 4, 1, 30))
    svc.tick([cron_id], utc(2026, 5, 4, 1, 30))
    fired = [(e.scheduled_time, e.trigger) for e in of_type(svc, cron_id, "ScheduleFired")]
    assert fired[-1] == (utc(2026, 5, 3, 23), "buffer")


@pytest.mark.stores("sqlite")
def test_retention_keeps_a_calendars_stream_whole(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Calendar events older than the window stay (no snapshot covers them, and a skip may
    name any version); retention neither removes them nor tries to snapshot them."""
    from cronsource.adapters.runtime.retention import Retention

    svc = engine.service
    t0 = utc(2026, 5, 1)
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), t0)
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-26")), t0 + timedelta(hours=1))
    cron_id, _ = svc.apply(manifest(annotations={CALENDARS: "holidays"}), t0)
    svc.tick([cron_id], t0 + timedelta(days=3))
    engine.projector.catch_up(t0 + timedelta(days=3))

    Retention(engine, timedelta(days=1)).step(t0 + timedelta(days=3), lambda: True)

    cal_events = list(svc.recorder.select_events(svc.calendar("default", "holidays").id))  # type: ignore[union-attr]
    assert [e.originator_version for e in cal_events] == [1, 2]
    assert "snapshots of" not in caplog.text


def test_the_golden_calendar_log_replays_with_the_versions_its_skips_name() -> None:
    """tests/golden/calendars.*: a log recorded once (a calendar applied, changed, deleted and
    applied again; the annotation; an Excluded and a SpecError skip). Every build must read
    it: the calendar's stream, and the skips naming its versions."""
    from tests.unit.test_golden import replay

    svc = replay("calendars")
    cal = svc.calendar("default", "holidays")
    assert cal is not None and (cal.version, cal.deleted, cal.dates) == (4, False, "2026-12-25")
    [created] = [e for e in svc.events.get(cal.id)][:1]
    assert created.name == "holidays"
    [cron_id] = {
        e.originator_id
        for e in svc.recorder.select_notifications(start=1, limit=100)
        if e.originator_id != cal.id
    }
    named = [
        (e.reason, (e.values or {}).get("calendar"), (e.values or {}).get("version"))
        for e in svc.events.get(cron_id)
        if event_type(e) == "ScheduleSkipped"
    ]
    assert named == [
        ("Excluded", "cronsource.io/exclude-dates", "1"),
        ("Excluded", "holidays", "2"),
        ("Excluded", "holidays", "2"),
        ("SpecError", None, None),  # deleted: version 3
        ("DeadlineExceeded", None, None),  # 12-28..12-31, missed
        ("Excluded", "holidays", "4"),  # applied again: the stream goes on
    ]


def test_http_a_patch_naming_an_unknown_calendar_is_refused(client: TestClient) -> None:
    cw = "/api/v1/namespaces/default/cronworkflows"
    body = manifest().model_dump(by_alias=True, exclude_none=True, mode="json")
    assert client.post(cw, json=body).status_code == 201
    patch = {"metadata": {"annotations": {CALENDARS: "freeze"}}}
    r = client.patch(
        f"{cw}/nightly",
        json=patch,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 422
    assert "calendar 'freeze' not found in namespace default" in r.json()["detail"]
    live = client.get(f"{cw}/nightly").json()
    assert CALENDARS not in (live["metadata"].get("annotations") or {})


def test_a_refused_calendar_save_leaves_no_change_behind_and_is_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store refuses the first save of a change (another writer won the version): the
    retry starts from the log, not from the refused copy, and records the change."""
    svc = service()
    svc.apply_calendar(calendar_spec(configmap(dates="2026-12-25")), utc(2026, 12, 1))
    real_save = svc.save
    refused = []

    def save_refusing_once(*objs: Any, **kwargs: Any) -> Any:
        if not refused:
            refused.append(objs)
            raise IntegrityError("stale")
        return real_save(*objs, **kwargs)

    monkeypatch.setattr(svc, "save", save_refusing_once)
    got = svc.apply_calendar(calendar_spec(configmap(dates="2026-12-26")), utc(2026, 12, 2))

    assert refused and got == (2, "updated")
    fresh = CronService(env=svc.env, recorder=svc.recorder).calendar("default", "holidays")
    assert fresh is not None and (fresh.version, fresh.dates) == (2, "2026-12-26")


def test_a_key_a_calendar_does_not_take_is_refused_naming_it() -> None:
    """`rrul:` beside `dates:` was ignored: the calendar excluded fewer days than written."""
    doc = configmap(dates="2026-12-25")
    doc["data"]["rrul"] = "RRULE:FREQ=WEEKLY;BYDAY=SA"
    with pytest.raises(CalendarError) as e:
        calendar_spec(doc)
    assert str(e.value) == "data.rrul: not a key of a calendar (it takes data.dates and data.rrule)"
