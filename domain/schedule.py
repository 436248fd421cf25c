"""Cron arithmetic for CronWorkflow schedules: when does a schedule fire next?

croniter does the calendar arithmetic, but only over naive wall-clock times. Its own
time-zone-aware iteration is not used: across a fall-back it skips the repeated hour's later
matches (in Australia/Lord_Howe on 2026-04-05, `17,29,57 * * * *` from 01:57+11:00 returns
02:17+10:30 and never fires at 01:57+10:30; `test_schedule.py` pins this). Mapping wall-clock
times to real instants, and the DST rules of docs/design.md section 4, live here instead:

- An *elapsed-time* expression (hour field starting with `*`, e.g. `*/5 * * * *`,
  `@hourly`) fires at every real instant whose local wall time matches: twice in a repeated
  hour, never inside a spring-forward gap.
- A *wall-clock* expression (specific hours, `@daily`) under policy "once" fires once per
  wall-clock slot: a slot inside a gap fires at the instant the gap ends, a repeated slot
  fires at its first occurrence. Under policy "argo" it behaves like an elapsed-time
  expression (skips the gap, fires twice in the repeat), as Argo does.
- `@every d` ignores time zones: it fires at anchor + k * d for k = 1, 2, ...

The grammar is robfig/cron's (what Argo accepts), checked here before croniter sees anything:
croniter accepts much that Argo rejects (`L`, `W`, `#`, seconds and years fields, wrapping
ranges) and reads some tokens differently (`5-5` is the whole field to croniter, and its `H`
is its own random pick). croniter only ever receives a normalised expression of explicit value
lists.

Hashed `H` items (Argo PR #16604, "v4.2 and after") are resolved before any of this, by
`domain.cronhash` with the CronWorkflow's namespace and name (`resolve_schedules`): what is
compiled is always the resolution, never the spec's text, and the spec is never rewritten.
"""

from __future__ import annotations

import calendar
import copy
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final, Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter  # type: ignore[import-untyped]

from cronsource.domain.cronhash import MalformedHash, expand
from cronsource.domain.durations import parse_duration

DST_POLICIES: Final = ("once", "argo")

_MINUTE: Final = timedelta(minutes=1)
_SECOND: Final = timedelta(seconds=1)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

#: Stored as `anchor` when no `@every` needs one, so that two compilations of the same cron
#: expressions compare equal.
_NO_ANCHOR: Final = _EPOCH

#: How far apart offset probes are when looking for a zone's offset changes. Probing at points
#: misses a change only if the offset changes and changes back between two probes; since 1970
#: no zone in tzdata 2026 has two transitions less than 6.9 days apart (America/Cambridge_Bay,
#: then Brazil's and Gaza's short-lived rules), so 5 days is safe: 74 probes per zone and year.
_PROBE_STEP: Final = timedelta(days=5)


class ScheduleError(ValueError):
    """A schedule that admission must refuse; the message names the problem and the input."""


class NeverFires(ScheduleError):
    """A valid expression with no tick at all (`0 0 30 2 *`). With hashed items, whether an
    expression never fires can depend on what `H` resolves to (`0 0 31 H *`), so this one is
    only decided once the CronWorkflow's namespace and name are known."""


# --------------------------------------------------------------------------- grammar


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: dict[str, int]
    #: Day-of-month and day-of-week combine with OR when both are restricted (robfig).
    day: bool = False


_MONTH_NAMES: Final = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DOW_NAMES: Final = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}

_MINUTE_F: Final = _FieldSpec("minute", 0, 59, {})
_HOUR_F: Final = _FieldSpec("hour", 0, 23, {})
_DOM_F: Final = _FieldSpec("day-of-month", 1, 31, {}, day=True)
_MONTH_F: Final = _FieldSpec("month", 1, 12, _MONTH_NAMES)
# robfig/cron (Argo) rejects 7 for Sunday; so do we, rather than accept what Argo would not.
_DOW_F: Final = _FieldSpec("day-of-week", 0, 6, _DOW_NAMES, day=True)
_FIELDS: Final = (_MINUTE_F, _HOUR_F, _DOM_F, _MONTH_F, _DOW_F)

