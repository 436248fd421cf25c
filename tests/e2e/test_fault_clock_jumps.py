"""The wall clock of a running `cronsource run` stepped by +2 h and by -1 h, as an NTP step or an
operator's `date -s` does it (issue 27, "Done when"; tests/unit/test_clock_jumps.py is the same rule
on a virtual clock).

The replica is a real process on a real PostgreSQL server; its wall clock is libfaketime's
(Debian package `faketime`, installed by scripts/test.sh), read from a timestamp file the test
rewrites while the replica runs (FAKETIME_TIMESTAMP_FILE, re-read at least once a second with
FAKETIME_CACHE_DURATION=1: a step shows within a second, and the test lets the replica run
SETTLE seconds after each). Not FAKETIME_NO_CACHE=1: libfaketime then reads the file at every
clock read, 4,400 times a second in an idle replica, which kept a core busy, took the replica
11 s to start where it takes 0.6 s, and left its probe server without an answer in 5 s.
FAKETIME_DONT_FAKE_MONOTONIC=1 leaves the monotonic clock alone, so only the wall clock jumps.
The server's clock is not faked: leases are judged by the server's clock and by the
replica's monotonic clock (adapters/leases.py), so a replica whose wall clock jumps must keep
its shards; the tests check that it does.

- +2 h: every tick of the skipped two hours gets exactly one decision at the first decision
  after the jump, as many as the schedule's arithmetic says (`@every P` ticks at created +
  k*P): missed (DeadlineExceeded; CatchupLimit within a startingDeadlineSeconds), the latest
  on time if it is; then the ticks go on, on time.
- -1 h: nothing is decided twice and nothing is decided while the clock is behind; the replica
  logs the backward step and counts it (cronsource_clock_backward_jumps_total 1 on its
  /metrics); once the clock is forward again the ticks go on with nothing lost.

Afterwards, as for every fault: no gap, no Workflow twice or without its event, every tick
exactly one decision by the catch-up rules for the time it was made, the read model equal to
a rebuild. The figures are printed (run with -s).
"""

from __future__ import annotations

