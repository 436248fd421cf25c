"""Calendars: dates on which a CronWorkflow's ticks do not run (issue 23 item 2).

Two sources, read here as one rule: the annotation `cronsource.io/exclude-dates` (dates in
the CronWorkflow's time zone) and named calendars (`cronsource.io/calendars`), each a
ConfigMap labelled `cronsource.io/calendar: "true"` with `data.dates` (dates and
`YYYY-MM-DD..YYYY-MM-DD` ranges) and optionally `data.rrule` (RFC 5545 RRULE/EXDATE/RDATE
lines, read with python-dateutil). An excluded tick is skipped (`Excluded`), and the skip
names the source and its version: the CronWorkflow's generation for the annotation, the
calendar's stream version for a calendar.

Everything is bounded: at most MAX_DATE_ENTRIES entries (a range is one entry and is never
expanded: a date is looked up by bisection), an RRULE only at daily or coarser frequency and
evaluated lazily for one date at a time (never enumerated), and a rule that matches no date
at all is refused at admission (dateutil would search it up to the year 9999 for every
date asked). Nothing here reads a clock: a rule without DTSTART starts at RRULE_DTSTART.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from uuid import UUID, uuid5
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr
from eventsourcing.domain import Aggregate, event

ANNOTATION_EXCLUDE_DATES = "cronsource.io/exclude-dates"
ANNOTATION_CALENDARS = "cronsource.io/calendars"
#: The label that makes a ConfigMap a calendar (`cronsource.io/calendar: "true"`).
CALENDAR_LABEL = "cronsource.io/calendar"
#: The most dates and ranges one source may list: a calendar of 100,000 dates is refused in
#: one line naming its count, not stored and searched on every decision.
MAX_DATE_ENTRIES = 10_000
#: How many calendars one CronWorkflow may name.
MAX_CALENDARS = 20
#: The longest `data.rrule` text.
MAX_RRULE_CHARS = 4096
#: Where a rule without DTSTART starts (fixed, so that every replica decides alike).
RRULE_DTSTART = datetime(1970, 1, 1)
#: The dates a calendar may name: those users may name anywhere (domain/timestamps.py).
DATE_MIN = date(1970, 1, 1)
DATE_MAX = date(2199, 12, 31)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_SEPARATORS = re.compile(r"[,\s]+")
#: A calendar name, as a ConfigMap's (a DNS subdomain).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_DAILY_OR_COARSER = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
_FREQ = re.compile(r"FREQ=([A-Z]+)", re.IGNORECASE)

DateRange = tuple[date, date]


class CalendarError(ValueError):
    """A date list or rule that cannot be admitted: one line naming the field and value."""


def _shown(v: str) -> str:
    shown = repr(v)
    return shown if len(shown) <= 60 else shown[:50] + "...'"


def _date(text: str, field: str) -> date:
    if not _DATE.fullmatch(text):
        raise CalendarError(f"{field}: {_shown(text)} is not a date (YYYY-MM-DD)")
    try:
        d = date.fromisoformat(text)
    except ValueError as e:
        raise CalendarError(f"{field}: {_shown(text)} is not a date ({e})") from None
    if not DATE_MIN <= d <= DATE_MAX:
        raise CalendarError(f"{field}: {text} is outside {DATE_MIN}..{DATE_MAX}")
    return d


def parse_dates(text: str, field: str) -> tuple[DateRange, ...]:
    """`2026-12-25, 2027-01-01..2027-01-03` (commas or white space between entries) as
    sorted, merged ranges; CalendarError naming `field` and the first bad entry, or the
    count when there are more than MAX_DATE_ENTRIES (counted before any is parsed)."""
    entries = [e for e in _SEPARATORS.split(text.strip()) if e]
    if len(entries) > MAX_DATE_ENTRIES:
        raise CalendarError(
            f"{field}: {len(entries)} entries, more than the {MAX_DATE_ENTRIES} a calendar"
            " may list (use ranges YYYY-MM-DD..YYYY-MM-DD or data.rrule)"
        )
    ranges: list[DateRange] = []
    for entry in entries:
        first, sep, last = entry.partition("..")
        start = _date(first, field)
        end = _date(last, field) if sep else start
        if end < start:
            raise CalendarError(f"{field}: {_shown(entry)} ends before it starts")
        ranges.append((start, end))
    ranges.sort()
    merged: list[DateRange] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1] + timedelta(days=1):
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def in_ranges(ranges: Sequence[DateRange], d: date) -> bool:
    """Whether `d` falls in one of these sorted, disjoint ranges (bisection)."""
    i = bisect_right(ranges, (d, date.max)) - 1
    return i >= 0 and ranges[i][0] <= d <= ranges[i][1]


@functools.lru_cache(maxsize=64)
def _rule(text: str) -> Any:
    return rrulestr(text, forceset=True, dtstart=RRULE_DTSTART, ignoretz=True)


def check_rrule(text: str, field: str) -> None:
    """Admit `data.rrule`: RFC 5545 lines dateutil reads, every RRULE daily or coarser (a
    calendar excludes days), and at least one date it matches. A rule that never ends is
    fine (it is evaluated for one date at a time); one that matches nothing is refused,
    since dateutil would search it to the year 9999 each time a date is asked."""
    if len(text) > MAX_RRULE_CHARS:
        raise CalendarError(f"{field}: {len(text)} characters, more than {MAX_RRULE_CHARS}")
    for freq in _FREQ.findall(text):
        if freq.upper() not in _DAILY_OR_COARSER:
            raise CalendarError(
                f"{field}: FREQ={freq.upper()}: a calendar excludes whole days; use DAILY,"
                " WEEKLY, MONTHLY or YEARLY"
            )
    try:
        rule = _rule(text)
        never = _never_matches(rule)
        first = None if never else rule.after(RRULE_DTSTART, inc=True)
    except (ValueError, TypeError, OverflowError) as e:
        raise CalendarError(
            f"{field}: {_shown(text)} is not an RFC 5545 rule dateutil reads ({e})"
        ) from None
    if first is None:
        raise CalendarError(f"{field}: the rule matches no date")


#: A leap year 403 years before dateutil's last (9999): the Gregorian calendar, weekdays
#: included, repeats every 400 years, so a rule's filters that match no date from here on
#: match none ever.
_PROBE_YEAR = 9596


def _never_matches(ruleset: Any) -> bool:
    """Whether some RRULE of the set has filters no date satisfies (BYMONTH=2 with
    BYMONTHDAY=30): checked from _PROBE_YEAR with INTERVAL=1 and no COUNT or UNTIL, a
    search of at most 403 years (a quarter of a second for DAILY), where dateutil's own
    search of such a rule from 1970 runs day by day to the year 9999 (5 s). A rule whose
    filters match but whose INTERVAL misses every match is left to that search."""
    for rule in getattr(ruleset, "_rrule", ()):
        start = getattr(rule, "_dtstart", None)
        if start is None:
            continue
        day = 28 if (start.month, start.day) == (2, 29) else start.day
        probe = rule.replace(
            dtstart=start.replace(year=_PROBE_YEAR, day=day), interval=1, count=None, until=None
        )
        if probe.after(probe._dtstart, inc=True) is None:
            return True
    return False


@functools.lru_cache(maxsize=4096)
def rrule_matches(text: str, d: date) -> bool:
    """Whether the (admitted) rule has an occurrence on `d`: one bounded query per date,
    cached, never an enumeration of the rule."""
    first = _rule(text).after(datetime(d.year, d.month, d.day), inc=True)
    return first is not None and first.date() == d


@dataclass(frozen=True)
class CalendarDates:
    """One source of excluded dates as of one version: the ranges and the rule."""

    source: str  # "cronsource.io/exclude-dates" or "calendar <name>"
    version: int
    ranges: tuple[DateRange, ...] = ()
    rrule: str = ""

    def excludes(self, d: date) -> bool:
        return in_ranges(self.ranges, d) or (bool(self.rrule) and rrule_matches(self.rrule, d))


@dataclass(frozen=True)
class Exclusion:
    """Why a tick is excluded: the source, its version and the local date."""

    source: str
    version: int
    day: date

    @property
    def message(self) -> str:
        return f"excluded by {self.source} (version {self.version}): {self.day.isoformat()}"

    def detail(self) -> dict[str, str]:
        kind, _, name = self.source.partition(" ")
        return {
            "calendar": name if kind == "calendar" else self.source,
            "version": str(self.version),
            "date": self.day.isoformat(),
        }


def calendar_names(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The calendars `cronsource.io/calendars` names, in order, without repeats."""
    value = annotations.get(ANNOTATION_CALENDARS)
    if not value:
        return ()  # most CronWorkflows name none, and a burst asks of each
    names = [n for n in _SEPARATORS.split(value.strip()) if n]
    return tuple(dict.fromkeys(names))