#: Month lengths in a leap year, to reject day-of-month values that never occur.
_MONTH_DAYS: Final = {m: calendar.monthrange(2024, m)[1] for m in range(1, 13)}

_DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_DIGITS: Final = re.compile(r"[0-9]+")
# Extensions that some cron dialects (Quartz, Jenkins, croniter) accept and robfig does not,
# matched so that the error can name them instead of calling them garbage.
_UNSUPPORTED: Final = (
    (re.compile(r"[0-9]*LW|LW[0-9]*", re.I), "LW"),
    (re.compile(r"[0-9]*L|L[0-9]*|L-[0-9]+", re.I), "L"),
    (re.compile(r"[0-9]+W|W[0-9]+", re.I), "W"),
    # croniter's random `R`, and a lower-case `h` (Argo's hashed items are upper case only).
    (re.compile(r"[HR](\([0-9]+-[0-9]+\))?(/[0-9]+)?", re.I), "H"),
)


@dataclass(frozen=True)
class _CronRule:
    """A validated 5-field expression, as croniter will read it."""

    croniter_expr: str
    #: Fires by elapsed time rather than once per wall-clock slot (hour field starts with `*`).
    elapsed: bool
    #: The zone of a `CRON_TZ=`/`TZ=` prefix (robfig), which `spec.timezone` must not also set.
    zone: str | None = None


@dataclass(frozen=True)
class _EveryRule:
    period: timedelta


def _unsupported(token: str, expr: str) -> ScheduleError | None:
    if token.startswith("H"):
        # Only a caller that skipped `resolve_schedules` gets here: admission resolves first.
        return ScheduleError(
            f"hashed item {token!r} in {expr!r} is not resolved: resolve_schedules() with the"
            " CronWorkflow's namespace and name before compiling"
        )
    if "#" in token:
        return ScheduleError(f"unsupported cron syntax '#' in {expr!r}")
    for pattern, name in _UNSUPPORTED:
        if pattern.fullmatch(token):
            return ScheduleError(f"unsupported cron syntax {name!r} in {expr!r}")
    return None


def _value(text: str, spec: _FieldSpec, item: str, expr: str) -> int:
    if _DIGITS.fullmatch(text):
        v = int(text)
        if not spec.low <= v <= spec.high:
            raise ScheduleError(
                f"value {v} out of range {spec.low}-{spec.high} for {spec.name} in {expr!r}"
            )
        return v
    named = spec.names.get(text.lower())
    if named is not None:
        return named
    raise _unsupported(text, expr) or ScheduleError(
        f"invalid {spec.name} value {item!r} in {expr!r}"
    )


def _parse_field(text: str, spec: _FieldSpec, expr: str) -> tuple[frozenset[int], bool]:
    """The values a field names, and whether it is unrestricted in robfig's sense.

    robfig marks a field "star" when an item is `*` or `?` without a step above 1; only when
    neither day field is star do day-of-month and day-of-week combine with OR. So `*/2` in
    day-of-month is restricted here (robfig), where Vixie cron and cronsim would call it star.
    """
    values: set[int] = set()
    star = False
    for item in text.split(","):
        problem = _unsupported(item, expr)
        if problem is not None:
            raise problem
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _DIGITS.fullmatch(step_text) or int(step_text) == 0:
                raise ScheduleError(f"invalid step {step_text!r} in {spec.name} of {expr!r}")
            step = int(step_text)
        if base in ("*", "?"):
            low, high = spec.low, spec.high
            star = star or step == 1
        else:
            low_text, dash, high_text = base.partition("-")
            low = _value(low_text, spec, item, expr)
            if dash:
                high = _value(high_text, spec, item, expr)
                if low > high:
                    raise ScheduleError(f"range {base!r} in {spec.name} of {expr!r} runs backwards")
            elif slash:
                high = spec.high  # robfig: "N/step" is "N-max/step"
            else:
                high = low
        values.update(range(low, high + 1, step))
    return frozenset(values), star


