"""The audit's SQL views (docs/audit.md; issue 26 item 5): their columns are a contract.

Each `_v1` view must keep its column names, their order and their types: a BI dashboard or a
notebook that reads them must not break on upgrade. These tests pin them on SQLite and on a
real PostgreSQL, then make a small history through the real engine (apply, fires, a Forbid
skip, a suspend and resume, run completions, a run not started and a refused submission from
the real dispatcher over the local target, a spec change, a manual run, a delete) and check that
every view returns exactly what that history says, through the plain drivers a user would use.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import psycopg.conninfo
import pytest

from cronsource.adapters.bootstrap import bootstrap, migrate
from cronsource.adapters.infrastructure.localtarget import LocalTarget
from cronsource.adapters.infrastructure.readside import views
from cronsource.adapters.infrastructure.store.config import StoreConfig
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.cronworkflow import manual_workflow_name, workflow_name
from cronsource.domain.manifest import parse_manifest
from cronsource.projections.dispatch import NOT_STARTED_REASON

ROOT = Path(__file__).resolve().parents[2]

#: The contract, written out: what docs/audit.md promises, not what the code happens to say.
PINNED: dict[str, list[str]] = {
    "cronsource_decisions_v1": [
        "position",
        "namespace",
        "cron_workflow",
        "cron_workflow_id",
        "scheduled_time",
        "last_scheduled_time",
        "tick_count",
        "decided_at",
        "decision",
        "reason",
        "message",
        "workflow",
        "trigger",
        "replaced_workflows",
        "replica",
    ],
    "cronsource_workflows_v1": [
        "position",
        "namespace",
        "cron_workflow",
        "cron_workflow_id",
        "workflow",
        "scheduled_time",
        "fired_at",
        "trigger",
        "recovered",
        "phase",
        "finished_at",
        "message",
    ],
    "cronsource_cronworkflows_v1": [
        "cron_workflow_id",
        "namespace",
        "cron_workflow",
        "uid",
        "labels",
        "generation",
        "version",
        "deleted",
        "schedules",
        "timezone",
        "concurrency_policy",
        "starting_deadline_seconds",
        "suspended",
        "phase",
        "spec_error",
        "last_scheduled_time",
        "next_scheduled_time",
        "active_count",
        "succeeded",
        "failed",
    ],
    "cronsource_changes_v1": [
        "position",
        "namespace",
        "cron_workflow",
        "cron_workflow_id",
        "changed_at",
        "change",
        "changed_by",
        "note",
        "generation",
        "message",
    ],
}
TIMES = {
    "scheduled_time",
    "last_scheduled_time",
    "decided_at",
    "fired_at",
    "finished_at",
    "next_scheduled_time",
    "changed_at",
}
BOOLEANS = {"recovered", "deleted", "suspended"}
DOCUMENTS = {"replaced_workflows", "labels", "schedules"}
INTEGERS = {
    "position",
    "tick_count",
    "generation",
    "version",
    "starting_deadline_seconds",
    "active_count",
    "succeeded",
    "failed",
}
#: PostgreSQL's type of each kind of column (pg_type oids), as docs/audit.md states them.
PG_TYPES = {"timestamptz": 1184, "boolean": 16, "jsonb": 3802, "bigint": 20, "integer": 23}
#: SQLite has no timestamp type: ISO-8601 UTC text, fixed width so it sorts as time does.
SQLITE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def T(hhmmss: str) -> datetime:
    """An instant on Monday 2026-03-02 (UTC), the day of the history."""
    return datetime.fromisoformat(f"2026-03-02T{hhmmss}").replace(tzinfo=UTC)


# ------------------------------------------------------------------------- stores and rows


@dataclass(frozen=True)
class Store:
    url: str
    kind: str  # "sqlite" | "postgresql"
    schema: str = ""

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of `sql`, through the plain driver a user would use."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(StoreConfig.parse(self.url).sqlite_path)
            try:
                lite = conn.execute(sql)
                return [d[0] for d in lite.description], lite.fetchall()
            finally:
                conn.close()
        base = self.url.split("?")[0]
        options = f"-c search_path={self.schema}" if self.schema else ""
        with psycopg.connect(base, options=options) as pg:
            cur = pg.execute(sql)
            assert cur.description is not None
            return [d.name for d in cur.description], cur.fetchall()

    def pg_types(self, view: str) -> dict[str, int]:
        base = self.url.split("?")[0]
        options = f"-c search_path={self.schema}" if self.schema else ""
        with psycopg.connect(base, options=options) as pg:
            cur = pg.execute(f"SELECT * FROM {view} LIMIT 0")
            assert cur.description is not None
            return {d.name: d.type_code for d in cur.description}


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("postgresql-schema", marks=pytest.mark.postgres, id="postgresql in a schema"),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A migrated, empty store of each kind (PostgreSQL also in a schema of its own)."""
    if request.param == "sqlite":
        s = Store(f"sqlite:///{tmp_path}/cronsource.db", "sqlite")
    elif request.param == "postgresql":
        s = Store(request.getfixturevalue("pg_url"), "postgresql")
    else:
        url = request.getfixturevalue("pg_url")
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute('CREATE SCHEMA "audit"')
        s = Store(f"{url}?schema=audit", "postgresql", "audit")
    migrate(StoreConfig.parse(s.url))
    return s