def calendar_names_problem(value: str) -> str | None:
    """Why `cronsource.io/calendars` cannot be admitted (None: it can)."""
    names = [n for n in _SEPARATORS.split(value.strip()) if n]
    if not names:
        return f"{ANNOTATION_CALENDARS}: names no calendar"
    if len(names) > MAX_CALENDARS:
        return f"{ANNOTATION_CALENDARS}: {len(names)} calendars, more than {MAX_CALENDARS}"
    for n in names:
        if not _NAME.fullmatch(n):
            return f"{ANNOTATION_CALENDARS}: {_shown(n)} is not a ConfigMap name"
    return None


def exclude_dates_problem(value: str) -> str | None:
    """Why `cronsource.io/exclude-dates` cannot be admitted (None: it can)."""
    try:
        parse_dates(value, ANNOTATION_EXCLUDE_DATES)
    except CalendarError as e:
        return str(e)
    return None


@functools.lru_cache(maxsize=1024)
def _annotation_ranges(value: str) -> tuple[DateRange, ...]:
    try:
        return parse_dates(value, ANNOTATION_EXCLUDE_DATES)
    except CalendarError:
        return ()  # stored before admission checked it: no exclusion, never a crash


def annotation_dates(annotations: Mapping[str, str], generation: int) -> CalendarDates | None:
    """The annotation's dates as a source, versioned by the CronWorkflow's generation."""
    value = annotations.get(ANNOTATION_EXCLUDE_DATES)
    if not value:
        return None
    return CalendarDates(ANNOTATION_EXCLUDE_DATES, generation, _annotation_ranges(value))


