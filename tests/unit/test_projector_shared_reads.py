"""The projections read and decode the log once where they follow it from the same positions
(adapters/runtime/projector.py `_pending`): the dispatcher thread takes the read model's
full reads, but never a short one, which could hide an event appended since."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import parse_manifest
from tests.instants import T0


def _engine(tmp_path: Path) -> tuple[Engine, Any, list[int]]:
    """An engine whose log holds 5 events (a Created, 4 fires), counting its log reads."""
    eng = bootstrap(
        f"sqlite:///{tmp_path / 's.db'}", target=LocalTarget(tmp_path / "wf", timedelta(days=1))
    )
    cron_id, _ = eng.service.apply(
        parse_manifest(
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "CronWorkflow",
                "metadata": {"name": "job", "namespace": "default"},
                "spec": {
                    "schedules": ["* * * * *"],
                    "workflowSpec": {
                        "entrypoint": "main",
                        "templates": [{"name": "main", "container": {"image": "busybox"}}],
                    },
                },
            }
        ),
        T0,
    )
    for k in range(1, 5):
        eng.service.tick([cron_id], T0 + timedelta(minutes=k))
    reads: list[int] = []
    recorder = eng.service.recorder
    select = recorder.select_notifications

    def counted(*args: Any, **kw: Any) -> Any:
        reads.append(kw.get("start", args[0] if args else 0))
        return select(*args, **kw)

    recorder.select_notifications = counted  # type: ignore[method-assign]
    return eng, cron_id, reads


def test_the_dispatcher_takes_the_read_models_full_reads(tmp_path: Path) -> None:
    eng, _, reads = _engine(tmp_path)
    at = T0 + timedelta(minutes=4)
    assert eng.projector.catch_up(at, batch=2, dispatch=False) == 5
    assert reads == [1, 3, 5]  # two full reads and the short one at the head
    reads.clear()
    eng.projector.dispatch(T0 + timedelta(minutes=1), batch=2)  # every fire in time
    assert reads == [5]  # only the short read is made again
    assert eng.projector.dispatched() == eng.projector.head() == 5
    assert len(list((tmp_path / "wf" / "default").glob("*.json"))) == 4
    eng.close()


def test_a_short_read_is_never_handed_on(tmp_path: Path) -> None:
    """An event appended after the read model's short read at the head is dispatched in the
    same catch-up: a catch-up reaches the head of the log as of its call."""
    eng, cron_id, reads = _engine(tmp_path)
    at = T0 + timedelta(minutes=4)
    eng.projector.catch_up(at, batch=10, dispatch=False)
    eng.service.tick([cron_id], T0 + timedelta(minutes=5))
    assert eng.projector.dispatch(T0 + timedelta(minutes=1), batch=10) == 6
    assert eng.projector.dispatched() == eng.projector.head() == 6
    assert len(list((tmp_path / "wf" / "default").glob("*.json"))) == 5
    eng.close()
