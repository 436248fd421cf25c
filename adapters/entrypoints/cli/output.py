"""How answers are printed: tables for people (kubectl's plain columns when piped), `-o
json|yaml|name` for machines, and the few cell formats several commands share.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO, cast

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text


class _ReaderMayLeave:
    """sys.stdout or sys.stderr for a command whose reader may go away (`| head -1`).

    Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError, which used to
    end a command with `error: BrokenPipeError: [Errno 32] Broken pipe`. kubectl ends such a
    command quietly, with exit 0. Here the first write that finds the reader gone points the
    descriptor at /dev/null and the command goes on to its end without printing: a
    `suspend -l team=a | head -1` still suspends every CronWorkflow it selected rather than
    stopping after the first, and its exit is the command's own (0 when it succeeded).
    Commands that only read and would go on reading for nobody ask `reader_gone()`."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self) -> None:
        self.reader_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        try:  # what the buffer still holds goes to /dev/null now, not to a later error
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def tolerate_closed_readers() -> None:
    """From here on a closed stdout or stderr ends the output quietly (`_ReaderMayLeave`);
    the console script calls it first, before any command prints."""
    if not isinstance(sys.stdout, _ReaderMayLeave) and sys.stdout is not None:
        sys.stdout = cast(TextIO, _ReaderMayLeave(sys.stdout))
    if not isinstance(sys.stderr, _ReaderMayLeave) and sys.stderr is not None:
        sys.stderr = cast(TextIO, _ReaderMayLeave(sys.stderr))


def reader_gone() -> bool:
    """Whether whoever read stdout has closed it: a command that would keep reading the store
    only to print stops (`export -o -` of a large log into `head`)."""
    return bool(getattr(sys.stdout, "reader_gone", False))


def stdout_gone_quietly() -> None:
    """For a BrokenPipeError that got past `_ReaderMayLeave` (a write to `sys.stdout.buffer`):
    the descriptor to /dev/null, so the exit flush raises nothing either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    finally:
        os.close(devnull)


#: Characters that would move the cursor or break a line on a terminal: C0 and C1 controls,
#: DEL, and Unicode's line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def cell_text(value: object) -> str:
    """A table cell on one line, its control characters shown escaped (`\\n`, `\\x1b`): a
    suspend note holding a newline printed a line of its own in `history`, one that read as
    a fire that never happened, and an escape sequence could rewrite what was shown."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(value))


def _plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kubectl's columns: left-aligned, three spaces apart, no box drawing (for pipes)."""
    cells = [[cell_text(c) for c in r] for r in [headers, *rows]]
    widths = [max(len(x) for x in col) for col in zip(*cells, strict=False)]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells
    ]
    return "\n".join(lines)


