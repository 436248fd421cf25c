"""What `simulate` shows of a result: the filters (`--name`, `-n`, `--only`), repeated skips
folded into one row, the decisions in time order across CronWorkflows (`-o timeline`), and the
counts per CronWorkflow (the summary a fleet reads at a glance).

Presentation only: the simulation (orchestrator.py) is unchanged and its result keeps every
event; these functions take that result (the dict `-o json` prints) and return rows. Folding
is for people: `-o json` keeps every decision, because a machine counting or diffing them
wants all of them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from cronsource.adapters.application.inputs import SKIP_REASONS, FieldError

DECISIONS = ("ScheduleFired", "ScheduleSkipped")


@dataclass(frozen=True)
class Selection:
    """The output filters. `names`: shell patterns (`etl-*`) on the CronWorkflow's name;
    `namespace`: exact; `only`: `fired`, `skipped` or a skip reason (`WhenFalse`)."""

    names: tuple[str, ...] = ()
    namespace: str | None = None
    only: str | None = None

    def wants_cron(self, ref: str) -> bool:
        """Whether the CronWorkflow `namespace/name` is selected."""
        ns, _, name = ref.rpartition("/")
        if self.namespace is not None and ns != self.namespace:
            return False
        return not self.names or any(fnmatchcase(name, p) for p in self.names)

    def wants_decision(self, e: dict[str, Any]) -> bool:
        """Whether a decision event (fired or skipped) passes `--only`."""
        if self.only is None:
            return True
        if self.only == "fired":
            return bool(e["type"] == "ScheduleFired")
        if e["type"] != "ScheduleSkipped":
            return False
        return self.only == "skipped" or e.get("reason") == self.only


def parse_only(value: str | None) -> str | None:
    """`--only`: fired, skipped or a skip reason, any case; FieldError names the choices (a
    typo would otherwise select nothing and look like an answer)."""
    if value is None:
        return None
    choices = ("fired", "skipped", *SKIP_REASONS)
    for c in choices:
        if value.lower() == c.lower():
            return c
    raise FieldError("--only", f"{value!r} is not one of {', '.join(choices)}")


def select(result: dict[str, Any], sel: Selection) -> dict[str, Any]:
    """The result restricted to the selected CronWorkflows (their events, Workflows and
    status); with `--only`, the events are the matching decisions alone. Without filters it
    is the result itself, unchanged."""
    if sel == Selection():
        return result
    events = [e for e in result["events"] if sel.wants_cron(e["cronWorkflow"])]
    if sel.only is not None:
        events = [e for e in events if e["type"] in DECISIONS and sel.wants_decision(e)]
    crons = [c for c in result["cronWorkflows"] if sel.wants_cron(f"{c['namespace']}/{c['name']}")]
    if sel.only is not None:  # the CronWorkflows that made such a decision
        seen = {e["cronWorkflow"] for e in events}
        crons = [c for c in crons if f"{c['namespace']}/{c['name']}" in seen]
    kept = {f"{c['namespace']}/{c['name']}" for c in crons}
    workflows = [w for w in result["workflows"] if f"{w['namespace']}/{w['cronWorkflow']}" in kept]
    if sel.only is not None:
        fired = {e["workflow"] for e in events if e["type"] == "ScheduleFired"}
        workflows = [w for w in workflows if w["name"] in fired]
    out = {**result, "events": events, "cronWorkflows": crons, "workflows": workflows}
    if "kubeEvents" in result:  # `--kube-events`: the selected CronWorkflows' Events
        out["kubeEvents"] = [e for e in result["kubeEvents"] if e["cronWorkflow"] in kept]
    return out


@dataclass
class Row:
    """One line of the decisions: a decision, or a run of skips folded into one. `first`
    and `last` are the ticks it covers, `count` how many, `folded` how many events."""

    cron: str
    event: dict[str, Any]
    first: str
    last: str
    count: int
    folded: int = 1
    order: int = 0

    @property
    def fired(self) -> bool:
        return bool(self.event["type"] == "ScheduleFired")

    @property
    def reason(self) -> str:
        return str(self.event.get("reason") or "?")


def _ticks(e: dict[str, Any]) -> tuple[str, str, int]:
    first = e.get("scheduledTime") or e.get("at") or ""
    last = e.get("lastScheduledTime") or first
    return first, last, int(e.get("count") or 1)


def fold(events: list[dict[str, Any]]) -> list[Row]:
    """The decisions, each CronWorkflow's consecutive skips of one reason folded into one
    row (668 `WhenFalse` skips in a row are one line with their count and span). A fire, or
    a skip of another reason, ends a run; events that are not decisions (a run completing)
    do not. Rows keep the log's order (`order`, the first event's position)."""
    rows: list[Row] = []
    open_run: dict[str, Row] = {}
    for i, e in enumerate(events):
        if e["type"] not in DECISIONS:
            continue
        cron = e["cronWorkflow"]
        first, last, count = _ticks(e)
        run = open_run.get(cron)
        if (
            e["type"] == "ScheduleSkipped"
            and run is not None
            and not run.fired
            and run.reason == (e.get("reason") or "?")
        ):
            run.last, run.count, run.folded = last, run.count + count, run.folded + 1
            continue
        row = Row(cron, e, first, last, count, order=i)
        rows.append(row)
        open_run[cron] = row
    return rows


def keep(rows: list[Row], sel: Selection) -> list[Row]:
    """The rows `--only` selects (folding came first, so a run is never joined across the
    decisions the filter hides)."""
    return [r for r in rows if sel.wants_decision(r.event)]


def timeline(rows: list[Row]) -> list[Row]:
    """The rows in time order across CronWorkflows: by the (first) tick, then when it was
    decided, then the CronWorkflow; a catch-up decided late sits at the tick it was for."""
    return sorted(rows, key=lambda r: (r.first, r.event.get("at") or "", r.cron, r.order))


def decision_cell(r: Row) -> str:
    """`fired (schedule)`, `skipped: WhenFalse`, or a folded run:
    `skipped: WhenFalse ×668 (2026-03-07T00:01:00Z .. 2026-03-07T11:08:00Z)`."""
    if r.fired:
        return f"fired ({r.event.get('trigger', 'schedule')})"
    text = f"skipped: {r.reason}"
    if r.count > 1:
        text += f" ×{r.count} ({r.first} .. {r.last})"
    return text


@dataclass
class Tally:
    """One CronWorkflow's decisions counted: fires by trigger, skipped ticks by reason."""

    fired: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)


