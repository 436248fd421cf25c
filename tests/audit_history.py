"""A week of history for the audit views' examples (docs/audit.md, examples/python/).

The real engine (`cronsource run`'s runtime on a virtual clock, as `cronsource simulate` runs
it) over a store you keep: four CronWorkflows in two namespaces from Monday 2026-03-02 to
Sunday 2026-03-08 23:59 (UTC), with what an audit is asked about: runs that overlap under Forbid, a
report suspended for the quarter close and resumed, a three-hour outage, a schedule change, a
new image, failing runs, and a CronWorkflow deleted. Suspends and resumes say who and why, as
`cronsource suspend` and the HTTP API record them (a simulation records them as `simulate`).

    python -m tests.audit_history --store sqlite:///audit.db     # or a postgresql:// URL

The output in docs/audit.md is this history's; tests/integration/test_audit_docs.py checks that
it still is.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.entrypoints.simulate.orchestrator import Simulation
from cronsource.adapters.entrypoints.simulate.scenario import Action, load_scenario
from cronsource.adapters.entrypoints.simulate.target import SimTarget
from cronsource.domain.durations import parse_duration

START = datetime(2026, 3, 2, tzinfo=UTC)
END = datetime(2026, 3, 8, 23, 59, tzinfo=UTC)


def _cronworkflow(
    namespace: str,
    name: str,
    spec: dict[str, Any],
    image: str = "busybox:1.36",
    **annotations: str,
) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"team": namespace.removeprefix("team-")},
            "annotations": annotations,
        },
        "spec": {
            **spec,
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": image}}],
            },
        },
    }


# Each run takes as long as its annotation says (the simulated target's run duration).
ETL = _cronworkflow(
    "team-a",
    "etl",
    {"schedules": ["*/30 * * * *"], "concurrencyPolicy": "Forbid"},
    **{"cronsource.io/simulate-run-duration": "40m"},
)
ETL_EVERY_HOUR = _cronworkflow(
    "team-a",
    "etl",
    {"schedules": ["0 * * * *"], "concurrencyPolicy": "Forbid"},
    **{"cronsource.io/simulate-run-duration": "40m"},
)
BACKUP = _cronworkflow(
    "team-a",
    "backup",
    {"schedules": ["0 2 * * *"], "timezone": "Europe/Berlin", "startingDeadlineSeconds": 14400},
    **{
        "cronsource.io/simulate-run-duration": "25m",
        "cronsource.io/simulate-run-phase": "Failed",
    },
)
REPORT = _cronworkflow(
    "team-b",
    "report",
    {"schedules": ["0 9 * * 1-5"], "timezone": "America/New_York"},
    **{"cronsource.io/simulate-run-duration": "10m"},
)
SYNC = _cronworkflow(
    "team-b",
    "sync",
    {"schedules": ["15 * * * *"]},
    **{"cronsource.io/simulate-run-duration": "5m"},
)
SYNC_NEW_IMAGE = _cronworkflow(
    "team-b",
    "sync",
    {"schedules": ["15 * * * *"]},
    image="busybox:1.37",
    **{"cronsource.io/simulate-run-duration": "5m"},
)

SCENARIO: dict[str, Any] = {
    "start": START.isoformat(),
    "end": END.isoformat(),
    "runDuration": "1m",
    "cronWorkflows": [ETL, BACKUP, REPORT, SYNC],
    "actions": [
        {"at": "2026-03-03T16:20:00Z", "suspend": "team-b/report"},
        {"at": "2026-03-05T15:00:00Z", "resume": "team-b/report"},
        {"at": "2026-03-04T10:07:00Z", "apply": SYNC_NEW_IMAGE},
        {"at": "2026-03-05T17:00:00Z", "suspend": "team-b/sync"},
        {"at": "2026-03-05T18:30:00Z", "resume": "team-b/sync"},
        {"at": "2026-03-06T12:10:00Z", "apply": ETL_EVERY_HOUR},
        {"at": "2026-03-07T01:00:00Z", "outage": "3h"},
        {"at": "2026-03-08T20:00:00Z", "suspend": "team-a/backup"},
        {"at": "2026-03-08T21:00:00Z", "delete": "team-a/backup"},
    ],
}
#: Who suspended or resumed what, and why: (action, reference, at) -> (by, note).
WHO: dict[tuple[str, str, str], tuple[str, str]] = {
    ("suspend", "team-b/report", "2026-03-03T16:20:00Z"): (
        "alice",
        "quarter close: figures frozen",
    ),
    ("resume", "team-b/report", "2026-03-05T15:00:00Z"): ("alice", "books closed"),
    ("suspend", "team-b/sync", "2026-03-05T17:00:00Z"): ("cli", "vendor API down, INC-4411"),
    ("resume", "team-b/sync", "2026-03-05T18:30:00Z"): ("bob", ""),
    ("suspend", "team-a/backup", "2026-03-08T20:00:00Z"): ("api", "replaced by the new backup job"),
}


def _key(a: Action) -> tuple[str, str, str]:
    kind = "suspend" if a.suspend else "resume"
    ref = a.suspend or a.resume or ""
    return kind, ref, a.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _AttributedSimulation(Simulation):
    """The simulation, with suspends and resumes recorded as the people in WHO made them."""

    def _act(self, i: int, a: Action) -> None:
        if (a.suspend or a.resume) and _key(a) in WHO:
            by, note = WHO[_key(a)]
            cron_id = self._find(a.suspend or a.resume or "")
            if a.suspend:
                self.svc.suspend(cron_id, a.at, by=by, note=note)
            else:
                self.svc.resume(cron_id, a.at, by=by, note=note)
            return
        super()._act(i, a)


def fill(store: str) -> None:
    """Write the week into `store` (migrated, or an embedded one), through the real engine."""
    scenario = load_scenario(SCENARIO)
    target = SimTarget(parse_duration(scenario.run_duration), scenario.run_phase)
    engine = bootstrap(store, target=target, create_tables=True)
    try:
        _AttributedSimulation(scenario, engine, target).run()
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store", required=True, help="store URL (sqlite:///..., postgresql://...)"
    )
    fill(parser.parse_args().store)


if __name__ == "__main__":
    main()