def _croniter_field(values: frozenset[int], spec: _FieldSpec, star: bool) -> str:
    # A day field that names every value without being star still takes part in the OR
    # (robfig: `0 0 1-31 * MON` fires daily), so only star becomes croniter's `*` there.
    full = len(values) == spec.high - spec.low + 1
    if star or (full and not spec.day):
        return "*"
    return ",".join(str(v) for v in sorted(values))


def _split_zone(expr: str, shown: str) -> tuple[str | None, str]:
    """robfig's `CRON_TZ=<zone> <spec>` (or `TZ=`): the zone, and the spec after it."""
    if not expr.startswith(("CRON_TZ=", "TZ=")):
        return None, expr
    head, sep, rest = expr.partition(" ")
    name = head.partition("=")[2]
    if not sep or not rest.strip():
        raise ScheduleError(f"{head!r} must be followed by a schedule, in {shown!r}")
    if name == "":
        raise ScheduleError(f"{head!r} names no time zone, in {shown!r}")
    _zone(name)
    return name, rest.strip()


def schedule_zone(expr: str) -> str | None:
    """The zone an expression names itself (`CRON_TZ=Asia/Tokyo 0 9 * * *`), if any; None
    for `@every`, which robfig runs without one. Read from the prefix alone, so that it needs
    no resolution of hashed items (the prefix is never hashed)."""
    zone, body = _split_zone(expr, expr)
    if zone is None or body.split()[0] == "@every":
        return None
    return zone


def spec_zones(spec: Mapping[str, Any]) -> list[str]:
    """The zones a CronWorkflow's times are read in, for people: `spec.timezone`, else the
    zones its schedules name (`CRON_TZ=Europe/Berlin 0 3 * * *`; UTC for one that names
    none), each once. `get` said UTC of a schedule that runs at 03:00 in Berlin."""
    timezone = spec.get("timezone") or ""
    if timezone:
        return [str(timezone)]
    schedules = spec.get("schedules") or [spec.get("schedule") or ""]
    try:
        return sorted({schedule_zone(str(e)) or "UTC" for e in schedules})
    except ScheduleError:  # a spec refused as SpecError: its times are UTC's
        return ["UTC"]


def local_zone(spec: Mapping[str, Any]) -> str:
    """The one zone a CronWorkflow's local times are shown in: its own, or UTC when its
    schedules name several."""
    zones = spec_zones(spec)
    return zones[0] if len(zones) == 1 else "UTC"


@functools.lru_cache(maxsize=4096)
def _parse(expr: str, shown: str | None = None) -> _CronRule | _EveryRule:
    """Validate once per distinct expression: 100k CronWorkflows share a handful of them.

    `shown` is the text that messages quote when `expr` is what a spec's hashed items resolved
    to: the user wrote `H 25 * * *`, and `value 25 out of range ... in '9 25 * * *'` would
    send them looking for a schedule they never wrote.
    """
    named = expr if shown is None else shown
    zone, body = _split_zone(expr, named)
    rule = _parse_body(body, named)
    if zone is not None and isinstance(rule, _CronRule):
        return _CronRule(rule.croniter_expr, rule.elapsed, zone)
    return rule


