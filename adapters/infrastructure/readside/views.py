"""The audit log's stable SQL surface: the `_v1` views documented in docs/audit.md.

The read model's tables (schema.py) are internal: their columns hold Unix seconds and JSON
text, and they change when the engine needs them to. These views are what a BI tool, a notebook
or a Grafana panel queries instead: one row per decision, per Workflow, per CronWorkflow and per
change, with snake_case columns and real times. A view's name carries its version; a change
that would break a query on it (a column renamed, removed, moved or retyped) makes a `_v2`
beside it instead. `COLUMNS` is that promise, and tests/integration/test_audit_views.py pins it
on SQLite and PostgreSQL.

The views are built on the audit and status tables only: no projection of their own, so they are
as current as `history` and `get`, and a store made by an older version gets them from
`cronsource migrate` without re-projecting anything.
"""

from __future__ import annotations

from typing import Any

from cronsource.adapters.infrastructure.readside.dialect import Dialect

#: Each view's columns, in order: the contract of docs/audit.md. Never edit a released list
#: except to append a column; anything else is a `_v2`.
COLUMNS: dict[str, tuple[str, ...]] = {
    "cronsource_decisions_v1": (
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
    ),
    "cronsource_workflows_v1": (
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
    ),
    "cronsource_cronworkflows_v1": (
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
    ),
    "cronsource_changes_v1": (
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
    ),
}
VIEW_NAMES = tuple(COLUMNS)

#: The audit types that are decisions about a tick or a fired run, and what the view calls
#: them (the outcomes of `cronsource why`). A SubmissionFailed counts only when it is for good:
#: a transient one is retried, and its run may still start.
DECISIONS = {
    "ScheduleFired": "Fired",
    "ScheduleSkipped": "Skipped",
    "RunNotStarted": "NotStarted",
    "RunRecovered": "Recovered",
    "SubmissionFailed": "SubmissionFailed",
}
#: The audit types that change a CronWorkflow rather than decide one of its ticks.
CHANGES = (
    "CronWorkflowCreated",
    "SpecUpdated",
    "SpecRejected",
    "Suspended",
    "Resumed",
    "Stopped",
    "PausedAfterFailures",
    "FailureCountReset",
    "CronWorkflowDeleted",
)
#: The events that end a run, and the phase each leaves it in (RunCompleted carries its own).
RUN_ENDS = {
    "RunVanished": "Vanished",
    "RunNotStarted": "NotStarted",
    "SubmissionFailed": "SubmissionFailed",
}
_STARTS = "('ScheduleFired', 'RunRecovered')"


class _Sql:
    """The expressions the views need, in one dialect: the tables keep times as Unix seconds
    (or RFC 3339 text inside JSON) and documents as JSON text; the views show timestamptz on
    PostgreSQL and ISO-8601 UTC text on SQLite, which has no timestamp type."""

    def __init__(self, dialect: Dialect) -> None:
        self.pg = not dialect.is_sqlite

    def time(self, seconds: str) -> str:
        if self.pg:
            return f"to_timestamp({seconds})"
        # Fixed width, so the text sorts as the time does; SQLite's date functions read it.
        return f"strftime('%Y-%m-%dT%H:%M:%fZ', {seconds}, 'unixepoch')"

    def time_text(self, rfc3339: str) -> str:
        if self.pg:
            return f"CAST({rfc3339} AS timestamptz)"
        return f"strftime('%Y-%m-%dT%H:%M:%fZ', {rfc3339})"

    def text(self, column: str, key: str) -> str:
        return f"({column}::jsonb ->> '{key}')" if self.pg else f"json_extract({column}, '$.{key}')"

    def document(self, column: str, key: str) -> str:
        """A JSON object or array inside a JSON column: jsonb on PostgreSQL, text on SQLite."""
        return f"({column}::jsonb -> '{key}')" if self.pg else f"json_extract({column}, '$.{key}')"

    def integer(self, column: str, key: str) -> str:
        if self.pg:
            return f"CAST({column}::jsonb ->> '{key}' AS integer)"
        return f"json_extract({column}, '$.{key}')"

    def boolean(self, column: str, key: str) -> str:
        """A JSON true/false: boolean on PostgreSQL, 1/0 on SQLite (its booleans)."""
        if self.pg:
            return f"CAST({column}::jsonb ->> '{key}' AS boolean)"
        return f"json_extract({column}, '$.{key}')"

    def flag(self, integer: str) -> str:
        """An INTEGER 0/1 column as the dialect's boolean."""
        return f"({integer} <> 0)" if self.pg else integer

    @property
    def null_text(self) -> str:
        # PostgreSQL would type a bare NULL column as `text` with a warning at best.
        return "CAST(NULL AS text)" if self.pg else "NULL"

    def for_good(self, alias: str) -> str:
        """This SubmissionFailed row is a refusal for good (older logs also hold transient
        ones, which were retried)."""
        return f"NOT COALESCE({self.boolean(f'{alias}.detail', 'transient')}, false)"

    def schedules(self, spec: str) -> str:
        """`spec.schedules` and the legacy `spec.schedule` as one JSON array, without repeats
        (the domain's `all_schedules`)."""
        if self.pg:
            many = f"COALESCE({spec}::jsonb -> 'schedules', '[]'::jsonb)"
            one = f"({spec}::jsonb ->> 'schedule')"
            return (
                f"CASE WHEN COALESCE(trim({one}), '') = '' THEN {many}"
                f" WHEN {many} @> jsonb_build_array({one}) THEN {many}"
                f" ELSE {many} || jsonb_build_array({one}) END"
            )
        many = f"COALESCE(json_extract({spec}, '$.schedules'), '[]')"
        one = f"json_extract({spec}, '$.schedule')"
        return (
            f"CASE WHEN COALESCE(trim({one}), '') = '' THEN {many}"
            f" WHEN EXISTS (SELECT 1 FROM json_each({many}) AS e WHERE e.value = {one})"
            f" THEN {many}"
            f" ELSE json_insert({many}, '$[#]', {one}) END"
        )

    def spec_error(self, status: str) -> str:
        """The message of the SpecError condition (Argo's), None when there is none."""
        if self.pg:
            return (
                "(SELECT c ->> 'message' FROM jsonb_array_elements("
                f"COALESCE({status}::jsonb -> 'conditions', '[]'::jsonb)) AS c"
                " WHERE c ->> 'type' = 'SpecError' LIMIT 1)"
            )
        return (
            "(SELECT json_extract(c.value, '$.message')"
            f" FROM json_each({status}, '$.conditions') AS c"
            " WHERE json_extract(c.value, '$.type') = 'SpecError' LIMIT 1)"
        )


