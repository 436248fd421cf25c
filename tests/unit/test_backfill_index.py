"""What a backfill must not fire again (adapters/runtime/indexes.py `ViewIndex.fired_ticks`):
the audit's fired ticks plus the stream's events the status view has not projected. A
projection committed between the read model's two reads (the audit rows, the status version)
left the ticks it projected out of both, and a big backfill on PostgreSQL, beside a `run`
that projects, queued ticks that had fired and fired them a second time when its queue
drained (DESIGN section 3, invariant 1)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import parse_manifest
from tests.http_helpers import manifest
from tests.instants import T0


@pytest.mark.stores("sqlite", "postgres")
def test_a_projection_between_the_read_models_reads_hides_no_fired_tick(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = engine.service
    cron_id, _ = svc.apply(parse_manifest(manifest("etl", "0 * * * *")), T0)
    engine.projector.catch_up(T0)
    ticks = [T0 + timedelta(hours=k) for k in range(1, 6)]
    for t in ticks:
        svc.tick([cron_id], t + timedelta(seconds=1))  # in the log, not projected yet

    view = engine.view
    query = type(view)._query
    reads: list[str] = []

    def projected_after_the_first_read(self: Any, sql: str, args: Any = ()) -> list[Any]:
        rows = query(self, sql, args)
        if "cronsource_retention" not in sql:
            reads.append(sql)
            if len(reads) == 1:  # another process's projection commits between the two reads
                engine.projector.catch_up(ticks[-1] + timedelta(seconds=2))
        return rows

    monkeypatch.setattr(type(view), "_query", projected_after_the_first_read)
    fired = engine.index.fired_ticks(cron_id, ticks[0], ticks[-1])

    assert len(reads) == 2
    assert fired == set(ticks)
