"""Buffered overlap (`cronsource.io/overlap: BufferOne | BufferAll`, issue 23 item 4).

Given/when/then tests through CronService on the memory store: with Forbid, a tick that comes
while a run is active waits (TickBuffered) and starts when the run ends, recorded as a fire
with trigger `buffer` and its own scheduled time; BufferOne keeps the first waiting tick and
skips later ones (BufferFull), BufferAll keeps up to `cronsource.io/max-buffer`;
`startingDeadlineSeconds` bounds the wait (DeadlineExceeded). Plus admission, and the pure
rule (domain/decisions.py `buffer_ticks`) as a hypothesis property.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronsource.adapters.application.explain import explain
from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.cli.output import detail_cell
from cronsource.domain.decisions import TickPolicy, buffer_ticks
from cronsource.domain.manifest import ManifestError
from cronsource.domain.service import CronService, commit_deadline, event_type
from cronsource.projections.dispatch import start_deadline
from cronsource.projections.readmodel import audit_row
from tests.golden_snapshots import store_golden
from tests.instants import at
from tests.unit.test_aggregate import child, decisions, events, manifest, of_type, service

OVERLAP = "cronsource.io/overlap"
MAX_BUFFER = "cronsource.io/max-buffer"


def buffered(mode: str, max_buffer: int | None = None, **spec: Any) -> Any:
    annotations = {OVERLAP: mode}
    if max_buffer is not None:
        annotations[MAX_BUFFER] = str(max_buffer)
    spec.setdefault("concurrencyPolicy", "Forbid")
    return manifest(annotations=annotations, **spec)


def start_a_long_run(svc: CronService, m: Any) -> UUID:
    """Created at 10:00:30; the tick of 10:01 fires and its run is still active."""
    cron_id, outcome = svc.apply(m, at("10:00:30"))
    assert outcome == "created"
    svc.tick([cron_id], at("10:01:00"))
    assert list(svc.load(cron_id).active) == [child(at("10:01:00"))]
    return cron_id


def tick_minutes(svc: CronService, cron_id: UUID, *minutes: int) -> None:
    for m in minutes:
        svc.tick([cron_id], at(f"10:{m:02d}:00"))


def end(svc: CronService, cron_id: UUID, run: str, t: str) -> None:
    svc.run_completed(cron_id, run, "Succeeded", at(t), at(t))


def test_buffer_one_keeps_the_first_waiting_tick_and_skips_later_ones() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne"))

    tick_minutes(svc, cron_id, 2, 3, 4)

    [waits] = of_type(svc, cron_id, "TickBuffered")
    assert waits.scheduled_time == at("10:02:00")
    assert waits.behind == [child(at("10:01:00"))]
    skips = of_type(svc, cron_id, "ScheduleSkipped")
    assert [(s.scheduled_time, s.reason) for s in skips] == [
        (at("10:03:00"), "BufferFull"),
        (at("10:04:00"), "BufferFull"),
    ]
    assert "BufferOne" in skips[0].message
    assert svc.load(cron_id).buffered == [at("10:02:00")]


def test_the_waiting_tick_starts_when_the_run_ends_with_its_own_time() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne"))
    tick_minutes(svc, cron_id, 2)

    end(svc, cron_id, child(at("10:01:00")), "10:02:40")

    [*_, last] = of_type(svc, cron_id, "ScheduleFired")
    assert (last.scheduled_time, last.trigger) == (at("10:02:00"), "buffer")
    assert last.workflow_name == child(at("10:02:00"))
    agg = svc.load(cron_id)
    assert agg.buffered == [] and list(agg.active) == [child(at("10:02:00"))]
    assert agg.last_scheduled_time == at("10:02:00")


def test_forbid_without_a_buffer_still_drops_the_tick() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, manifest(concurrencyPolicy="Forbid"))
    tick_minutes(svc, cron_id, 2)
    end(svc, cron_id, child(at("10:01:00")), "10:02:40")
    assert decisions(svc, cron_id) == [
        "fire 10:01:00 schedule",
        "skip 10:02:00..10:02:00 x1 ConcurrencyForbid",
    ]


def test_buffer_all_queues_every_tick_and_runs_them_one_at_a_time_oldest_first() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferAll"))
    tick_minutes(svc, cron_id, 2, 3, 4)
    assert svc.load(cron_id).buffered == [at(f"10:0{m}:00") for m in (2, 3, 4)]

    end(svc, cron_id, child(at("10:01:00")), "10:04:10")
    end(svc, cron_id, child(at("10:02:00")), "10:04:20")
    end(svc, cron_id, child(at("10:03:00")), "10:04:30")

    assert decisions(svc, cron_id) == [
        "fire 10:01:00 schedule",
        "fire 10:02:00 buffer",
        "fire 10:03:00 buffer",
        "fire 10:04:00 buffer",
    ]
    assert svc.load(cron_id).buffered == []


def test_buffer_all_over_the_cap_is_a_skip_naming_the_cap() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferAll", max_buffer=2))
    tick_minutes(svc, cron_id, 2, 3, 4, 5)

    assert svc.load(cron_id).buffered == [at("10:02:00"), at("10:03:00")]
    skips = of_type(svc, cron_id, "ScheduleSkipped")
    assert [(s.scheduled_time, s.reason) for s in skips] == [
        (at("10:04:00"), "BufferFull"),
        (at("10:05:00"), "BufferFull"),
    ]
    assert "cronsource.io/max-buffer: 2" in skips[0].message


def test_a_scheduler_down_for_a_while_folds_the_ticks_over_the_cap_into_one_skip() -> None:
    svc = service()
    cron_id = start_a_long_run(
        svc, buffered("BufferAll", max_buffer=2, startingDeadlineSeconds=600)
    )
    tick_minutes(svc, cron_id, 6)  # 10:02..10:06 all within the deadline
    assert decisions(svc, cron_id) == [
        "fire 10:01:00 schedule",
        "skip 10:04:00..10:06:00 x3 BufferFull",
    ]
    assert svc.load(cron_id).buffered == [at("10:02:00"), at("10:03:00")]


def test_the_deadline_bounds_the_wait() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne", startingDeadlineSeconds=90))
    tick_minutes(svc, cron_id, 2)
    agg = svc.load(cron_id)
    # The scheduler comes back when the wait ends (10:03:30), and the 10:03 tick before.
    assert agg.next_due() == at("10:03:00")

    svc.tick([cron_id], at("10:03:00"))  # BufferFull: 10:02 still waits
    svc.tick([cron_id], at("10:03:30"))  # 10:02's deadline passes, the run still active

    assert decisions(svc, cron_id) == [
        "fire 10:01:00 schedule",
        "skip 10:03:00..10:03:00 x1 BufferFull",
        "skip 10:02:00..10:02:00 x1 DeadlineExceeded",
    ]
    assert svc.load(cron_id).buffered == []
    # A run ending after the deadline starts nothing old.
    end(svc, cron_id, child(at("10:01:00")), "10:03:40")
    assert [d for d in decisions(svc, cron_id) if d.endswith("buffer")] == []


def test_the_waiting_tick_runs_if_the_run_ends_within_the_deadline() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne", startingDeadlineSeconds=90))
    tick_minutes(svc, cron_id, 2)
    end(svc, cron_id, child(at("10:01:00")), "10:03:20")  # before 10:02 + 90 s
    assert decisions(svc, cron_id)[-1] == "fire 10:02:00 buffer"


def test_a_run_that_never_ends_keeps_the_buffer_within_the_cap() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferAll", max_buffer=3))
    for m in range(2, 60):
        svc.tick([cron_id], at(f"10:{m:02d}:00"))
        assert len(svc.load(cron_id).buffered) <= 3
    agg = svc.load(cron_id)
    assert agg.decided_until == at("10:59:00")  # every tick decided: waiting or skipped
    assert len(of_type(svc, cron_id, "TickBuffered")) == 3


def test_a_schedule_change_closes_the_buffer() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne"))
    tick_minutes(svc, cron_id, 2)
    svc.apply(buffered("BufferOne", schedules=["*/5 * * * *"]), at("10:02:30"))
    skips = of_type(svc, cron_id, "ScheduleSkipped")
    assert (skips[0].scheduled_time, skips[0].reason) == (at("10:02:00"), "ScheduleChanged")
    assert svc.load(cron_id).buffered == []


def test_the_buffer_survives_a_snapshot() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferAll"))
    tick_minutes(svc, cron_id, 2, 3)
    agg = svc.load(cron_id)
    state = agg.snapshot_state()
    assert state["buffered"] == [at("10:02:00"), at("10:03:00")]
    svc.take_snapshot(cron_id)
    assert svc.load(cron_id).buffered == [at("10:02:00"), at("10:03:00")]


def test_a_snapshot_of_before_the_buffer_upcasts_to_an_empty_one() -> None:
    from cronsource.domain.cronworkflow import CronWorkflow

    state: dict[str, Any] = {}
    CronWorkflow.upcast_v3_v4(state)
    assert state == {"buffered": []}


# --------------------------------------------------------------------------- admission


@pytest.mark.parametrize(
    ("annotations", "spec", "expected"),
    [
        ({OVERLAP: "Sideways"}, {}, "cronsource.io/overlap must be BufferOne or BufferAll"),
        ({OVERLAP: "BufferOne"}, {"concurrencyPolicy": "Allow"}, "needs concurrencyPolicy"),
        ({OVERLAP: "BufferAll"}, {"concurrencyPolicy": "Replace"}, "Replace"),
        ({OVERLAP: "BufferAll", MAX_BUFFER: "0"}, {}, "(value: '0')"),
        ({OVERLAP: "BufferAll", MAX_BUFFER: "-1"}, {}, "(value: '-1')"),
        ({OVERLAP: "BufferAll", MAX_BUFFER: "lots"}, {}, "(value: 'lots')"),
        ({OVERLAP: "BufferAll", MAX_BUFFER: "1001"}, {}, "from 1 to 1000"),
    ],
)
def test_admission_refuses_bad_buffer_settings_in_one_line(
    annotations: dict[str, str], spec: dict[str, Any], expected: str
) -> None:
    spec.setdefault("concurrencyPolicy", "Forbid")
    with pytest.raises(ManifestError) as e:
        manifest(annotations=annotations, **spec)
    [line] = e.value.problems
    assert expected in line
    assert ("cronsource.io/overlap" in line) or ("cronsource.io/max-buffer" in line)


# --------------------------------------------------------------------------- the pure rule

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


@given(
    offsets=st.lists(st.integers(0, 3600), min_size=1, max_size=30, unique=True),
    waiting=st.integers(0, 5),
    cap=st.integers(1, 5),
    deadline=st.sampled_from([None, 60, 600]),
    late=st.integers(0, 4000),
)
def test_every_tick_gets_one_decision_and_the_buffer_never_exceeds_its_cap(
    offsets: list[int], waiting: int, cap: int, deadline: int | None, late: int
) -> None:
    ticks = sorted(T0 + timedelta(seconds=o) for o in offsets)
    now = ticks[-1] + timedelta(seconds=late)
    pol = TickPolicy("Forbid", timedelta(seconds=deadline) if deadline else None)
    out = buffer_ticks(ticks, now, pol, min(waiting, cap), "BufferAll", cap)

    assert min(waiting, cap) + len(out.buffered) <= cap
    covered = list(out.buffered)
    for s in out.skipped:
        inside = [t for t in ticks if s.first <= t <= s.last]
        assert len(inside) == s.count and not set(inside) & set(out.buffered)
        covered += inside
    assert sorted(covered) == ticks  # exactly one decision each
    for t in out.buffered:  # only a tick that could run now waits
        assert (t == ticks[-1] and now - t < pol.late_tolerance) or (
            deadline is not None and now < t + timedelta(seconds=deadline)
        )


# --------------------------------------------------------------------------- the aggregate

ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.sampled_from([0, 1, 29, 30, 31, 59, 60, 61, 125, 900])),
        st.tuples(st.just("complete"), st.integers(0, 3)),
        st.tuples(st.just("vanish"), st.integers(0, 3)),
        st.tuples(st.just("trigger"), st.integers(0, 3)),
        st.tuples(st.just("backfill"), st.integers(0, 600)),
    ),
    max_size=40,
)


@given(
    actions=ACTIONS,
    mode=st.sampled_from(["BufferOne", "BufferAll"]),
    cap=st.integers(1, 4),
    deadline=st.sampled_from([None, 45, 90, 600]),
)
def test_buffered_ticks_are_decided_once_never_twice_and_within_the_cap(
    actions: list[tuple[str, int]], mode: str, cap: int, deadline: int | None
) -> None:
    """From the log alone, whatever the runs do: every tick from creation to the last decided
    one has exactly one decision (a fire, a skip, or a wait in the buffer that ends in exactly
    one fire from it or skip); no tick fires twice; at most the cap wait at once; a tick from
    the buffer starts only with no run active, oldest first, within its deadline."""
    svc = service()
    spec: dict[str, Any] = {}
    if deadline is not None:
        spec["startingDeadlineSeconds"] = deadline
    cron_id, _ = svc.apply(buffered(mode, cap if mode == "BufferAll" else None, **spec), T0)
    limit = cap if mode == "BufferAll" else 1
    now = T0
    for i, (kind, n) in enumerate(actions):
        agg = svc.load(cron_id)
        if kind == "advance":
            now += timedelta(seconds=n)
            svc.tick([cron_id], now)
        elif kind == "trigger":
            svc.trigger(cron_id, now, f"r{i}")
        elif kind == "backfill":
            svc.backfill(cron_id, now - timedelta(seconds=n), now, now)
        elif agg.active:
            run = sorted(agg.active)[n % len(agg.active)]
            if kind == "complete":
                svc.run_completed(cron_id, run, "Succeeded", now, now)
            else:
                svc.run_vanished(cron_id, run, now)
        assert len(svc.load(cron_id).buffered) <= limit
    svc.tick([cron_id], now)
    if deadline is not None:  # after a decision at `now`, no tick waits past its deadline
        assert all(now < t + timedelta(seconds=deadline) for t in svc.load(cron_id).buffered)

    decided: dict[datetime, list[str]] = {}
    waiting: list[datetime] = []
    fired: set[datetime] = set()
    active: set[str] = set()
    for e in events(svc, cron_id):
        kind = event_type(e)
        if kind == "TickBuffered":
            assert active, "buffered with no run active"
            waiting.append(e.scheduled_time)
            assert len(waiting) <= limit
            decided.setdefault(e.scheduled_time, []).append("wait")
        elif kind == "ScheduleFired":
            active.add(e.workflow_name)
            if e.trigger == "manual":
                continue
            t = e.scheduled_time
            assert t not in fired, f"{t} fired twice"
            fired.add(t)
            if e.trigger == "backfill":
                # Only a tick before creation or decided (not one waiting) is backfilled.
                assert t <= T0 or (t in decided and t not in waiting), f"backfill of {t}"
                continue
            if e.trigger == "buffer":
                assert waiting and waiting[0] == t, "not the oldest waiting tick"
                assert active == {e.workflow_name}, "started beside a run"
                waiting.pop(0)
                if deadline is not None:
                    assert e.fired_at < t + timedelta(seconds=deadline)
                assert decided.get(t) == ["wait"]
            else:
                assert t not in decided, f"{t} decided twice"
            decided.setdefault(t, []).append("fire")
        elif kind == "ScheduleSkipped":
            if e.scheduled_time in waiting:
                waiting.remove(e.scheduled_time)
                decided[e.scheduled_time].append("skip")
                continue
            agg = svc.load(cron_id)
            first = e.scheduled_time - timedelta(microseconds=1)
            for t in agg.schedule.ticks_between(first, e.last_scheduled_time):
                assert t not in decided, f"{t} decided twice"
                decided[t] = ["skip"]
        elif kind in ("RunCompleted", "RunVanished"):
            active.discard(e.workflow_name)
    agg = svc.load(cron_id)
    expected = list(agg.schedule.ticks_between(T0, agg.decided_until))
    assert sorted(decided) == expected
    for t, ds in decided.items():
        assert ds in (["fire"], ["skip"], ["wait", "fire"], ["wait", "skip"], ["wait"]), ds
        assert ds != ["wait"] or t in agg.buffered
    assert agg.buffered == waiting


GOLDEN_V3 = Path(__file__).resolve().parents[1] / "golden" / "snapshot-v3.json"


def test_a_snapshot_of_state_v3_loads_through_the_upcaster(tmp_path: Path) -> None:
    """tests/golden/snapshot-v3.json was written by the code just before buffered overlap
    (aggregate state v3: no buffer), with the events after it (the 10:30 run starts). The
    load upcasts it to an empty buffer and replays those events; then the annotation
    arrives, the 10:40 tick waits behind the 10:30 run and starts when it ends."""
    golden = json.loads(GOLDEN_V3.read_text())
    engine = bootstrap(f"sqlite:///{tmp_path}/g.db")
    try:
        svc = engine.service
        cron_id = store_golden(svc, golden)
        want = golden["expect"]
        agg = svc.load(cron_id)
        assert agg.version == want["version"] and agg.buffered == []
        assert sorted(agg.active) == want["active"]
        assert agg.decided_until.isoformat() == want["decided_until"]
        assert agg.succeeded == want["succeeded"]

        t0 = datetime(2026, 6, 1, 10, 30, 30, tzinfo=UTC)
        svc.apply(
            manifest(
                "golden3",
                annotations={OVERLAP: "BufferOne"},
                schedules=["*/10 * * * *"],
                concurrencyPolicy="Forbid",
                startingDeadlineSeconds=300,
            ),
            t0,
        )
        tick = datetime(2026, 6, 1, 10, 40, tzinfo=UTC)
        svc.tick([cron_id], tick)
        assert svc.load(cron_id).buffered == [tick]
        end = tick + timedelta(seconds=30)
        svc.run_completed(cron_id, want["active"][0], "Succeeded", end, end)
        last = of_type(svc, cron_id, "ScheduleFired")[-1]
        assert (last.scheduled_time, last.trigger) == (tick, "buffer")
    finally:
        engine.close()


# --------------------------------------------------------------------------- the edges


def test_why_explains_a_tick_waiting_in_the_buffer() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne", startingDeadlineSeconds=90))
    tick_minutes(svc, cron_id, 2)
    out = explain(svc.load(cron_id), at("10:02:00"), [])
    assert out["outcome"] == "Pending"
    assert "waiting in the buffer (cronsource.io/overlap: BufferOne)" in out["explanation"]
    assert child(at("10:01:00")) in out["explanation"]
    assert "2026-05-04T10:03:30Z" in out["explanation"]  # the end of its wait


def test_history_shows_what_a_waiting_tick_waits_for() -> None:
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne"))
    tick_minutes(svc, cron_id, 2)
    agg = svc.load(cron_id)
    [ev] = of_type(svc, cron_id, "TickBuffered")
    row = audit_row(ev, agg, 1).as_event()
    assert row["behind"] == [child(at("10:01:00"))]
    assert detail_cell(row) == f"waits for {child(at('10:01:00'))}"


def test_a_fire_from_the_buffer_is_held_to_its_deadline_by_the_dispatcher_and_the_commit() -> None:
    """The dispatcher creates a buffered fire's Workflow only within startingDeadlineSeconds
    of its tick, and a save of it is refused past that; without a deadline neither bounds it
    (the tick waited as long as the run did)."""
    svc = service()
    with_deadline = start_a_long_run(svc, buffered("BufferOne", startingDeadlineSeconds=90))
    agg = svc.load(with_deadline)
    assert start_deadline(agg, "buffer", timedelta(seconds=30)) == timedelta(seconds=90)
    svc.tick([with_deadline], at("10:02:00"))
    agg = svc.load(with_deadline)
    agg.run_completed(child(at("10:01:00")), "Succeeded", at("10:03:00"))
    assert [e.trigger for e in agg.pending_events if event_type(e) == "ScheduleFired"] == ["buffer"]
    assert commit_deadline([agg], timedelta(seconds=30)) == at("10:03:30")

    other = service()
    without = start_a_long_run(other, buffered("BufferOne"))
    assert start_deadline(other.load(without), "buffer", timedelta(seconds=30)) is None
    other.tick([without], at("10:02:00"))
    agg = other.load(without)
    agg.run_completed(child(at("10:01:00")), "Succeeded", at("10:30:00"))
    assert commit_deadline([agg], timedelta(seconds=30)) is None


def test_a_backfill_leaves_a_waiting_tick_to_the_buffer() -> None:
    """A waiting tick is past the watermark but not decided yet: a backfill over it does not
    run it, so it fires once, from the buffer."""
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne"))
    tick_minutes(svc, cron_id, 2)
    done = svc.backfill(cron_id, at("10:01:30"), at("10:02:30"), at("10:02:40"))
    assert at("10:02:00") not in done
    end(svc, cron_id, child(at("10:01:00")), "10:02:50")
    fires = [e.scheduled_time for e in of_type(svc, cron_id, "ScheduleFired")]
    assert fires.count(at("10:02:00")) == 1


def test_a_recovered_run_of_a_waiting_tick_takes_it_out_of_the_buffer() -> None:
    """A Workflow of a waiting tick exists with no fire in the log (a failover lost the fire
    from the buffer; recovery names it by its tick, trigger schedule, as adapters/runtime/
    recovery.py does): the recovery is that tick's decision, and the buffer never fires it."""
    svc = service()
    cron_id = start_a_long_run(svc, buffered("BufferOne"))
    tick_minutes(svc, cron_id, 2)
    agg = svc.load(cron_id)
    recovered = agg.recover_run(
        child(at("10:02:00")), at("10:02:00"), "schedule", at("10:02:50"), "lost", at("10:03:10")
    )
    svc.save(agg)
    assert recovered and svc.load(cron_id).buffered == []
    end(svc, cron_id, child(at("10:01:00")), "10:03:20")
    assert [e.trigger for e in of_type(svc, cron_id, "ScheduleFired")] == ["schedule"]