def tallies(result: dict[str, Any]) -> dict[str, Tally]:
    """Every CronWorkflow of the result (with or without decisions) and its counts."""
    out: dict[str, Tally] = {
        f"{c['namespace']}/{c['name']}": Tally() for c in result["cronWorkflows"]
    }
    for e in result["events"]:
        t = out.setdefault(e["cronWorkflow"], Tally())
        if e["type"] == "ScheduleFired":
            t.fired[e.get("trigger", "schedule")] += 1
        elif e["type"] == "ScheduleSkipped":
            t.skipped[e.get("reason") or "?"] += int(e.get("count") or 1)
    return out


def summary(result: dict[str, Any], zones: dict[str, str]) -> list[dict[str, Any]]:
    """One entry per CronWorkflow, sorted: its zone, decisions, fires by trigger, skipped
    ticks by reason, and its final run counts (`-o json`'s `summary`, the table's rows)."""
    status = {f"{c['namespace']}/{c['name']}": c["status"] for c in result["cronWorkflows"]}
    out = []
    for cron, t in sorted(tallies(result).items()):
        st = status.get(cron, {})
        fired, skipped = sum(t.fired.values()), sum(t.skipped.values())
        out.append(
            {
                "cronWorkflow": cron,
                "timezone": zones.get(cron, "UTC"),
                "decisions": fired + skipped,
                "fired": fired,
                "firedByTrigger": dict(sorted(t.fired.items())),
                "skipped": skipped,
                "skippedByReason": dict(sorted(t.skipped.items())),
                "succeeded": st.get("succeeded", 0),
                "failed": st.get("failed", 0),
                "active": len(st.get("active") or []),
            }
        )
    return out


def summary_table(entries: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The compact table: one row per CronWorkflow, one column per skip reason that occurs
    (so 200 rows of numbers line up), fires split by trigger only where not all are
    `schedule`."""
    reasons = sorted({r for e in entries for r in e["skippedByReason"]})
    headers = ["CRONWORKFLOW", "TIMEZONE", "FIRED", "SKIPPED", *reasons]
    headers += ["SUCCEEDED", "FAILED", "ACTIVE"]
    rows = []
    for e in entries:
        by_trigger = e["firedByTrigger"]
        fired = str(e["fired"])
        if set(by_trigger) - {"schedule"}:
            fired += f" ({', '.join(f'{k} {v}' for k, v in by_trigger.items())})"
        rows.append(
            [
                e["cronWorkflow"],
                e["timezone"],
                fired,
                str(e["skipped"]),
                *(str(e["skippedByReason"].get(r, 0)) for r in reasons),
                str(e["succeeded"]),
                str(e["failed"]),
                str(e["active"]),
            ]
        )
    return headers, rows