def normal(store: Store, column: str, v: Any) -> Any:
    """A value as Python compares it, after checking it has the type the docs promise."""
    if v is None:
        return None
    sqlite = store.kind == "sqlite"
    if column in TIMES:
        if sqlite:
            assert isinstance(v, str) and SQLITE_TIME.fullmatch(v), (column, v)
            return datetime.fromisoformat(v.replace("Z", "+00:00"))
        assert isinstance(v, datetime) and v.utcoffset() is not None, (column, v)
        return v.astimezone(UTC)
    if column in BOOLEANS:
        if sqlite:
            assert v in (0, 1), (column, v)
            return bool(v)
        assert isinstance(v, bool), (column, v)
        return v
    if column in DOCUMENTS:
        return json.loads(v) if sqlite else v
    if column in INTEGERS:
        assert isinstance(v, int) and not isinstance(v, bool), (column, v)
    else:
        assert isinstance(v, str), (column, v)
    return v


def rows(store: Store, view: str, order: str = "position") -> list[dict[str, Any]]:
    names, found = store.query(f"SELECT * FROM {view} ORDER BY {order}")
    return [{c: normal(store, c, v) for c, v in zip(names, r, strict=True)} for r in found]


# ------------------------------------------------------------------------- the history


def cronworkflow(name: str, namespace: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {
            **spec,
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


NIGHTLY = cronworkflow(
    "nightly",
    "team-a",
    {"schedules": ["*/10 * * * *"], "timezone": "Europe/Berlin", "concurrencyPolicy": "Forbid"},
    uid="uid-nightly",
    labels={"team": "a"},
)
NIGHTLY_EVERY_30 = cronworkflow(
    "nightly",
    "team-a",
    {"schedules": ["*/30 * * * *"], "timezone": "Europe/Berlin", "concurrencyPolicy": "Forbid"},
    uid="uid-nightly",
    labels={"team": "a"},
)
# Argo's legacy single `schedule` field, which the view shows in `schedules` all the same.
REPORT = cronworkflow("report", "team-b", {"schedule": "0 * * * *", "startingDeadlineSeconds": 300})
MANUAL = manual_workflow_name("nightly", "request-1")


@dataclass(frozen=True)
class History:
    nightly: UUID
    report: UUID


def project(engine: Engine, at: datetime) -> None:
    """Project and dispatch as a replica would at `at`, then project what the dispatcher
    recorded (a run not started, a refused submission)."""
    engine.projector.catch_up(at=at)
    engine.projector.catch_up(at=at)


def make_history(engine: Engine, workflows: Path) -> History:
    svc = engine.service
    nightly = svc.apply_config(parse_manifest(NIGHTLY), T("10:05:00")).id
    report = svc.apply_config(parse_manifest(REPORT), T("10:05:00")).id
    svc.tick([nightly, report], T("10:10:00"))  # nightly fires
    project(engine, T("10:10:01"))  # its Workflow is created
    svc.tick([nightly], T("10:20:00"))  # Forbid: the 10:10 run is still active
    done = T("10:21:00")
    svc.run_completed(nightly, workflow_name("nightly", T("10:10:00")), "Succeeded", done, done)
    svc.suspend(nightly, T("10:25:00"), by="alice", note="db maintenance")
    svc.resume(nightly, T("10:45:00"), by="bob")
    svc.tick([nightly], T("10:46:00"))  # 10:30 and 10:40 were the suspension's
    svc.tick([nightly], T("10:50:00"))  # fires; the dispatcher only reaches it at 10:52
    project(engine, T("10:52:00"))  # past the 30 s late tolerance: not started
    # A Workflow of report's 11:00 name that is someone else's: creating it is refused for good.
    theirs = workflows / "team-b" / f"{workflow_name('report', T('11:00:00'))}.json"
    theirs.parent.mkdir(parents=True, exist_ok=True)
    theirs.write_text(json.dumps({"kind": "Workflow", "metadata": {"name": theirs.stem}}))
    svc.tick([nightly, report], T("11:00:00"))
    project(engine, T("11:00:01"))
    done = T("11:03:00")
    svc.run_completed(nightly, workflow_name("nightly", T("11:00:00")), "Failed", done, done)
    svc.apply_config(parse_manifest(NIGHTLY_EVERY_30), T("11:05:00"))
    svc.trigger(nightly, T("11:06:00"), "request-1")
    project(engine, T("11:06:01"))
    svc.delete(report, T("11:30:00"))
    project(engine, T("11:30:00"))
    return History(nightly, report)


@pytest.fixture
def history(store: Store, tmp_path: Path) -> Iterator[History]:
    engine = bootstrap(store.url, target=LocalTarget(tmp_path / "workflows"))
    try:
        yield make_history(engine, tmp_path / "workflows")
    finally:
        engine.close()


# ------------------------------------------------------------------------- the contract


@pytest.mark.parametrize("view", list(PINNED))
def test_each_view_has_its_pinned_columns_in_order(store: Store, view: str) -> None:
    names, _ = store.query(f"SELECT * FROM {view}")
    assert names == PINNED[view]
    assert list(views.COLUMNS[view]) == PINNED[view]


@pytest.mark.postgres
def test_postgresql_types_are_the_documented_ones(pg_url: str) -> None:
    """What a BI tool sees: timestamptz times, booleans, jsonb documents, bigint positions."""
    migrate(StoreConfig.parse(pg_url))
    store = Store(pg_url, "postgresql")
    for view, columns in PINNED.items():
        types = store.pg_types(view)
        for c in columns:
            if c in TIMES:
                assert types[c] == PG_TYPES["timestamptz"], (view, c)
            elif c in BOOLEANS:
                assert types[c] == PG_TYPES["boolean"], (view, c)
            elif c in DOCUMENTS:
                assert types[c] == PG_TYPES["jsonb"], (view, c)
            elif c == "position":
                assert types[c] == PG_TYPES["bigint"], (view, c)
            elif c in INTEGERS:
                assert types[c] == PG_TYPES["integer"], (view, c)
            else:
                assert types[c] == 25, (view, c)  # text


def test_decisions_are_the_fires_skips_and_failed_starts_of_the_history(
    store: Store, history: History
) -> None:
    got = rows(store, "cronsource_decisions_v1")
    positions = [r.pop("position") for r in got]
    assert positions == sorted(set(positions))
    ids = {"nightly": str(history.nightly), "report": str(history.report)}
    assert all(r.pop("cron_workflow_id") == ids[r["cron_workflow"]] for r in got)
    assert [r.pop("replica") for r in got] == [None] * len(got)  # not recorded (docs/audit.md)

    def decision(
        name: str,
        scheduled: str,
        decided: str,
        decision: str,
        workflow: str | None = None,
        trigger: str | None = None,
        reason: str | None = None,
        last: str | None = None,
        count: int = 1,
    ) -> dict[str, Any]:
        return {
            "namespace": {"nightly": "team-a", "report": "team-b"}[name],
            "cron_workflow": name,
            "scheduled_time": T(scheduled),
            "last_scheduled_time": T(last or scheduled),
            "tick_count": count,
            "decided_at": T(decided),
            "decision": decision,
            "reason": reason,
            "workflow": workflow,
            "trigger": trigger,
            "replaced_workflows": None,
        }

    nightly_1050 = workflow_name("nightly", T("10:50:00"))
    report_1100 = workflow_name("report", T("11:00:00"))
    messages = {r["workflow"]: m for r in got if (m := r.pop("message")) is not None}
    # Log order, but for the two fires of one tick call, whose order is the commit's.
    got.sort(key=lambda r: (r["decided_at"], r["cron_workflow"]))
    assert got == [
        decision(
            "nightly",
            "10:10:00",
            "10:10:00",
            "Fired",
            workflow_name("nightly", T("10:10:00")),
            "schedule",
        ),
        decision("nightly", "10:20:00", "10:20:00", "Skipped", reason="ConcurrencyForbid"),
        decision(
            "nightly",
            "10:30:00",
            "10:46:00",
            "Skipped",
            reason="Suspended",
            last="10:40:00",
            count=2,
        ),
        decision("nightly", "10:50:00", "10:50:00", "Fired", nightly_1050, "schedule"),
        # The trigger of a run not started is its fire's.
        decision(
            "nightly",
            "10:50:00",
            "10:52:00",
            "NotStarted",
            nightly_1050,
            "schedule",
            NOT_STARTED_REASON,
        ),
        decision(
            "nightly",
            "11:00:00",
            "11:00:00",
            "Fired",
            workflow_name("nightly", T("11:00:00")),
            "schedule",
        ),
        decision("report", "11:00:00", "11:00:00", "Fired", report_1100, "schedule"),
        decision(
            "report",
            "11:00:00",
            "11:00:01",
            "SubmissionFailed",
            report_1100,
            "schedule",
            "SubmissionError",
        ),
        decision("nightly", "11:06:00", "11:06:00", "Fired", MANUAL, "manual"),
    ]
    assert set(messages) == {nightly_1050, report_1100}
    assert "reached it 2m after its tick" in messages[nightly_1050]
    assert report_1100 in messages[report_1100]


def test_workflows_have_the_phase_their_last_event_gives_them(
    store: Store, history: History
) -> None:
    got = rows(store, "cronsource_workflows_v1", order="scheduled_time, workflow")
    for r in got:
        del r["position"]
        assert r.pop("cron_workflow_id") == str(
            history.nightly if r["cron_workflow"] == "nightly" else history.report
        )
    messages = {r["workflow"]: r.pop("message") for r in got}

    def run(
        name: str, scheduled: str, phase: str, finished: str | None, trigger: str = "schedule"
    ) -> dict[str, Any]:
        wf = MANUAL if trigger == "manual" else workflow_name(name, T(scheduled))
        return {
            "namespace": {"nightly": "team-a", "report": "team-b"}[name],
            "cron_workflow": name,
            "workflow": wf,
            "scheduled_time": T(scheduled),
            "fired_at": T(scheduled),
            "trigger": trigger,
            "recovered": False,
            "phase": phase,
            "finished_at": finished and T(finished),
        }

    assert got == [
        run("nightly", "10:10:00", "Succeeded", "10:21:00"),
        run("nightly", "10:50:00", "NotStarted", "10:52:00"),
        run("nightly", "11:00:00", "Failed", "11:03:00"),
        run("report", "11:00:00", "SubmissionFailed", "11:00:01"),
        run("nightly", "11:06:00", "Active", None, trigger="manual"),
    ]
    assert [w for w, m in messages.items() if m] == [
        workflow_name("nightly", T("10:50:00")),
        workflow_name("report", T("11:00:00")),
    ]


def test_cronworkflows_show_each_ones_current_state(store: Store, history: History) -> None:
    got = rows(store, "cronsource_cronworkflows_v1", order="namespace, cron_workflow")
    assert got == [
        {
            "cron_workflow_id": str(history.nightly),
            "namespace": "team-a",
            "cron_workflow": "nightly",
            "uid": "uid-nightly",
            "labels": {"team": "a"},
            "generation": 2,
            # Created, 3 fires, 2 skips, 2 completions, suspend, resume, not started,
            # spec change, the manual fire.
            "version": 13,
            "deleted": False,
            "schedules": ["*/30 * * * *"],
            "timezone": "Europe/Berlin",
            "concurrency_policy": "Forbid",
            "starting_deadline_seconds": None,
            "suspended": False,
            "phase": "Active",
            "spec_error": None,
            "last_scheduled_time": T("11:00:00"),
            "next_scheduled_time": T("11:30:00"),
            "active_count": 1,
            "succeeded": 1,
            "failed": 1,
        },
        {
            "cron_workflow_id": str(history.report),
            "namespace": "team-b",
            "cron_workflow": "report",
            "uid": None,
            "labels": {},
            "generation": 1,
            "version": 4,  # created, fired, submission failed, deleted
            "deleted": True,
            "schedules": ["0 * * * *"],
            "timezone": None,
            "concurrency_policy": "Allow",
            "starting_deadline_seconds": 300,
            "suspended": False,
            "phase": "Active",
            "spec_error": None,
            "last_scheduled_time": T("11:00:00"),
            "next_scheduled_time": None,
            "active_count": 0,
            "succeeded": 0,
            "failed": 1,  # the submission that failed, as Argo counts it
        },
    ]


def test_changes_say_who_suspended_and_resumed_and_what_changed(
    store: Store, history: History
) -> None:
    got = rows(store, "cronsource_changes_v1")
    for r in got:
        del r["position"], r["cron_workflow_id"]
    a, b = "team-a", "team-b"
    assert sorted(got, key=lambda r: (r["changed_at"], r["cron_workflow"])) == [
        {
            "namespace": a,
            "cron_workflow": "nightly",
            "changed_at": T("10:05:00"),
            "change": "CronWorkflowCreated",
            "changed_by": None,
            "note": None,
            "generation": 1,
            "message": None,
        },
        {
            "namespace": b,
            "cron_workflow": "report",
            "changed_at": T("10:05:00"),
            "change": "CronWorkflowCreated",
            "changed_by": None,
            "note": None,
            "generation": 1,
            "message": None,
        },
        {
            "namespace": a,
            "cron_workflow": "nightly",
            "changed_at": T("10:25:00"),
            "change": "Suspended",
            "changed_by": "alice",
            "note": "db maintenance",
            "generation": None,
            "message": None,
        },
        {
            "namespace": a,
            "cron_workflow": "nightly",
            "changed_at": T("10:45:00"),
            "change": "Resumed",
            "changed_by": "bob",
            "note": None,
            "generation": None,
            "message": None,
        },
        {
            "namespace": a,
            "cron_workflow": "nightly",
            "changed_at": T("11:05:00"),
            "change": "SpecUpdated",
            "changed_by": None,  # SpecUpdated does not record its writer (docs/audit.md)
            "note": None,
            "generation": 2,
            "message": None,
        },
        {
            "namespace": b,
            "cron_workflow": "report",
            "changed_at": T("11:30:00"),
            "change": "CronWorkflowDeleted",
            "changed_by": None,
            "note": None,
            "generation": None,
            "message": None,
        },
    ]


# ------------------------------------------------------------------------- how they are made


@pytest.mark.postgres
def test_cronsource_migrate_creates_the_views_on_postgresql(pg_url: str) -> None:
    """`cronsource migrate`, the command, on a store that has nothing yet."""
    done = subprocess.run(
        [Path(sys.executable).parent / "cronsource", "--store", pg_url, "migrate"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    names, found = Store(pg_url, "postgresql").query(
        "SELECT table_name FROM information_schema.views WHERE table_schema = 'public'"
        " ORDER BY table_name"
    )
    assert [r[0] for r in found] == sorted(PINNED)


@pytest.mark.postgres
def test_a_reporting_role_needs_select_on_the_views_only(pg_url: str) -> None:
    """docs/audit.md's GRANT: a view reads its tables with its owner's rights, so a BI role
    reads the views without any right on the internal tables (and still cannot read those)."""
    migrate(StoreConfig.parse(pg_url))
    role = f"reporting_{uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as pg:
        pg.execute(f"CREATE ROLE {role} LOGIN")
        pg.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        pg.execute(f"GRANT SELECT ON {', '.join(PINNED)} TO {role}")
    try:
        reporting = psycopg.conninfo.make_conninfo(pg_url, user=role)
        with psycopg.connect(reporting) as pg:
            for view in PINNED:
                pg.execute(f"SELECT count(*) FROM {view}")
        with psycopg.connect(reporting) as pg, pytest.raises(psycopg.errors.InsufficientPrivilege):
            pg.execute("SELECT count(*) FROM cronsource_audit")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as pg:
            pg.execute(f"DROP OWNED BY {role}")
            pg.execute(f"DROP ROLE {role}")


def test_an_embedded_store_keeps_views_that_are_current_and_replaces_stale_ones(
    tmp_path: Path,
) -> None:
    """SQLite stores make their tables at every start: a current view is left alone (no schema
    change for every CLI command), one an older version made is replaced."""
    url = f"sqlite:///{tmp_path}/cronsource.db"
    bootstrap(url).close()
    path = StoreConfig.parse(url).sqlite_path
    with sqlite3.connect(path) as conn:
        before = conn.execute("PRAGMA schema_version").fetchone()[0]
    bootstrap(url).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA schema_version").fetchone()[0] == before
        conn.execute("DROP VIEW cronsource_changes_v1")
        conn.execute("CREATE VIEW cronsource_changes_v1 AS SELECT 1 AS stale")
    bootstrap(url).close()
    names, _ = Store(url, "sqlite").query("SELECT * FROM cronsource_changes_v1")
    assert names == PINNED["cronsource_changes_v1"]


def test_docs_audit_md_documents_every_column() -> None:
    text = (ROOT / "docs" / "audit.md").read_text()
    for view, columns in PINNED.items():
        section = text.split(f"### `{view}`", 1)[1].split("\n### ", 1)[0]
        for c in columns:
            assert f"| `{c}` |" in section, (view, c)