def _decisions(q: _Sql) -> str:
    decision = " ".join(f"WHEN '{t}' THEN '{d}'" for t, d in DECISIONS.items())
    # The trigger of the fire whose run was not started or refused: neither event repeats it.
    fire_trigger = (
        f"(SELECT {q.text('f.detail', 'trigger')} FROM cronsource_audit f"
        " WHERE f.namespace = a.namespace AND f.workflow = a.workflow"
        f" AND f.cron_id = a.cron_id AND f.type IN {_STARTS}"
        " AND f.notification_id < a.notification_id"
        " ORDER BY f.notification_id DESC LIMIT 1)"
    )
    skipped = "a.type = 'ScheduleSkipped'"
    return f"""SELECT
    a.notification_id AS position,
    a.namespace AS namespace,
    a.name AS cron_workflow,
    a.cron_id AS cron_workflow_id,
    {q.time("a.scheduled_time")} AS scheduled_time,
    CASE WHEN {skipped}
        THEN COALESCE({q.time_text(q.text("a.detail", "lastScheduledTime"))},
                      {q.time("a.scheduled_time")})
        ELSE {q.time("a.scheduled_time")} END AS last_scheduled_time,
    CASE WHEN {skipped} THEN COALESCE({q.integer("a.detail", "count")}, 1)
        ELSE 1 END AS tick_count,
    {q.time("a.at")} AS decided_at,
    CASE a.type {decision} END AS decision,
    a.reason AS reason,
    {q.text("a.detail", "message")} AS message,
    a.workflow AS workflow,
    CASE WHEN a.type IN {_STARTS} THEN {q.text("a.detail", "trigger")}
        WHEN a.type IN ('RunNotStarted', 'SubmissionFailed') THEN {fire_trigger}
        END AS trigger,
    {q.document("a.detail", "replaced")} AS replaced_workflows,
    {q.text("a.detail", "decidedBy")} AS replica
FROM cronsource_audit a
WHERE a.type IN ('ScheduleFired', 'ScheduleSkipped', 'RunNotStarted', 'RunRecovered')
    OR (a.type = 'SubmissionFailed' AND {q.for_good("a")})"""


