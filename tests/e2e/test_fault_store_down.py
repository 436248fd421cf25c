"""SIGTERM stops a replica within 10 s while its store is down (issue 27, item 3).

Three `cronsource run` replicas share a PostgreSQL server the test starts; the server is
killed (SIGKILL of the postmaster: nothing listens any more, every session breaks), and each
replica gets SIGTERM at another moment of the outage: right away, while its pools wait for a
connection, and later. Each must exit 0 within SIGTERM_LIMIT: a step that reads waits for a
pooled connection a few seconds at most, and once SIGTERM has come no other step starts. (It
once took 30 s: every step of the turn in flight waited 10 s for a connection, twice.)

A server that hangs instead (every one of its processes stopped with SIGSTOP: connections
stay open, nothing answers) leaves a query in flight waiting with no client-side limit; the
replica then exits STOP_GRACE_SECONDS after SIGTERM, with EXIT_STOP_OVERDUE, as a crash would.

Then the server is started again (or woken) on the same data and a replica runs on it, and
nothing may be lost or doubled: no gap, no Workflow twice or without its event, every tick one
decision, the read model equal to a rebuild. The figures are printed (run with -s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.loop import SchedulerLoop
from cronsource.adapters.runtime.settings import EXIT_STOP_OVERDUE, STOP_GRACE_SECONDS
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
    wait_for,
    workflow_files,
    write_manifests,
)
from tests.instants import T0

#: Kubernetes' grace period is 30 s; issue 27 asks for 10 s, store or no store.
SIGTERM_LIMIT = 10.0
#: When each replica gets SIGTERM, in seconds after the server was killed.
SIGTERM_AFTER = (0.5, 2.5, 5.0)
CRONS = 20


def say(*parts: object) -> None:
    print("[store down]", *parts, flush=True)


def start_replicas(url: str, tmp_path: Path, count: int) -> tuple[list[Replica], Path]:
    migrate(url)
    docs = [
        cron_manifest(f"s{i:02d}", "@every 1s", successfulJobsHistoryLimit=1000)
        for i in range(CRONS)
    ]
    manifest = write_manifests(tmp_path / "crons.yaml", docs)
    wf_dir = tmp_path / "workflows"
    replicas = [Replica(f"r{i}", url, manifest, wf_dir, tmp_path) for i in range(count)]
    for r in replicas:
        r.start()
    for r in replicas:
        r.wait_running()
    wait_for("three rounds of fires", lambda: len(workflow_files(wf_dir)) >= 3 * CRONS, 60)
    return replicas, wf_dir


def sigterm_each(
    replicas: list[Replica], since: float, after: tuple[float, ...]
) -> dict[str, tuple[int | None, float]]:
    """SIGTERM each replica `after[i]` seconds past `since` (monotonic); returns each one's
    exit status and seconds from its SIGTERM to its exit (status None: still running
    SIGTERM_LIMIT + 20 s later; it is then killed, its stacks in its log)."""
    sent: dict[str, float] = {}
    exited: dict[str, tuple[int | None, float]] = {}
    pending = dict(zip((r.name for r in replicas), after, strict=True))
    while len(exited) < len(replicas):
        now = time.monotonic()
        for r in replicas:
            assert r.proc is not None
            if r.name in pending and now - since >= pending[r.name]:
                assert r.running(), f"{r.name} died with the store:\n{r.tail()}"
                r.proc.send_signal(signal.SIGTERM)
                sent[r.name] = now
                del pending[r.name]
            if r.name in sent and r.name not in exited:
                rc = r.proc.poll()
                if rc is not None or now - sent[r.name] > SIGTERM_LIMIT + 20:
                    exited[r.name] = (rc, now - sent[r.name])
                    if rc is None:
                        r.proc.send_signal(signal.SIGUSR1)
                        time.sleep(0.5)
                        r.kill()
                    else:
                        r.exits.append(rc)
        time.sleep(0.02)
    return exited


def restart_and_check(url: str, wf_dir: Path, tmp_path: Path, again: Replica) -> dict[str, Any]:
    """A replica starts on the store that is back, decides a round and stops; then every
    invariant must hold. (The test server commits asynchronously, as `synchronous_commit =
    off` does: a crash may have lost the last fires whose Workflows exist; the replica records
    those as recovered before it decides anything, adapters/runtime/recovery.py.)"""
    before = len(workflow_files(wf_dir))
    again.start().wait_running()
    wait_for(
        "a round of fires after the restart",
        lambda: len(workflow_files(wf_dir)) >= before + CRONS,
        30,
    )
    assert again.terminate() == 0, again.tail()
    final_catch_up(url, wf_dir)
    engine = bootstrap(url)
    try:
        recorder: Any = engine.service.recorder
        gaps = recorder.gaps()
        assert not gaps, f"streams with holes: {gaps[:5]}"
        events = all_events(engine)
        logs = read_logs(engine, events)
        summary = check_decisions(logs)
        files = check_workflow_files(wf_dir, logs)
        compared = check_read_model(engine, events, tmp_path / "rebuilt.db")
    finally:
        engine.close()
    return {
        "ticks decided": sum(
            int((summary.last_decided[lg.cron_id] - lg.created) / lg.period) for lg in logs.values()
        ),
        "fires": summary.fires,
        # recovered: fires the crash lost whose Workflows existed
        "fires by trigger": dict(summary.fires_by_trigger),
        "skipped ticks by reason": dict(summary.skipped_ticks_by_reason),
        "Workflows": files,
        "read model equal to a rebuild, events": compared,
    }


@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_sigterm_stops_a_replica_within_10s_while_the_store_is_down(tmp_path: Path) -> None:
    t_test = time.monotonic()
    server = pgserver.start_server()
    replicas: list[Replica] = []
    try:
        replicas, wf_dir = start_replicas(server.url, tmp_path, len(SIGTERM_AFTER))
        pgserver.kill_postmaster(server.datadir)
        exited = sigterm_each(replicas, time.monotonic(), SIGTERM_AFTER)
        say(
            {
                r.name: {
                    "SIGTERM after the kill s": SIGTERM_AFTER[i],
                    "exit": exited[r.name][0],
                    "exited after SIGTERM s": round(exited[r.name][1], 2),
                }
                for i, r in enumerate(replicas)
            }
        )
        slow = {
            name: (rc, round(took, 1))
            for name, (rc, took) in exited.items()
            if rc != 0 or took > SIGTERM_LIMIT
        }
        assert not slow, f"not exited 0 within {SIGTERM_LIMIT:g}s of SIGTERM: {slow}\n" + "\n".join(
            f"--- {r.name}\n{r.tail(80)}" for r in replicas if r.name in slow
        )
        for r in replicas:
            assert "Traceback" not in r.log(), r.tail()
        pgserver.start(server.datadir)
        figures = restart_and_check(server.url, wf_dir, tmp_path, replicas[0])
        say({**figures, "test s": round(time.monotonic() - t_test)})
    finally:
        for r in replicas:
            r.cleanup()
        server.stop()


def server_processes(datadir: str) -> list[int]:
    """The postmaster and its children (backends, WAL writer, checkpointer ...)."""
    with open(os.path.join(datadir, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    children = subprocess.run(
        ["pgrep", "-P", str(postmaster)], capture_output=True, text=True, check=False
    ).stdout.split()
    return [postmaster, *map(int, children)]


@pytest.mark.postgres
@pytest.mark.timeout(180)
def test_sigterm_stops_a_replica_within_10s_while_the_store_hangs(tmp_path: Path) -> None:
    """A server that stops answering without closing anything (every one of its processes
    stopped, as a frozen machine or a network that drops packets looks to a client): a query
    in flight waits with no client-side limit. The replica exits anyway, STOP_GRACE_SECONDS
    after SIGTERM, with EXIT_STOP_OVERDUE and a line saying why; nothing is lost."""
    t_test = time.monotonic()
    server = pgserver.start_server()
    replicas: list[Replica] = []
    frozen: list[int] = []
    try:
        replicas, wf_dir = start_replicas(server.url, tmp_path, 1)
        frozen = server_processes(server.datadir)
        for pid in frozen:  # the postmaster first: it forks nothing new after
            os.kill(pid, signal.SIGSTOP)
        # Two seconds: the replica's turn (every half second) now waits on a query.
        exited = sigterm_each(replicas, time.monotonic(), (2.0,))
        rc, took = exited[replicas[0].name]
        log = replicas[0].log()
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        frozen = []
        say(
            {
                "SIGTERM after the server stopped answering s": 2.0,
                "exit": rc,
                "exited after SIGTERM s": round(took, 2),
            }
        )
        assert rc == EXIT_STOP_OVERDUE and took <= SIGTERM_LIMIT, (rc, took, replicas[0].tail())
        assert f"still not stopped {STOP_GRACE_SECONDS:g}s after the signal" in log, log[-3000:]
        figures = restart_and_check(server.url, wf_dir, tmp_path, replicas[0])
        say({**figures, "test s": round(time.monotonic() - t_test)})
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        for r in replicas:
            r.cleanup()
        server.stop()


def test_the_loop_starts_no_step_once_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule behind the above, on a virtual clock: the step during which SIGTERM comes is
    the last of its turn."""
    engine = bootstrap("memory:")
    owner = SoleOwner()
    loop = SchedulerLoop(engine, owner, clock=VirtualClock(T0), heartbeat=False)
    ran: list[str] = []

    def rebalance() -> None:
        ran.append("rebalance")
        loop.stop_event.set()  # SIGTERM while this step runs

    def schedule_once(now: datetime) -> int:
        ran.append("schedule")
        return 0

    monkeypatch.setattr(owner, "rebalance", rebalance)
    monkeypatch.setattr(loop, "schedule_once", schedule_once)
    try:
        loop.turn()
        assert ran == ["rebalance"]
        loop.stop_event.clear()
        loop._last_rebalance = None
        ran.clear()
        monkeypatch.setattr(owner, "rebalance", lambda: ran.append("rebalance"))
        loop.turn()  # not stopping: every step
        assert ran == ["rebalance", "schedule"]
    finally:
        engine.close()