def excluded(tick: datetime, zone: str, sources: Sequence[CalendarDates]) -> Exclusion | None:
    """The first source (annotation first, then calendars in the order named) that excludes
    the tick's date in the CronWorkflow's zone; None when none does."""
    if not sources:
        return None
    day = tick.astimezone(ZoneInfo(zone or "UTC")).date()
    for s in sources:
        if s.excludes(day):
            return Exclusion(s.source, s.version, day)
    return None


# ---------------------------------------------------------------- the Calendar aggregate
#
# A calendar is a stream of its own in the same store as the CronWorkflows, so each change
# is an event with a version, and a decision names the version it consulted. Its stream id
# is deterministic by namespace and name: a calendar deleted and applied again continues
# its stream (its versions only grow, so a version named in a skip is never reused).

CALENDAR_STREAMS = UUID("0b7c3f0e-5a47-4c34-9a8f-6f1e2d4c8b21")
CALENDAR_TOPIC_PREFIX = "cronsource:Calendar"
CALENDAR_CREATED_TOPIC = "cronsource:CalendarCreated/v1"


def calendar_id(namespace: str, name: str) -> UUID:
    return uuid5(CALENDAR_STREAMS, f"{namespace}/{name}")


@dataclass(frozen=True)
class CalendarSpec:
    """A calendar as admitted: the ConfigMap's `data.dates` and `data.rrule`, checked."""

    namespace: str
    name: str
    dates: str
    rrule: str

    @property
    def ranges(self) -> tuple[DateRange, ...]:
        return parse_dates(self.dates, "data.dates") if self.dates.strip() else ()