def _parse_body(body: str, expr: str) -> _CronRule | _EveryRule:
    tokens = body.split()
    if not tokens:
        raise ScheduleError(f"empty cron expression {expr!r}")
    head = tokens[0]
    if head.startswith("@"):
        if any(t.startswith("H") for t in tokens[1:]):
            # Argo resolves `H` in 5-field expressions only; robfig then refuses the rest.
            raise ScheduleError(f"H (hash) cannot be used with {head}, in {expr!r}")
        if head == "@every":
            return _parse_every(tokens, expr)
        if head == "@reboot":
            raise ScheduleError(f"unsupported descriptor '@reboot' in {expr!r}")
        if head not in _DESCRIPTORS:
            raise ScheduleError(f"unknown descriptor {head!r} in {expr!r}")
        if len(tokens) != 1:
            raise ScheduleError(f"unexpected text after {head} in {expr!r}")
        tokens = _DESCRIPTORS[head].split()
    if len(tokens) != 5:
        raise ScheduleError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(tokens)}"
            f" in {expr!r}; seconds and years fields are not supported"
        )
    parsed = [_parse_field(text, spec, expr) for text, spec in zip(tokens, _FIELDS, strict=True)]
    (days, days_star), (months, _), (_, weekdays_star) = parsed[2], parsed[3], parsed[4]
    # A day-of-month that never occurs (Feb 30) makes the expression silent forever unless
    # day-of-week ORs other days in; reject it rather than admit a schedule that never fires.
    if weekdays_star and not days_star and min(days) > max(_MONTH_DAYS[m] for m in months):
        raise NeverFires(f"{expr!r} never fires: no such day in its months")
    return _CronRule(
        croniter_expr=" ".join(
            _croniter_field(values, spec, star)
            for (values, star), spec in zip(parsed, _FIELDS, strict=True)
        ),
        elapsed=tokens[1].startswith(("*", "?")),
    )


def _parse_every(tokens: list[str], expr: str) -> _EveryRule:
    if len(tokens) != 2:
        raise ScheduleError(f"expected one duration after @every, such as '1h30m', in {expr!r}")
    try:
        period = parse_duration(tokens[1])
    except ValueError as e:
        raise ScheduleError(f"invalid @every duration in {expr!r}: {e}") from None
    # As robfig's `Every`: a fraction of a second is dropped and the period is at least one
    # second (`@every 1500ms` ticks every second, as in Argo).
    return _EveryRule(max(_SECOND, period - period % _SECOND))


def resolve_expression(expr: str, namespace: str, name: str) -> str:
    """`expr` with its hashed `H` items resolved for the CronWorkflow namespace/name, exactly
    as Argo resolves them (domain.cronhash); unchanged without any. Raises ScheduleError with
    Argo's message for a malformed item (`"H(30-10)" is malformed: range "30-10" is inverted`).
    """
    try:
        return expand(expr, namespace, name)
    except MalformedHash as e:
        raise ScheduleError(str(e)) from None


def resolve_schedules(expressions: Sequence[str], namespace: str, name: str) -> tuple[str, ...]:
    """Every expression resolved for one CronWorkflow (see `resolve_expression`): what the
    scheduler compiles, `next` lists and `status.resolvedSchedules` records."""
    return tuple(resolve_expression(e, namespace, name) for e in _expression_tuple(expressions))


def validate_expression(expr: str) -> None:
    """Admission check for one schedule on its own; raises ScheduleError naming the problem.

    A hashed expression is checked as far as its text allows: Argo's item syntax, and the
    grammar of what it resolves to. Whether it fires at all can depend on the resolution
    (`0 0 31 H *` never fires when `H` lands on a month without a 31st), which needs the
    CronWorkflow's namespace and name: `validate_resolved` checks that.
    """
    if not isinstance(expr, str):
        raise ScheduleError(f"a schedule must be a string, got {type(expr).__name__}")
    # The hash decides values only; whether an item is well-formed, and the grammar of the
    # rest, do not depend on it, so any namespace and name will do here.
    resolved = resolve_expression(expr, "", "")
    if resolved == expr:
        _parse(expr)
        return
    try:
        _parse(resolved, expr)
    except NeverFires:
        pass


