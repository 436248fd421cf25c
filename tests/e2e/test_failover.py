"""Failover between two real PostgreSQL servers under a running replica (issue 27, items 1-2).

The test suite starts a primary and a streaming standby. A `cronsource run` works on the
primary; the primary is killed with SIGKILL and the standby promoted at the primary's address
(as a service or a virtual IP moves), while the replica keeps running and reconnects.

- Asynchronous standby (Patroni's and CloudNativePG's default): the standby stopped receiving
  a few seconds before the crash, so the promoted log has lost its last commits while the
  Workflows of those fires exist. The replica's copies are ahead of that log: no stream may
  get a gap, no Workflow may be created twice, every Workflow must have an event (the lost
  ones come back as RunRecovered) and every tick exactly one decision.
- Synchronous standby: nothing acknowledged is lost, so nothing is recovered either.

Each test prints its figures (expected ticks, fires, skips by reason, Workflows, recovery).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from tests import pgserver
from tests.faults.harness import (
    Replica,
    all_events,
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

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

CRONS = 20
PERIOD = 2  # seconds: @every 2s
#: How long the primary keeps committing after the asynchronous standby stopped receiving:
#: the tail the failover loses (about CRONS * LOST_SECONDS / PERIOD fires and their Workflows).
LOST_SECONDS = 5.0


def say(*parts: object) -> None:
    print("[failover]", *parts, flush=True)


def fires_since(url: str, since: float) -> int:
    engine = bootstrap(url)
    try:
        return sum(
            1
            for _, ev in all_events(engine)
            if type(ev).__name__ == "ScheduleFired" and ev.fired_at.timestamp() > since
        )
    finally:
        engine.close()


def run_failover(tmp_path: Path, *, synchronous: bool) -> dict[str, Any]:
    t_test = time.monotonic()
    primary = pgserver.start_server()
    standby: pgserver.PgHandle | None = None
    replica: Replica | None = None
    try:
        url = primary.url
        migrate(url)
        standby = pgserver.start_standby(primary, synchronous=synchronous)
        docs = [
            cron_manifest(f"fo-{i}", f"@every {PERIOD}s", successfulJobsHistoryLimit=1000)
            for i in range(CRONS)
        ]
        manifest = write_manifests(tmp_path / "crons.yaml", docs)
        wf_dir = tmp_path / "workflows"
        replica = Replica("solo", url, manifest, wf_dir, tmp_path)
        replica.start().wait_running()
        t0 = time.time()
        wait_for("fires on the primary", lambda: fires_since(url, t0) >= 3 * CRONS, 60)

        if not synchronous:
            # The standby stops receiving: what the primary commits from now on is the tail
            # a failover loses (its Workflows are created all the same).
            pgserver.stop_server(standby.datadir)
            lost_from = utcnow()
            time.sleep(LOST_SECONDS)
        files_before = len(workflow_files(wf_dir))
        crash = utcnow()
        pgserver.kill_postmaster(primary.datadir)
        assert replica.running(), f"the replica died with the primary:\n{replica.tail()}"
        pgserver.take_over(standby, primary)
        promoted = utcnow()
        say(
            f"primary killed, standby promoted {(promoted - crash).total_seconds():.1f}s later"
            + ("" if synchronous else f"; it stopped receiving at {lost_from:%H:%M:%S}")
        )
        wait_for(
            "fires on the promoted standby",
            lambda: fires_since(url, promoted.timestamp()) >= 3 * CRONS,
            60,
            0.25,
        )
        first_after = utcnow()
        time.sleep(4)
        rc = replica.terminate()
        assert rc == 0, f"exit status {rc} after SIGTERM:\n{replica.tail()}"

        final_catch_up(url, wf_dir)
        engine = bootstrap(url)
        try:
            recorder: Any = engine.service.recorder
            gaps = recorder.gaps()
            assert not gaps, f"streams with holes after the failover: {gaps[:5]}"
            events = all_events(engine)
            logs = read_logs(engine, events)
            summary = check_decisions(logs)  # each tick exactly one decision, none twice
            files = check_workflow_files(wf_dir, logs)  # one file per fire, none without
            check_read_model(engine, events, tmp_path / "rebuilt.db")
        finally:
            engine.close()
        recovered = [f for lg in logs.values() for f in lg.fires if f.trigger == "recovered"]
        expected_ticks = sum(
            int((max(lg.decision_times()) - lg.created) / timedelta(seconds=PERIOD))
            for lg in logs.values()
        )
        figures = {
            "synchronous": synchronous,
            "expected_ticks": expected_ticks,
            "fires": summary.fires,
            "fires_by_trigger": dict(summary.fires_by_trigger),
            "skipped_ticks_by_reason": dict(summary.skipped_ticks_by_reason),
            "workflows": files,
            "workflows_before_crash": files_before,
            "recovered": len(recovered),
            "promotion_s": round((promoted - crash).total_seconds(), 1),
            "first_fire_after_promotion_s": round((first_after - promoted).total_seconds(), 1),
            "rejected_writes": replica.stats().get("rejected_writes"),
            "test_s": round(time.monotonic() - t_test),
        }
        say(figures)
        log = replica.log()
        figures["identity_changed"] = "the store is another one now" in log
        return figures
    finally:
        if replica is not None:
            replica.cleanup()
        if standby is not None:
            standby.stop()
        primary.stop()


def test_failover_to_an_asynchronous_standby_loses_the_tail_and_recovers_its_runs(
    tmp_path: Path,
) -> None:
    figures = run_failover(tmp_path, synchronous=False)
    # The promoted log lost fires whose Workflows exist: they come back as recoveries, and
    # the checks above found every Workflow with an event, every tick with one decision.
    assert figures["recovered"] > 0, "the failover lost nothing: the test proves nothing"
    assert figures["identity_changed"], "the replica did not notice the store changed"


def test_failover_to_a_synchronous_standby_loses_nothing(tmp_path: Path) -> None:
    figures = run_failover(tmp_path, synchronous=True)
    assert figures["recovered"] == 0, "a synchronous standby lost an acknowledged fire"
    reasons = Counter(figures["skipped_ticks_by_reason"])
    say(f"skips after a synchronous failover: {dict(reasons)}")