def calendar_spec(doc: Mapping[str, Any], default_namespace: str = "default") -> CalendarSpec:
    """Admit a ConfigMap document as a calendar; CalendarError in one line naming the field.
    The ConfigMap must carry the label `cronsource.io/calendar: "true"`."""
    meta = doc.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise CalendarError("metadata: not a mapping")
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise CalendarError(f"metadata.name: {_shown(str(name))} is not a ConfigMap name")
    namespace = meta.get("namespace") or default_namespace
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping) or labels.get(CALENDAR_LABEL) != "true":
        raise CalendarError(
            f"metadata.labels: ConfigMap {name} is not a calendar (needs the label"
            f' {CALENDAR_LABEL}: "true")'
        )
    data = doc.get("data") or {}
    if not isinstance(data, Mapping):
        raise CalendarError("data: not a mapping")
    for key in data:
        if key not in ("dates", "rrule"):
            # A misspelt key (`rrul`) was ignored: the calendar then excluded fewer days
            # than its author wrote, and nothing said so.
            raise CalendarError(
                f"data.{key}: not a key of a calendar (it takes data.dates and data.rrule)"
            )
    dates, rule = data.get("dates", ""), data.get("rrule", "")
    if not isinstance(dates, str):
        raise CalendarError("data.dates: not a string")
    if not isinstance(rule, str):
        raise CalendarError("data.rrule: not a string")
    if not dates.strip() and not rule.strip():
        raise CalendarError(f"data: calendar {name} has neither data.dates nor data.rrule")
    parse_dates(dates, "data.dates")
    if rule.strip():
        check_rrule(rule.strip(), "data.rrule")
    return CalendarSpec(str(namespace), name, dates.strip(), rule.strip())


def is_calendar_document(doc: object) -> bool:
    """A ConfigMap labelled `cronsource.io/calendar: "true"`: read as a calendar wherever
    manifests are read (apply, HTTP, simulate, the watcher)."""
    if not isinstance(doc, dict) or doc.get("kind") != "ConfigMap":
        return False
    meta = doc.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return isinstance(labels, dict) and labels.get(CALENDAR_LABEL) == "true"


def is_calendar_event(ev: Any) -> bool:
    """Whether an event of the log is a calendar's (the projections of CronWorkflows pass
    over them)."""
    return str(getattr(type(ev), "TOPIC", "")).startswith(CALENDAR_TOPIC_PREFIX)


class Calendar(Aggregate):
    """A calendar's stream: applied (dates, rule) and deleted, each a version."""

    TOPIC = "cronsource:Calendar/v1"

    @staticmethod
    def create_id(namespace: str, name: str) -> UUID:
        return calendar_id(namespace, name)

    @event("Created", topic=CALENDAR_CREATED_TOPIC)
    def __init__(
        self, namespace: str, name: str, dates: str, rrule: str, at: datetime, timestamp: datetime
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.dates = dates
        self.rrule = rrule
        self.deleted = False

    @event("Applied", topic="cronsource:CalendarApplied/v1")
    def _applied(self, dates: str, rrule: str, at: datetime, timestamp: datetime) -> None:
        self.dates = dates
        self.rrule = rrule
        self.deleted = False

    @event("Deleted", topic="cronsource:CalendarDeleted/v1")
    def _deleted(self, at: datetime, timestamp: datetime) -> None:
        self.deleted = True

    def apply(self, spec: CalendarSpec, at: datetime) -> bool:
        """Record the spec if it changes anything; returns whether it did."""
        if not self.deleted and (self.dates, self.rrule) == (spec.dates, spec.rrule):
            return False
        self._applied(dates=spec.dates, rrule=spec.rrule, at=at, timestamp=at)
        return True

    def delete(self, at: datetime) -> bool:
        if self.deleted:
            return False
        self._deleted(at=at, timestamp=at)
        return True

    def state(self) -> CalendarDates | None:
        """The dates as of this version; None when deleted."""
        if self.deleted:
            return None
        return CalendarDates(
            f"calendar {self.name}", self.version, _calendar_ranges(self.dates), self.rrule
        )


@functools.lru_cache(maxsize=256)
def _calendar_ranges(dates: str) -> tuple[DateRange, ...]:
    try:
        return parse_dates(dates, "data.dates")
    except CalendarError:
        return ()