def validate_resolved(expr: str, namespace: str, name: str) -> str:
    """Admission check for one schedule of the CronWorkflow namespace/name, hashed items
    resolved; returns the resolution. Raises ScheduleError naming the schedule as written
    and, when it differs, what it resolved to."""
    validate_expression(expr)
    resolved = resolve_expression(expr, namespace, name)
    if resolved != expr:
        try:
            _parse(resolved, expr)
        except ScheduleError as e:
            # Of the same type: a caller tells "never fires" from a grammar error by it.
            raise type(e)(f"{e} (for {namespace}/{name} it resolves to {resolved!r})") from None
    return resolved


@functools.lru_cache(maxsize=1024)
def _zone(name: str) -> tzinfo:
    if name == "":
        return UTC
    # Names that resolve to the host's own settings or to leap-second ("right/") files would
    # make the same CronWorkflow fire differently on different machines.
    if name in ("Local", "localtime", "posixrules"):
        raise ScheduleError(
            f"time zone {name!r} is the host's own (Argo's controller reads 'Local' as its"
            " zone); name an IANA zone, such as 'Europe/Berlin'"
        )
    if name.startswith(("posix/", "right/")):
        raise ScheduleError(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"unknown time zone {name!r}") from None


def validate_timezone(name: str) -> None:
    """Admission check for `spec.timezone`: an IANA name, or "" for UTC."""
    if not isinstance(name, str):
        raise ScheduleError(f"a time zone must be a string, got {type(name).__name__}")
    _zone(name)


# --------------------------------------------------------------------------- naive matches


@functools.lru_cache(maxsize=256)
def _prototype(croniter_expr: str) -> Any:
    # day_or=True is croniter's default; pinned in test_schedule.py because robfig's OR of the
    # two day fields depends on it.
    return croniter(croniter_expr, _EPOCH.replace(tzinfo=None), day_or=True)


@functools.lru_cache(maxsize=32768)
def _naive_after(croniter_expr: str, wall: datetime) -> datetime:
    """The first matching wall time strictly after the whole-minute naive `wall`.

    Cached because a scheduler asks the same question for many CronWorkflows (the same
    expression, the same last tick). A croniter object keeps its position in itself, so each
    call works on a copy of the parsed prototype: compiled schedules can be shared by threads.
    """
    result: datetime = copy.copy(_prototype(croniter_expr)).get_next(datetime, start_time=wall)
    return result


def _match_after(croniter_expr: str, wall: datetime, inclusive: bool) -> datetime:
    minute = wall.replace(second=0, microsecond=0)
    if inclusive and minute == wall:
        minute -= _MINUTE
    return _naive_after(croniter_expr, minute)


# --------------------------------------------------------------------------- real instants


def _offset(local: datetime) -> timedelta:
    off = local.utcoffset()
    assert off is not None  # every tzinfo here is a ZoneInfo or UTC
    return off


@functools.lru_cache(maxsize=4096)
def _offset_changes(zone: tzinfo, year: int) -> tuple[datetime, ...]:
    """The instants in UTC year `year` at which `zone`'s UTC offset changes.

    zoneinfo does not expose its transitions, so they are found by probing the offset and
    bisecting, once per zone and year: the answer is shared by every schedule in the zone.
    """
    changes: list[datetime] = []
    lo = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    offset = _offset(lo.astimezone(zone))
    while lo < end:
        hi = min(lo + _PROBE_STEP, end)
        hi_offset = _offset(hi.astimezone(zone))
        if hi_offset != offset:
            # Bisect in whole seconds (tzdata transitions fall on whole seconds).
            a, b = (lo - _EPOCH) // _SECOND, (hi - _EPOCH) // _SECOND
            while b - a > 1:
                mid = (a + b) // 2
                if _offset(datetime.fromtimestamp(mid, zone)) == offset:
                    a = mid
                else:
                    b = mid
            changes.append(_EPOCH + b * _SECOND)
            offset = hi_offset
        lo = hi
    return tuple(changes)


def _first_offset_change(zone: tzinfo, after: datetime, until: datetime) -> datetime | None:
    """The earliest instant in (after, until] at which the zone's UTC offset changes."""
    for year in range(after.year, until.year + 1):
        for change in _offset_changes(zone, year):
            if change > after:
                return change if change <= until else None
    return None


