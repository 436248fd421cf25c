"""Run ends recorded in batches (`CronService.runs_ended`, what the run watchers of `run` and
`simulate` call): one transaction per batch, the log in the order the ends were given, and a
batch the store refuses recorded end by end, as one command each would have been."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import parse_manifest
from cronsource.domain.service import CronService, RunEnd, event_type
from tests.http_helpers import manifest
from tests.instants import T0

TICK = T0 + timedelta(hours=1)  # the first tick of `0 * * * *` after T0
LATER = TICK + timedelta(minutes=5)


def fired(tmp_path: Path, names: list[str]) -> tuple[Engine, dict[str, tuple[UUID, str]]]:
    """A SQLite store where each CronWorkflow fired once: its id and the run's name."""
    engine = bootstrap(f"sqlite:///{tmp_path / 'r.db'}", create_tables=True)
    svc = engine.service
    ids = [svc.apply(parse_manifest(manifest(n, "0 * * * *")), T0)[0] for n in names]
    svc.tick(ids, TICK)
    runs = {}
    for name, cron_id in zip(names, ids, strict=True):
        (workflow,) = svc.load(cron_id).active
        runs[name] = (cron_id, workflow)
    return engine, runs


def count_appends(svc: CronService) -> list[int]:
    """Each append to the log, as the number of events it wrote."""
    appends: list[int] = []
    recorder: Any = svc.recorder
    insert = recorder.insert_events

    def counted(events: Any, **kwargs: Any) -> Any:
        appends.append(len(events))
        return insert(events, **kwargs)

    recorder.insert_events = counted
    return appends


def logged(svc: CronService, after: int) -> list[tuple[UUID, str]]:
    """(stream, event type) of the log after a position, in log order."""
    notes = svc.recorder.select_notifications(start=after + 1, limit=1000)
    return [(n.originator_id, event_type(svc.mapper.to_domain_event(n))) for n in notes]


def test_a_burst_of_run_ends_is_one_append_in_the_given_order(tmp_path: Path) -> None:
    engine, runs = fired(tmp_path, ["a", "b", "c"])
    svc = engine.service
    head = svc.recorder.max_notification_id()
    appends = count_appends(svc)
    order = ["c", "a", "b"]
    svc.runs_ended(
        [RunEnd(*runs[n], "Succeeded", TICK + timedelta(seconds=30)) for n in order], LATER
    )
    assert appends == [len(logged(svc, head))]  # one transaction for all of them
    completions = [cron_id for cron_id, kind in logged(svc, head) if kind == "RunCompleted"]
    assert completions == [runs[n][0] for n in order]
    for n in order:
        agg = svc.load(runs[n][0])
        assert not agg.active and agg.succeeded == 1
    assert svc.rejected_writes == 0


def test_a_second_end_of_one_cronworkflow_starts_another_batch(tmp_path: Path) -> None:
    engine, runs = fired(tmp_path, ["a", "b"])
    svc = engine.service
    (a, run_a), (b, run_b) = runs["a"], runs["b"]
    head = svc.recorder.max_notification_id()
    appends = count_appends(svc)
    # `a` ends, `b` ends, then `a`'s run is reported gone too (ignored: it ended already).
    svc.runs_ended(
        [RunEnd(a, run_a, "Failed", TICK), RunEnd(b, run_b, "Succeeded", TICK), RunEnd(a, run_a)],
        LATER,
    )
    assert len(appends) == 2
    kinds = [(cron_id, kind) for cron_id, kind in logged(svc, head) if kind.startswith("Run")]
    assert kinds == [(a, "RunCompleted"), (b, "RunCompleted"), (a, "RunVanished")]
    assert svc.load(a).failed == 1 and svc.load(b).succeeded == 1


def test_a_refused_batch_is_recorded_end_by_end(tmp_path: Path) -> None:
    engine, runs = fired(tmp_path, ["a", "b"])
    svc, other = engine.service, engine.replica()
    (a, run_a), (b, run_b) = runs["a"], runs["b"]
    svc.load(a)  # our copy of `a`, made stale by another writer's suspend:
    other.suspend(a, TICK, by="someone")
    ends = [RunEnd(a, run_a, "Succeeded", TICK), RunEnd(b, run_b, "Succeeded", TICK)]
    svc.runs_ended(ends, LATER)
    assert svc.rejected_writes == 0  # the copy was brought up to date before the save
    assert svc.load(a).suspended and svc.load(a).succeeded == 1 and svc.load(b).succeeded == 1


def test_a_stale_save_counts_one_rejected_write_per_stale_stream(tmp_path: Path) -> None:
    engine, runs = fired(tmp_path, ["a", "b", "c"])
    svc, other = engine.service, engine.replica()
    loaded: Any = svc._load_current

    def then_others_write(cron_ids: Any) -> Any:
        aggs = loaded(cron_ids)
        for n in ("a", "b"):  # after our load, before our save
            other.suspend(runs[n][0], TICK, by="someone")
        svc._load_current = loaded  # type: ignore[method-assign]
        return aggs

    svc._load_current = then_others_write  # type: ignore[method-assign]
    svc.runs_ended([RunEnd(*runs[n], "Succeeded", TICK) for n in ("a", "b", "c")], LATER)
    assert svc.rejected_writes == 2
    for n in ("a", "b", "c"):
        agg = svc.load(runs[n][0])
        assert agg.succeeded == 1 and not agg.active
    assert [svc.load(runs[n][0]).suspended for n in ("a", "b", "c")] == [True, True, False]