import glob
import math
import os
import re
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.shards import SHARDS
from cronsource.domain.decisions import DEFAULT_LATE_TOLERANCE
from tests.faults.harness import (
    CronLog,
    Replica,
    Summary,
    advisory_locks,
    all_events,
    check_catch_up_rules,
    check_decisions,
    check_read_model,
    check_workflow_files,
    cron_manifest,
    final_catch_up,
    migrate,
    read_logs,
    utcnow,
    wait_for,
    workflow_files,
    write_manifests,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

#: Seconds the replica runs after each step of its clock: several ticks of the 2 s schedules.
SETTLE = 8.0
NAME = "faked"


def say(*parts: object) -> None:
    print("[clock jumps]", *parts, flush=True)


def libfaketime() -> str:
    """The multi-threaded libfaketime (a replica has several threads); Debian's path."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    assert found, "libfaketime is missing: apt-get install faketime (scripts/test.sh does)"
    return found[0]


class FakeWallClock:
    """The replica's wall clock: real time plus an offset the test sets while it runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = timedelta(0)
        self.step(timedelta(0))

    def step(self, offset: timedelta) -> datetime:
        """Set the offset; returns the replica's wall time at the step. The file is replaced
        at once: libfaketime reads it on every call and must never see it half written."""
        tmp = self.path.with_name(self.path.name + ".new")
        tmp.write_text(f"{int(offset.total_seconds()):+d}\n")
        os.replace(tmp, self.path)
        self.offset = offset
        return self.now()

    def now(self) -> datetime:
        return utcnow() + self.offset

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": libfaketime(),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }


def manifests(tmp_path: Path, extra: list[dict[str, Any]]) -> Path:
    docs = [
        cron_manifest(f"plain-{i}", "@every 2s", successfulJobsHistoryLimit=5000) for i in range(10)
    ] + [
        cron_manifest(
            f"deadline-{i}",
            "@every 2s",
            startingDeadlineSeconds=60,
            successfulJobsHistoryLimit=5000,
        )
        for i in range(5)
    ]
    return write_manifests(tmp_path / "crons.yaml", docs + extra)


def start(url: str, tmp_path: Path, manifest: Path, clock: FakeWallClock) -> Replica:
    migrate(url)
    run_args = ("--local-run-duration", "1s", "--http-port", "0")
    replica = Replica(
        NAME, url, manifest, tmp_path / "workflows", tmp_path, run_args=run_args, env=clock.env()
    )
    replica.start().wait_running()
    wait_for(
        "three rounds of fires",
        lambda: len(workflow_files(tmp_path / "workflows")) >= 45,
        60,
    )
    return replica


def holds_everything(url: str) -> bool:
    """The faked replica still holds every shard and the projector role: its lease was not
    taken for lapsed (the server's clock judges it)."""
    locks = advisory_locks(url)
    return len(locks.shards.get(NAME, ())) == SHARDS and locks.projector == NAME


def stop_and_check(
    url: str, tmp_path: Path, replica: Replica
) -> tuple[dict[str, CronLog], Summary]:
    rc = replica.terminate()
    assert rc == 0, f"exit status {rc} after SIGTERM:\n{replica.tail()}"
    log = replica.log()
    assert "LeaseLost" not in log and "giving up" not in log, (
        "a replica whose wall clock jumped lost its lease:\n" + replica.tail()
    )
    final_catch_up(url, tmp_path / "workflows")
    engine = bootstrap(url)
    try:
        recorder: Any = engine.service.recorder
        gaps = recorder.gaps()
        assert not gaps, f"streams with holes: {gaps[:5]}"
        events = all_events(engine)
        logs = read_logs(engine, events)
        summary = check_decisions(logs)  # every tick exactly one decision, none fired twice
        check_catch_up_rules(logs, DEFAULT_LATE_TOLERANCE)
        check_workflow_files(tmp_path / "workflows", logs)
        check_read_model(engine, events, tmp_path / "rebuilt.db")
    finally:
        engine.close()
    return logs, summary


def ticks_decided_at(log: CronLog, at: datetime) -> tuple[int, list[str]]:
    """How many ticks the decision(s) made at `at` covered, and what each was."""
    n, what = 0, []
    for f in log.fires:
        if f.fired_at == at:
            n += 1
            what.append(f.trigger)
    for s in log.skips:
        if s.at == at:
            n += s.count
            what.append(f"{s.reason}:{s.count}")
    return n, what


def ticks_before(log: CronLog, t: datetime) -> int:
    """The schedule's arithmetic: how many ticks (created + k*P, k >= 1) are at or before t."""
    return max(0, math.floor((t - log.created) / log.period))


def common_figures(
    logs: dict[str, CronLog], summary: Summary, stopped: datetime, tmp_path: Path
) -> dict[str, Any]:
    return {
        "expected ticks (creation to SIGTERM, the replica's clock)": sum(
            ticks_before(lg, stopped) for lg in logs.values()
        ),
        "ticks decided": sum(
            ticks_before(lg, summary.last_decided[lg.cron_id]) for lg in logs.values()
        ),
        "fires": summary.fires,
        "fires by trigger": dict(summary.fires_by_trigger),
        "skipped ticks by reason": dict(summary.skipped_ticks_by_reason),
        "Workflows": len(workflow_files(tmp_path / "workflows")),
    }


def test_a_wall_clock_stepped_forward_2h_decides_every_skipped_tick_once(
    pg_url: str, tmp_path: Path
) -> None:
    t_test = time.monotonic()
    clock = FakeWallClock(tmp_path / "faketime.rc")
    hourly_ish = [
        cron_manifest(f"minute-{i}", "@every 60s", successfulJobsHistoryLimit=5000)
        for i in range(5)
    ]
    replica = start(pg_url, tmp_path, manifests(tmp_path, hourly_ish), clock)
    try:
        assert wait_for("the replica to hold every shard", lambda: holds_everything(pg_url), 10)
        jumped = clock.step(timedelta(hours=2))
        time.sleep(SETTLE)
        held_after = holds_everything(pg_url)
        metrics = replica.metrics()
        stopped = clock.now()
        logs, summary = stop_and_check(pg_url, tmp_path, replica)
    finally:
        replica.cleanup()

    problems: list[str] = []
    jump_ticks: Counter[str] = Counter()
    first_fire_after: list[float] = []
    for lg in logs.values():
        decided = lg.decision_times()
        before = [t for t in decided if t < jumped]
        after = [t for t in decided if t >= jumped]
        if not after:
            problems.append(f"{lg.name}: nothing decided after the jump")
            continue
        first = after[0]
        # The ticks the first decision after the jump covers: every one after the last tick
        # decided before it, up to the latest due at that moment, and nothing else.
        k_before = max(
            [lg.tick_index(f.scheduled_time) for f in lg.fires if f.fired_at in before]
            + [lg.tick_index(s.last) for s in lg.skips if s.at in before]
            + [0]
        )
        want = ticks_before(lg, first) - k_before
        got, what = ticks_decided_at(lg, first)
        if got != want:
            problems.append(f"{lg.name}: {got} ticks decided at {first} ({what}), want {want}")
        if want < timedelta(hours=2) / lg.period:
            problems.append(f"{lg.name}: only {want} ticks in a jump of two hours")
        for w in what:
            reason, _, count = w.partition(":")
            jump_ticks[reason] += int(count or 1)
        fires_after = [f.fired_at for f in lg.fires if f.fired_at >= jumped]
        if fires_after:
            first_fire_after.append((min(fires_after) - jumped).total_seconds())
        # Then the ticks go on: decided lately, the fires after the jump on time.
        if summary.last_decided[lg.cron_id] < stopped - 2 * lg.period:
            problems.append(f"{lg.name}: not decided since {summary.last_decided[lg.cron_id]}")
    assert not problems, "the +2 h jump:\n" + "\n".join(problems[:20])

    figures = {
        **common_figures(logs, summary, stopped, tmp_path),
        "ticks decided at the first decision after the jump, by what": dict(jump_ticks),
        "first fire after the jump s": round(min(first_fire_after), 2),
        "replica still held every shard and the projector role": held_after,
        "leases lost": metrics["cronsource_leases_lost_total"],
        "test s": round(time.monotonic() - t_test),
    }
    say("+2 h:", figures)
    assert held_after and metrics["cronsource_leases_lost_total"] == 0
    assert metrics["cronsource_clock_backward_jumps_total"] == 0


def test_a_wall_clock_stepped_back_1h_decides_nothing_twice_and_says_so(
    pg_url: str, tmp_path: Path
) -> None:
    t_test = time.monotonic()
    clock = FakeWallClock(tmp_path / "faketime.rc")
    replica = start(pg_url, tmp_path, manifests(tmp_path, []), clock)
    try:
        assert wait_for("the replica to hold every shard", lambda: holds_everything(pg_url), 10)
        assert replica.metrics()["cronsource_clock_backward_jumps_total"] == 0
        stepped_back_at = clock.now()
        clock.step(timedelta(hours=-1))
        time.sleep(SETTLE)
        while_back = replica.metrics()
        held_while_back = holds_everything(pg_url)
        warnings = [line for line in replica.log().splitlines() if "moved back by" in line]
        returned = clock.step(timedelta(0))
        time.sleep(SETTLE)
        after = replica.metrics()
        stopped = clock.now()
        logs, summary = stop_and_check(pg_url, tmp_path, replica)
    finally:
        replica.cleanup()

    assert while_back["cronsource_clock_backward_jumps_total"] == 1, while_back
    assert after["cronsource_clock_backward_jumps_total"] == 1  # forward again: not counted
    assert len(warnings) == 1 and re.search(r"moved back by 3[56]\d\ds", warnings[0]), warnings
    assert held_while_back and after["cronsource_leases_lost_total"] == 0

    problems: list[str] = []
    caught_up: Counter[str] = Counter()
    first_fire_after: list[float] = []
    for lg in logs.values():
        decided = lg.decision_times()
        # Nothing was decided while the clock was an hour behind: such a decision would carry a
        # time an hour before the step (and its tick would be one decided already).
        behind = [t for t in decided if t < stepped_back_at - timedelta(minutes=30)]
        if behind:
            problems.append(f"{lg.name}: decided at {behind[0]} while the clock was behind")
        after_return = [t for t in decided if t >= returned]
        if not after_return:
            problems.append(f"{lg.name}: nothing decided after the clock came back")
            continue
        first = after_return[0]
        k_before = max(
            [lg.tick_index(f.scheduled_time) for f in lg.fires if f.fired_at < returned]
            + [lg.tick_index(s.last) for s in lg.skips if s.at < returned]
            + [0]
        )
        want = ticks_before(lg, first) - k_before
        got, what = ticks_decided_at(lg, first)
        if got != want:
            problems.append(f"{lg.name}: {got} ticks decided at {first} ({what}), want {want}")
        for w in what:
            reason, _, count = w.partition(":")
            caught_up[reason] += int(count or 1)
        fires_after = [f.fired_at for f in lg.fires if f.fired_at >= returned]
        if fires_after:
            first_fire_after.append((min(fires_after) - returned).total_seconds())
        if summary.last_decided[lg.cron_id] < stopped - 2 * lg.period:
            problems.append(f"{lg.name}: not decided since {summary.last_decided[lg.cron_id]}")
    assert not problems, "the -1 h step:\n" + "\n".join(problems[:20])

    figures = {
        **common_figures(logs, summary, stopped, tmp_path),
        "clock behind for s": SETTLE,
        "ticks decided when the clock came back, by what": dict(caught_up),
        "first fire after the clock came back s": round(min(first_fire_after), 2),
        "cronsource_clock_backward_jumps_total": after["cronsource_clock_backward_jumps_total"],
        "warning": warnings[0][warnings[0].find("the wall clock") :][:160],
        "replica held every shard while behind": held_while_back,
        "leases lost": after["cronsource_leases_lost_total"],
        "test s": round(time.monotonic() - t_test),
    }
    say("-1 h:", figures)