class _Ticker(Protocol):
    def next_after(self, t: datetime) -> datetime: ...


@dataclass(frozen=True)
class _EveryTicker:
    anchor: datetime
    period: timedelta

    def next_after(self, t: datetime) -> datetime:
        k = max(1, (t - self.anchor) // self.period + 1)
        return self.anchor + k * self.period


@dataclass(frozen=True)
class _CronTicker:
    croniter_expr: str
    zone: tzinfo
    #: Wall-clock expression under policy "once": gap slots fire at the gap's end, repeated
    #: slots only at their first occurrence.
    once: bool

    def next_after(self, t: datetime) -> datetime:
        if self.zone is UTC:
            return _naive_after(
                self.croniter_expr, t.replace(second=0, microsecond=0, tzinfo=None)
            ).replace(tzinfo=UTC)
        return self._zoned_next_after(t)

    def _zoned_next_after(self, t: datetime) -> datetime:
        """Walk the UTC timeline one constant-offset stretch at a time.

        Within a stretch wall time and real time advance together, so the first matching wall
        time after the stretch's start is its first tick. Working stretch by stretch, rather
        than converting each naive match, is what keeps a repeated hour's matches in order with
        the matches before it: the naive order of wall times is not the real order there.
        """
        zone = self.zone
        start, inclusive = t, False
        while True:
            local = start.astimezone(zone)
            offset = _offset(local)
            wall = _match_after(self.croniter_expr, local.replace(tzinfo=None), inclusive)
            tick = (wall - offset).replace(tzinfo=UTC)
            change = _first_offset_change(zone, start, tick)
            if change is None:
                if self.once and wall.replace(tzinfo=zone).astimezone(UTC) != tick:
                    # The second occurrence of a repeated wall time (its first, fold=0, came
                    # earlier): policy "once" already fired there.
                    start, inclusive = tick, False
                    continue
                return tick
            new_offset = _offset(change.astimezone(zone))
            if (
                self.once
                and new_offset > offset
                and wall < change.replace(tzinfo=None) + new_offset
            ):
                # `wall` is in the spring-forward gap [change + offset, change + new_offset):
                # it fires once, when the gap ends.
                return change
            start, inclusive = change, True

    def dst_shift(self, tick: datetime) -> DstShift | None:
        """What DST did to `tick`, a tick of this ticker: moved out of a gap, or the one run
        of a repeated wall time. None for a tick DST did not touch, and always under policy
        "argo" or for an elapsed-time expression (those follow real time: nothing moves)."""
        if not self.once:
            return None
        zone = self.zone
        before, after = _offset((tick - _SECOND).astimezone(zone)), _offset(tick.astimezone(zone))
        if after > before:
            # `tick` is a spring-forward instant: the walls [tick+before, tick+after) never
            # happen; the first of them this expression names is the run moved here.
            gap_start = (tick + before).replace(tzinfo=None)
            wall = _match_after(self.croniter_expr, gap_start, inclusive=True)
            if wall < (tick + after).replace(tzinfo=None):
                return DstShift("gap", tick, wall, _zone_name(zone))
        local = tick.astimezone(zone)
        naive = local.replace(tzinfo=None)
        if local.fold == 0 and _offset(naive.replace(tzinfo=zone, fold=1)) != _offset(local):
            return DstShift("fold", tick, naive, _zone_name(zone))
        return None

    def gap_shift(self, wall: datetime, offset: timedelta | None = None) -> DstShift | None:
        """The tick that stands for the wall time `wall` (naive) when `wall` names a slot
        of this expression that the zone skips; None if it exists or is not a slot, or if
        `offset` (the one it was written with) is not the zone's on either side of the gap."""
        if not self.once or _match_after(self.croniter_expr, wall, inclusive=True) != wall:
            return None
        zone = self.zone
        before, after = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
        if offset is not None and offset not in (before.utcoffset(), after.utcoffset()):
            return None
        early = after.astimezone(UTC)  # read with the new offset
        late = before.astimezone(UTC)  # read with the old one
        if late.astimezone(zone).replace(tzinfo=None) == wall:
            return None  # it exists
        change = _first_offset_change(zone, early, late)
        if change is None:  # pragma: no cover - a missing wall always lies in a gap
            return None
        return DstShift("gap", change, wall, _zone_name(zone))


def _zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or "UTC"


@dataclass(frozen=True)
class DstShift:
    """What DST did to one tick of a wall-clock schedule under policy "once" (docs/scheduling.md):

    - "gap": the schedule names `wall`, which the zone skips that day (spring forward), so
      the run happens at `tick`, the instant the gap ends;
    - "fold": `wall` occurs twice that day (fall back) and the schedule runs once, at its
      first occurrence, `tick`.

    The computation only: entrypoints render it (`note` is the words they share).
    """

    kind: Literal["gap", "fold"]
    tick: datetime  # aware UTC
    wall: datetime  # naive: the wall-clock slot the schedule names
    zone: str

    @property
    def note(self) -> str:
        """`02:30 does not exist on 2027-03-14` / `01:30 occurs twice on 2026-11-01, runs
        once`: the words `next`, `why`, `history` and simulate put beside the tick."""
        hm, day = self.wall.strftime("%H:%M"), self.wall.date().isoformat()
        if self.kind == "gap":
            return f"{hm} does not exist on {day}"
        return f"{hm} occurs twice on {day}, runs once"

    def as_dict(self) -> dict[str, str]:
        """The `dst` field of the JSON outputs."""
        return {
            "kind": self.kind,
            "wall": self.wall.strftime("%H:%M"),
            "date": self.wall.date().isoformat(),
            "zone": self.zone,
            "note": self.note,
        }


def _expression_tuple(expressions: Sequence[str]) -> tuple[str, ...]:
    # A lone string is a sequence too: one expression would silently become one per character.
    if isinstance(expressions, str):
        raise TypeError(
            f"expressions must be a sequence of strings, not the string {expressions!r}"
        )
    return tuple(expressions)


def _as_utc(t: datetime, name: str) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {t!r}")
    return t.astimezone(UTC)


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class CompiledSchedule:
    """A CronWorkflow's schedules, validated and parsed once, answering "when next?".

    Equal field values mean equal firing times, so comparing two compiled schedules tells
    whether a spec change changed the schedule.
    """

    expressions: tuple[str, ...]
    timezone: str  # "" = UTC
    dst_policy: str  # "once" or "argo"
    anchor: datetime  # aware UTC; only @every uses it
    _tickers: tuple[_Ticker, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "expressions", _expression_tuple(self.expressions))
        if not self.expressions:
            raise ScheduleError("a schedule needs at least one expression")
        validate_timezone(self.timezone)
        if self.dst_policy not in DST_POLICIES:
            raise ScheduleError(
                f"unknown DST policy {self.dst_policy!r}; expected one of {', '.join(DST_POLICIES)}"
            )
        if self.anchor.tzinfo is None or self.anchor.utcoffset() is None:
            raise ScheduleError(f"anchor must be timezone-aware, got {self.anchor!r}")
        object.__setattr__(self, "anchor", self.anchor.astimezone(UTC))
        zone = _zone(self.timezone)
        tickers: list[_Ticker] = []
        for expr in self.expressions:
            validate_expression(expr)
            rule = _parse(expr)
            if isinstance(rule, _EveryRule):
                tickers.append(_EveryTicker(self.anchor, rule.period))
            else:
                if rule.zone is not None and self.timezone:
                    raise ScheduleError(zone_conflict(expr, self.timezone))
                once = self.dst_policy == "once" and not rule.elapsed
                own = zone if rule.zone is None else _zone(rule.zone)
                tickers.append(_CronTicker(rule.croniter_expr, own, once))
        # `@daily` next to `@midnight`, or one expression twice: one ticker is enough.
        object.__setattr__(self, "_tickers", tuple(dict.fromkeys(tickers)))

    def next_after(self, t: datetime) -> datetime:
        """The earliest tick strictly after `t`, in UTC.

        Strictly after, so that asking again from the tick just decided moves on; the union of
        the expressions, so that two schedules meeting at one instant start one run.
        """
        u = _as_utc(t, "t")
        return min(ticker.next_after(u) for ticker in self._tickers)

    def ticks_between(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Every tick with after < tick <= until, ascending, in UTC.

        Half-open at `after` so that consecutive windows never decide a tick twice; lazy so
        that a long outage can be walked without building the whole list.
        """
        return self._ticks(_as_utc(after, "after"), _as_utc(until, "until"))

    def dst_shift(self, tick: datetime) -> DstShift | None:
        """What DST did to `tick` (a tick of this schedule): see DstShift. None when nothing
        moved it, for a time that is not a tick, and for UTC or fixed-offset zones."""
        u = _as_utc(tick, "tick")
        for ticker in self._tickers:
            if not isinstance(ticker, _CronTicker) or not ticker.once or ticker.zone is UTC:
                continue  # nothing moves: the cheap answer for most schedules
            if ticker.next_after(u - _SECOND) == u:
                shift = ticker.dst_shift(u)
                if shift is not None:
                    return shift
        return None

    def gap_shift(self, wall: datetime) -> DstShift | None:
        """When the wall time `wall` is a slot of this schedule that its zone skips (02:30
        on a spring-forward night), the tick that runs for it; else None. `why` asks this for
        a time written in a gap, which names no real instant of the zone. An aware `wall` is
        a time as written, with its offset: it names the zone's slot only when that offset
        is the zone's, before or after the change (`02:30-05:00` or `02:30-04:00` for New
        York; `02:30Z` is a real instant, 21:30 the evening before there)."""
        offset = wall.utcoffset()
        wall = wall.replace(tzinfo=None)
        for ticker in self._tickers:
            if isinstance(ticker, _CronTicker):
                shift = ticker.gap_shift(wall, offset)
                if shift is not None:
                    return shift
        return None

    def _ticks(self, after: datetime, until: datetime) -> Iterator[datetime]:
        heads = [ticker.next_after(after) for ticker in self._tickers]
        while True:
            tick = min(heads)
            if tick > until:
                return
            yield tick
            for i, head in enumerate(heads):
                if head == tick:
                    heads[i] = self._tickers[i].next_after(tick)


def zone_conflict(expr: str, timezone: str) -> str:
    """Argo prefixes `CRON_TZ=<timezone>` to each schedule; robfig then refuses a second one."""
    return (
        f"{expr!r} names its own time zone and spec.timezone is {timezone!r}: "
        "Argo would refuse to schedule it; set one of them"
    )


def needs_anchor(expressions: Sequence[str]) -> bool:
    """Whether the ticks depend on the anchor (an `@every` among the expressions); raises
    ScheduleError for an invalid expression, as `compile_schedule` would."""
    return any(isinstance(_parse(expr), _EveryRule) for expr in _expression_tuple(expressions))


def compile_schedule(
    expressions: Sequence[str],
    timezone: str = "",
    dst_policy: str = "once",
    anchor: datetime | None = None,
) -> CompiledSchedule:
    """Validate and parse a CronWorkflow's schedules once, for many `next_after` calls.

    `anchor` (the CronWorkflow's creation time) is required when an expression is `@every`:
    without it replicas and restarts would not agree on the ticks.
    """
    expressions = _expression_tuple(expressions)
    if anchor is None:
        for expr in expressions:
            validate_expression(expr)
            if isinstance(_parse(expr), _EveryRule):
                raise ScheduleError(f"{expr!r} needs an anchor (the CronWorkflow's creation time)")
        anchor = _NO_ANCHOR
    return CompiledSchedule(expressions, timezone, dst_policy, anchor)
