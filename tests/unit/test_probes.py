"""The readiness rule of `cronsource run`'s probes (adapters/entrypoints/probes.py) on a real SQLite
store in this process: the age of the loop's last turn. The probe server of a real `cronsource
run` subprocess over HTTP: tests/e2e/test_probes.py."""

from __future__ import annotations

import math
import time
from pathlib import Path

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.clock import SYSTEM_CLOCK
from cronsource.adapters.entrypoints.probes import Probes
from cronsource.adapters.infrastructure.shards import SoleOwner
from cronsource.adapters.runtime.loop import SchedulerLoop
from tests.probe_helpers import samples, total


def test_readiness_bounds_the_age_of_the_last_turn(tmp_path: Path) -> None:
    """The rule of `Probes.ready` on a real SQLite store, the loop's turn time set by hand."""
    engine = bootstrap(f"sqlite:///{tmp_path / 'c.db'}")
    loop = SchedulerLoop(engine, SoleOwner())
    probes = Probes(engine, loop, SYSTEM_CLOCK, max_turn_age=10)
    try:
        code, body = probes.ready()
        assert (code, body["status"], body["lastTurnAgeSeconds"]) == (503, "starting", None)
        assert probes.alive()[0] == 200  # starting up is alive
        loop.turn()
        code, body = probes.ready()
        assert (code, body["status"]) == (200, "ready")
        assert probes.alive() == (200, {"status": "ok"})
        loop.last_turn = time.monotonic() - 11
        code, body = probes.ready()
        assert (code, body["status"]) == (503, "turns stopped")
        assert body["lastTurnAgeSeconds"] > 10
        code, body = probes.alive()
        assert (code, body["status"]) == (503, "turns stopped")
        found = samples(probes.scrape().decode())
        assert total(found, "cronsource_last_turn_age_seconds") > 10
        loop.last_turn = None
        assert math.isnan(
            total(samples(probes.scrape().decode()), "cronsource_last_turn_age_seconds")
        )
    finally:
        probes.close()
        engine.close()