@dataclass
class View:
    """One command's output in every format: data for json/yaml, columns for tables."""

    data: Any
    headers: list[str]
    rows: list[list[str]]
    wide_headers: list[str] = field(default_factory=list)
    wide_rows: list[list[str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    title: str = ""
    empty: str = ""


def no_resources(namespace: str | None) -> str:
    """kubectl's words when a list or a selection matches nothing (exit 0); None: -A."""
    return f"No resources found in {namespace} namespace." if namespace else "No resources found"


def one_or_list(items: list[dict[str, Any]], *, listed: bool) -> dict[str, Any]:
    """What `-o json|yaml` prints for the objects a command touched, as `kubectl apply -o
    json`: the object itself for one named object, else a `List` of them."""
    if len(items) == 1 and not listed:
        return items[0]
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A rich table on a terminal, plain columns when stdout is a pipe or a file."""
    if sys.stdout.isatty():
        t = Table(*headers, title=title or None)
        for r in rows:
            t.add_row(*(Text(cell_text(c)) for c in r))  # Text: no rich markup from data
        Console().print(t)
    else:
        if title:
            click.echo(title)
        click.echo(_plain(headers, rows))


def print_plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """kubectl's plain columns even on a terminal: one line per row, whatever its width
    (`simulate -o timeline`, where a wrapped row would no longer be one line)."""
    click.echo(_plain(headers, rows))


def emit(view: View, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(view.data, indent=2, default=str))
    elif output == "yaml":
        click.echo(yaml.safe_dump(json.loads(json.dumps(view.data, default=str)), sort_keys=False))
    elif output == "name":
        for n in view.names:
            click.echo(n)
    elif not view.rows and view.empty:
        click.echo(view.empty, err=True)
    elif output == "wide" and view.wide_headers:
        rows = [r + w for r, w in zip(view.rows, view.wide_rows, strict=False)]
        print_table(view.headers + view.wide_headers, rows, view.title)
    else:
        print_table(view.headers, view.rows, view.title)


def ago(t: datetime | None, ref: datetime) -> str:
    """`in 3m`, `5s ago`: beside an absolute time, so nobody has to subtract."""
    if t is None:
        return "-"
    delta = (t - ref).total_seconds()
    n = int(abs(delta))  # whole seconds towards zero on both sides: 0.4 s ago is not "in 0s"
    if n == 0:
        return "now"
    return f"in {_span(n)}" if delta > 0 else f"{_span(n)} ago"


def age(t: datetime | None, ref: datetime) -> str:
    """kubectl's AGE column: `45s`, `12m`, `3h`, `20d`."""
    return "-" if t is None else _span(max(0, int((ref - t).total_seconds())))


def _span(n: int) -> str:
    if n < 90:
        return f"{n}s"
    if n < 5400:
        return f"{n // 60}m"
    if n < 172800:
        return f"{n // 3600}h"
    return f"{n // 86400}d"


def ticks_cell(e: dict[str, Any]) -> str:
    """How many ticks an event covers: a folded skip (or a queue) says until when."""
    count = e.get("count")
    if count is None:
        return "1" if e["type"] == "ScheduleFired" else "-"
    last = e.get("lastScheduledTime")
    return f"{count} until {last}" if count > 1 and last else str(count)


def dst_cell(e: dict[str, Any]) -> str:
    """` (02:30 does not exist on 2027-03-14)`: what DST did to the event's tick, if anything."""
    dst = e.get("dst")
    return f" ({dst['note']})" if isinstance(dst, dict) and dst.get("note") else ""


def values_cell(e: dict[str, Any]) -> str:
    """` [when: <expr>; cronworkflow.failed=3, ...]`: the expression a WhenFalse skip
    evaluated and the values of the variables it read (recorded since the event gained them)."""
    expr, values = e.get("expression"), e.get("values")
    if not expr:
        return ""
    seen = ", ".join(f"{k}={v}" for k, v in (values or {}).items())
    return f" [{expr}" + (f"; {seen}" if seen else "") + "]"


def calendar_cell(e: dict[str, Any]) -> str:
    """` (calendar holidays v2)`: the calendar (or `cronsource.io/exclude-dates`) and version
    an Excluded skip names."""
    values = e.get("values") or {}
    if e.get("reason") != "Excluded" or "calendar" not in values:
        return ""
    source = str(values["calendar"])
    kind = "" if source.startswith("cronsource.io/") else "calendar "
    return f" ({kind}{source} v{values.get('version')})"


def detail_cell(e: dict[str, Any]) -> str:
    """What happened, in a word or two: trigger, reason, phase, who."""
    t = e["type"]
    if t == "ScheduleFired":
        out = f"trigger={e.get('trigger', 'schedule')}"
        if e.get("replaced"):
            out += f" replaced={','.join(e['replaced'])}"
        return out + dst_cell(e)
    if t == "ScheduleSkipped":
        return (
            f"reason={e.get('reason')}"
            + (f": {e['message']}" if e.get("message") else "")
            + values_cell(e)
            + dst_cell(e)
        )
    if t == "RunCompleted":
        return f"phase={e.get('phase')}" + (
            f" finished={e['finishedAt']}" if e.get("finishedAt") else ""
        )
    if t == "TickBuffered":
        return "waits for " + (",".join(e.get("behind") or []) or "the active run")
    if t == "PausedAfterFailures":
        return f"after {e.get('threshold')} failed runs: " + ",".join(e.get("workflows") or [])
    if t in ("Suspended", "Resumed", "FailureCountReset"):
        parts = [f"by={e['by']}" if e.get("by") else "", e.get("note") or ""]
        return " ".join(p for p in parts if p) or "-"
    if t == "BackfillQueued":
        return f"overlap={e.get('overlap')} parallel={e.get('parallel')}"
    if t == "HistoryPruned":
        return "removed " + ",".join(e.get("workflows") or [])
    if t == "RunNotStarted":
        return f"reason={e.get('reason')}: {e.get('message')}"
    if t == "SubmissionFailed" and e.get("reason"):
        # v2: why (refused, retried, given up) and how many creates failed.
        attempts = f" [{e['attempts']} attempts]" if (e.get("attempts") or 1) > 1 else ""
        return f"reason={e['reason']}: {e.get('message') or '-'}{attempts}"
    if t == "SubmissionRecovered":
        return f"created after {e.get('attempts')} attempts"
    if t in ("SubmissionFailed", "SpecRejected", "Stopped"):
        transient = " (transient, retried)" if e.get("transient") else ""
        seen = ", ".join(f"{k}={v}" for k, v in (e.get("values") or {}).items())
        return (
            (e.get("message") or e.get("reason") or "-")
            + transient
            + (f" [{seen}]" if seen else "")
        )
    if t == "SpecUpdated":
        return f"generation={e.get('generation')}"
    if t == "StatusAdopted":
        from cronsource.adapters.application.handover import adopted_cell

        return adopted_cell(e)
    return "-"