def _workflows(q: _Sql) -> str:
    ends = ", ".join(f"'{t}'" for t in ("RunCompleted", "RunVanished", "RunNotStarted"))
    phase = " ".join(f"WHEN '{t}' THEN '{p}'" for t, p in RUN_ENDS.items())
    same_run = "x.namespace = f.namespace AND x.workflow = f.workflow AND x.cron_id = f.cron_id"
    return f"""SELECT
    f.notification_id AS position,
    f.namespace AS namespace,
    f.name AS cron_workflow,
    f.cron_id AS cron_workflow_id,
    f.workflow AS workflow,
    {q.time("f.scheduled_time")} AS scheduled_time,
    CASE WHEN f.type = 'RunRecovered'
        THEN COALESCE({q.time_text(q.text("f.detail", "createdAt"))}, {q.time("f.at")})
        ELSE {q.time("f.at")} END AS fired_at,
    {q.text("f.detail", "trigger")} AS trigger,
    (f.type = 'RunRecovered') AS recovered,
    CASE WHEN e.type IS NULL THEN 'Active'
        WHEN e.type = 'RunCompleted' THEN {q.text("e.detail", "phase")}
        ELSE CASE e.type {phase} END END AS phase,
    CASE WHEN e.type = 'RunCompleted'
        THEN COALESCE({q.time_text(q.text("e.detail", "finishedAt"))}, {q.time("e.at")})
        ELSE {q.time("e.at")} END AS finished_at,
    {q.text("e.detail", "message")} AS message
FROM cronsource_audit f
LEFT JOIN cronsource_audit e ON e.notification_id = (
    SELECT min(x.notification_id) FROM cronsource_audit x
    WHERE {same_run} AND x.notification_id > f.notification_id
        AND (x.type IN ({ends}) OR (x.type = 'SubmissionFailed' AND {q.for_good("x")})))
WHERE f.type IN {_STARTS}
    AND NOT EXISTS (
        SELECT 1 FROM cronsource_audit x
        WHERE {same_run} AND x.type IN {_STARTS} AND x.notification_id < f.notification_id)"""


def _cronworkflows(q: _Sql) -> str:
    return f"""SELECT
    s.cron_id AS cron_workflow_id,
    s.namespace AS namespace,
    s.name AS cron_workflow,
    {q.text("s.metadata", "uid")} AS uid,
    {q.document("s.metadata", "labels")} AS labels,
    {q.integer("s.metadata", "generation")} AS generation,
    s.version AS version,
    {q.flag("s.deleted")} AS deleted,
    {q.schedules("s.spec")} AS schedules,
    NULLIF({q.text("s.spec", "timezone")}, '') AS timezone,
    COALESCE({q.text("s.spec", "concurrencyPolicy")}, 'Allow') AS concurrency_policy,
    {q.integer("s.spec", "startingDeadlineSeconds")} AS starting_deadline_seconds,
    COALESCE({q.boolean("s.spec", "suspend")}, false) AS suspended,
    {q.text("s.status", "phase")} AS phase,
    {q.spec_error("s.status")} AS spec_error,
    {q.time_text(q.text("s.status", "lastScheduledTime"))} AS last_scheduled_time,
    {q.time("s.next_due")} AS next_scheduled_time,
    s.active AS active_count,
    {q.integer("s.status", "succeeded")} AS succeeded,
    {q.integer("s.status", "failed")} AS failed
FROM cronsource_status s"""


def _changes(q: _Sql) -> str:
    types = ", ".join(f"'{t}'" for t in CHANGES)
    return f"""SELECT
    a.notification_id AS position,
    a.namespace AS namespace,
    a.name AS cron_workflow,
    a.cron_id AS cron_workflow_id,
    {q.time("a.at")} AS changed_at,
    a.type AS change,
    NULLIF({q.text("a.detail", "by")}, '') AS changed_by,
    NULLIF({q.text("a.detail", "note")}, '') AS note,
    {q.integer("a.detail", "generation")} AS generation,
    COALESCE({q.text("a.detail", "message")}, a.reason) AS message
FROM cronsource_audit a
WHERE a.type IN ({types})"""


def definitions(dialect: Dialect) -> dict[str, str]:
    """Each view's SELECT in this dialect, by name."""
    q = _Sql(dialect)
    return {
        "cronsource_decisions_v1": _decisions(q),
        "cronsource_workflows_v1": _workflows(q),
        "cronsource_cronworkflows_v1": _cronworkflows(q),
        "cronsource_changes_v1": _changes(q),
    }


def create_views(conn: Any, dialect: Dialect) -> None:
    """Create the views, or bring their definitions up to date; unchanged ones are left alone.

    SQLite has no CREATE OR REPLACE VIEW, and embedded stores run this at every start: a view
    whose stored text is already ours is not dropped and made again, so a CLI command does
    not rewrite the schema (and make every other connection re-prepare) each time it opens
    the store. On PostgreSQL, CREATE OR REPLACE keeps the view (and the grants on it) and
    refuses any change but appended columns: the version promise, checked by the server.
    """
    for name, select in definitions(dialect).items():
        if not dialect.is_sqlite:
            conn.execute(f"CREATE OR REPLACE VIEW {name} AS {select}")
            continue
        create = f"CREATE VIEW {name} AS {select}"
        row = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?", (name,)
        ).fetchone()
        if row is not None and row[0] == create:
            continue
        conn.execute(f"DROP VIEW IF EXISTS {name}")
        conn.execute(create)


def drop_views(conn: Any) -> None:
    """Drop the views (before their tables: PostgreSQL refuses to drop a table a view reads)."""
    for name in VIEW_NAMES:
        conn.execute(f"DROP VIEW IF EXISTS {name}")
