"""Property tests for domain.schedule against oracles that share none of its code.

Expressions are drawn as structured fields that know their own value sets, so the matcher
below (`Cron.matches`) never parses cron text: it is independent of the module's parser.
Brute force over real minutes in UTC is the oracle for the DST rules of docs/design.md section 4.

Known differences from cronsim 2.8 (the differential test keeps to where both agree by design;
the strict xfails at the bottom show each difference):
- Day fields: we follow robfig/cron (Argo): day-of-month and day-of-week combine with OR unless
  one is "star", and `*/2` is not star. cronsim follows Debian cron: AND as soon as either
  field's text starts with `*`. `0 0 */2 * 1` is "odd days or Mondays" for us, "odd Mondays"
  for cronsim.
- Day-of-week `N/step` runs to 6 for us (robfig) and to 7 for cronsim, which reads 7 as Sunday:
  `0 0 * * 1/2` adds Sundays in cronsim.
- A one-value range with a step, `5-5/6`, is just 5 for us (robfig) and `5/6` (5, 11, 17, 23)
  for cronsim.
- Wall-clock versus elapsed time: we look at the hour field only (`* 2 * * *` is wall-clock, so
  it fires at 03:00 EDT on New York's spring-forward day, and `*/30 1 * * *` fires once in the
  repeated hour); cronsim applies its Debian DST handling only when neither minute nor hour
  starts with `*`.
- Policy "argo" is Argo's behaviour (skip the gap, fire twice in a repeat); cronsim has only
  the Debian behaviour, which is our default "once".
- Syntax: cronsim rejects `?` and descriptors (`@daily`, `@every`), and accepts what we reject
  (`L`, `W`, `#`, a seconds field, 7 for Sunday).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronsource.domain.schedule import compile_schedule

ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Dublin",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kolkata",
    "Pacific/Auckland",
    "",  # our UTC
    "UTC",  # the IANA zone, through the general path
]
T = TypeVar("T")
MINUTE = timedelta(minutes=1)
#: Window brute-forced around a start: long enough to span a transition and the repeated or
#: skipped hour after it, short enough for minute-by-minute checking.
WINDOW = timedelta(hours=6)
#: Lookback for "was this wall time seen before?": longer than any fold in ZONES (1 hour).
LOOKBACK = timedelta(hours=3)

# Example counts keep the whole file near 30 s; the brute-force DST properties get more, since
# only some of their examples line an expression up with an offset change.
PROPERTY_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
DST_PROPERTY_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=50)


def tz(zone: str) -> ZoneInfo:
    return ZoneInfo(zone or "UTC")


def wall_of(u: datetime, zone: str) -> datetime:
    return u.astimezone(tz(zone)).replace(tzinfo=None)


@functools.cache
def transitions(zone: str) -> tuple[datetime, ...]:
    """Offset changes 2023-2029, found by a daily scan and a search by minutes (every change in
    ZONES falls on a whole minute)."""
    zi = tz(zone)
    found: list[datetime] = []
    day = datetime(2023, 1, 1, tzinfo=UTC)
    while day < datetime(2030, 1, 1, tzinfo=UTC):
        following = day + timedelta(days=1)
        before = day.astimezone(zi).utcoffset()
        if before != following.astimezone(zi).utcoffset():
            lo, hi = 0, 24 * 60
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if (day + mid * MINUTE).astimezone(zi).utcoffset() == before:
                    lo = mid
                else:
                    hi = mid
            found.append(day + hi * MINUTE)
        day = following
    return tuple(found)


# --------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class CronField:
    text: str
    values: frozenset[int]
    #: robfig's "star": an item `*` or `?` with no step above 1.
    star: bool
    #: cronsim reads the text as the same values (see the module docstring for where not).
    cronsim_alike: bool = True


@dataclass(frozen=True)
class Cron:
    text: str
    minute: CronField
    hour: CronField
    dom: CronField
    month: CronField
    dow: CronField

    @property
    def elapsed(self) -> bool:
        return self.hour.text.startswith(("*", "?"))

    def matches(self, wall: datetime) -> bool:
        if wall.second or wall.microsecond:
            return False
        if (
            wall.minute not in self.minute.values
            or wall.hour not in self.hour.values
            or wall.month not in self.month.values
        ):
            return False
        dom_ok = wall.day in self.dom.values
        dow_ok = wall.isoweekday() % 7 in self.dow.values
        if self.dom.star or self.dow.star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def can_fire(self) -> bool:
        if self.dow.star and not self.dom.star:
            longest = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}
            return min(self.dom.values) <= max(longest.get(m, 31) for m in self.month.values)
        return True


MONTH_NAMES = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DOW_NAMES = "sun mon tue wed thu fri sat".split()


@st.composite
def field_item(
    draw: st.DrawFn,
    low: int,
    high: int,
    values: st.SearchStrategy[int],
    names: list[str] | None = None,
    name_base: int = 0,
    stars: bool = True,
    question: bool = False,
    sunday_is_7: bool = False,
) -> CronField:
    def show(v: int) -> str:
        if names is not None and draw(st.booleans()):
            name = names[v - name_base]
            return draw(st.sampled_from([name, name.upper(), name.title()]))
        return str(v)

    kinds = ["value", "range", "range_step", "start_step"]
    kinds += ["star", "star_step"] if stars else []
    kinds += ["question"] if question else []
    kind = draw(st.sampled_from(kinds))
    everything = frozenset(range(low, high + 1))
    step = st.integers(1, high - low + 1)

    def cronsim_from(start: int, k: int) -> frozenset[int]:
        """What cronsim makes of `start/k`: it runs day-of-week up to 7, its second Sunday."""
        top = 7 if sunday_is_7 else high
        return frozenset(v % 7 if sunday_is_7 else v for v in range(start, top + 1, k))

    if kind == "star":
        return CronField("*", everything, True)
    if kind == "question":
        return CronField("?", everything, True, cronsim_alike=False)
    if kind == "star_step":
        k = draw(step)
        return CronField(f"*/{k}", frozenset(range(low, high + 1, k)), k == 1)
    a = draw(values)
    if kind == "value":
        return CronField(show(a), frozenset([a]), False)
    if kind == "start_step":
        k = draw(step)
        ours = frozenset(range(a, high + 1, k))
        return CronField(f"{show(a)}/{k}", ours, False, ours == cronsim_from(a, k))
    b = draw(st.integers(a, high))
    if kind == "range":
        return CronField(f"{show(a)}-{show(b)}", frozenset(range(a, b + 1)), False)
    k = draw(step)
    ours = frozenset(range(a, b + 1, k))
    # cronsim reads a one-value range with a step, `5-5/2`, as `5/2`: from 5 to the maximum.
    alike = a < b or ours == cronsim_from(a, k)
    return CronField(f"{show(a)}-{show(b)}/{k}", ours, False, alike)


def field_list(
    item: st.SearchStrategy[CronField], max_items: int = 3
) -> st.SearchStrategy[CronField]:
    def join(items: list[CronField]) -> CronField:
        return CronField(
            ",".join(i.text for i in items),
            frozenset().union(*(i.values for i in items)),
            any(i.star for i in items),
            all(i.cronsim_alike for i in items),
        )

    return st.lists(item, min_size=1, max_size=max_items).map(join)


STAR = {
    "month": CronField("*", frozenset(range(1, 13)), True),
    "dom": CronField("*", frozenset(range(1, 32)), True),
    "dow": CronField("*", frozenset(range(7)), True),
}


def mostly(common: st.SearchStrategy[T], rest: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """`common` three times in four."""
    return st.one_of(common, common, common, rest)


# The hours in which the zones in ZONES skip or repeat wall time (01:00-02:59, 23:00-00:59 in
# Santiago) are drawn most of the time, so the DST rules are exercised rather than stepped over.
BIASED_MINUTES = st.one_of(st.sampled_from([0, 15, 29, 30, 45, 57, 59]), st.integers(0, 59))
BIASED_HOURS = mostly(st.sampled_from([0, 1, 2, 23]), st.integers(0, 23))

MINUTES = field_list(field_item(0, 59, BIASED_MINUTES))
ELAPSED_HOURS = st.tuples(
    field_item(0, 23, st.integers(0, 23)).filter(lambda f: f.text.startswith("*")),
    st.lists(field_item(0, 23, BIASED_HOURS, stars=False), max_size=1),
).map(
    lambda fs: CronField(
        ",".join([fs[0].text, *(f.text for f in fs[1])]),
        fs[0].values.union(*(f.values for f in fs[1])),
        fs[0].star,
        fs[0].cronsim_alike and all(f.cronsim_alike for f in fs[1]),
    )
)
WALL_HOURS = field_list(field_item(0, 23, BIASED_HOURS, stars=False), max_items=2)


def day_fields() -> st.SearchStrategy[tuple[CronField, CronField, CronField]]:
    """Day-of-month, month, day-of-week; mostly unrestricted, so ticks land near transitions."""
    dom = mostly(
        st.just(STAR["dom"]),
        field_list(field_item(1, 31, st.integers(1, 31), question=True), max_items=2),
    )
    month = mostly(
        st.just(STAR["month"]),
        field_list(field_item(1, 12, st.integers(1, 12), MONTH_NAMES, name_base=1), max_items=2),
    )
    dow = mostly(
        st.just(STAR["dow"]),
        field_list(
            field_item(0, 6, st.integers(0, 6), DOW_NAMES, question=True, sunday_is_7=True),
            max_items=2,
        ),
    )
    return st.tuples(dom, month, dow)


DAY_FIELDS = day_fields()


def cron_of(
    minute: CronField, hour: CronField, dom: CronField, month: CronField, dow: CronField
) -> Cron:
    return Cron(
        " ".join(f.text for f in (minute, hour, dom, month, dow)), *(minute, hour, dom, month, dow)
    )


@st.composite
def crons(draw: st.DrawFn, hours: st.SearchStrategy[CronField], common: bool = False) -> Cron:
    minute = draw(MINUTES)
    hour = draw(hours)
    dom, month, dow = draw(DAY_FIELDS)
    cron = cron_of(minute, hour, dom, month, dow)
    assume(cron.can_fire())
    if common:
        assume(all(f.cronsim_alike for f in (minute, hour, dom, month, dow)))
        # Where robfig's and Debian's day rules pick different operators, the two differ
        # by design (see the module docstring).
        debian_and = dom.text.startswith("*") or dow.text.startswith("*")
        assume(debian_and == (dom.star or dow.star))
    return cron


def descriptor(text: str, fields: str) -> Cron:
    minute, hour, dom, month, dow = fields.split()

    def fixed(value: str, low: int, high: int) -> CronField:
        if value == "*":
            return CronField("*", frozenset(range(low, high + 1)), True)
        return CronField(value, frozenset([int(value)]), False)

    return Cron(
        text,
        fixed(minute, 0, 59),
        fixed(hour, 0, 23),
        fixed(dom, 1, 31),
        fixed(month, 1, 12),
        fixed(dow, 0, 6),
    )


DESCRIPTORS = st.sampled_from(
    [
        descriptor("@hourly", "0 * * * *"),
        descriptor("@daily", "0 0 * * *"),
        descriptor("@midnight", "0 0 * * *"),
        descriptor("@weekly", "0 0 * * 0"),
        descriptor("@monthly", "0 0 1 * *"),
        descriptor("@yearly", "0 0 1 1 *"),
    ]
)
ELAPSED = mostly(crons(ELAPSED_HOURS), DESCRIPTORS.filter(lambda c: c.elapsed))
WALL_CLOCK = mostly(crons(WALL_HOURS), DESCRIPTORS.filter(lambda c: not c.elapsed))
ANY_CRON = st.one_of(ELAPSED, WALL_CLOCK)


def starts(zone: str) -> st.SearchStrategy[datetime]:
    """Mostly within a few hours before (or just after) an offset change, else anywhere in
    2024-2028."""
    anywhere = st.datetimes(
        min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
    )
    near = [t for t in transitions(zone) if 2024 <= t.year <= 2028]
    if not near:
        return anywhere
    # sampled_from, not integers: the latter favours the ends of the range.
    shift = mostly(
        st.sampled_from(range(1, 6 * 60 + 1)).map(lambda m: -m * MINUTE),
        st.sampled_from(range(2 * 60 + 1)).map(lambda m: m * MINUTE),
    )
    seconds = st.sampled_from([timedelta(0), timedelta(0), timedelta(seconds=30)])
    close = st.builds(lambda t, d, s: t + d + s, st.sampled_from(near), shift, seconds)
    return mostly(close, anywhere)


@st.composite
def wall_clock_near_a_transition(draw: st.DrawFn, zone: str) -> tuple[Cron, datetime]:
    """A wall-clock expression naming the hours that an offset change skips or repeats, and
    a start at most 5 hours before the change: drawn independently, the two rarely meet."""
    zi = tz(zone)
    change = draw(st.sampled_from([t for t in transitions(zone) if 2024 <= t.year <= 2028]))
    offsets = [
        (change - timedelta(seconds=1)).astimezone(zi).utcoffset(),
        change.astimezone(zi).utcoffset(),
    ]
    first, end = sorted(change.replace(tzinfo=None) + o for o in offsets if o is not None)
    hours = sorted({first.hour, (end - MINUTE).hour})
    extra = draw(st.lists(field_item(0, 23, BIASED_HOURS, stars=False), max_size=1))
    hour = CronField(
        ",".join([*map(str, hours), *(e.text for e in extra)]),
        frozenset(hours).union(*(e.values for e in extra)),
        False,
    )
    cron = cron_of(draw(MINUTES), hour, *draw(DAY_FIELDS))
    assume(cron.can_fire())
    return cron, change - draw(st.sampled_from(range(1, 5 * 60))) * MINUTE


def wall_clock_cases(zone: str) -> st.SearchStrategy[tuple[Cron, datetime]]:
    anything = st.tuples(WALL_CLOCK, starts(zone))
    if not transitions(zone):
        return anything
    return mostly(wall_clock_near_a_transition(zone), anything)


# --------------------------------------------------------------------------- oracles


def brute_force_elapsed(cron: Cron, zone: str, after: datetime, until: datetime) -> list[datetime]:
    """Every real minute in (after, until] whose local wall time matches."""
    u = after.replace(second=0, microsecond=0) + MINUTE
    out = []
    while u <= until:
        if cron.matches(wall_of(u, zone)):
            out.append(u)
        u += MINUTE
    return out


def brute_force_once(cron: Cron, zone: str, after: datetime, until: datetime) -> list[datetime]:
    """Policy "once" for a wall-clock expression, from its definition: a matching wall time
    fires at its first real occurrence; matching wall times that a jump skips fire at the
    first real minute after the jump."""
    u = after.replace(second=0, microsecond=0) - LOOKBACK
    seen: set[datetime] = set()
    previous_wall: datetime | None = None
    out = []
    while u <= until:
        wall = wall_of(u, zone)
        first_time = wall not in seen
        seen.add(wall)
        skipped = False
        if previous_wall is not None and wall - previous_wall > MINUTE:
            w = previous_wall + MINUTE
            while w < wall and not skipped:
                skipped = cron.matches(w)
                w += MINUTE
        if u > after and ((first_time and cron.matches(wall)) or skipped):
            out.append(u)
        previous_wall = wall
        u += MINUTE
    return out


def is_gap_end(tick: datetime, cron: Cron, zone: str) -> bool:
    """`tick` is where a spring-forward jump lands and the jump skipped a matching wall time."""
    zi = tz(zone)
    before = (tick - timedelta(seconds=1)).astimezone(zi).utcoffset()
    after = tick.astimezone(zi).utcoffset()
    assert before is not None and after is not None
    if after <= before:
        return False
    w = tick.replace(tzinfo=None) + before
    while w < tick.replace(tzinfo=None) + after:
        if cron.matches(w):
            return True
        w += MINUTE
    return False


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("zone", ZONES)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_next_after_is_strictly_increasing(zone: str, data: st.DataObject) -> None:
    cron = data.draw(ANY_CRON, label="cron")
    policy = data.draw(st.sampled_from(["once", "argo"]), label="policy")
    t = data.draw(starts(zone), label="start")
    schedule = compile_schedule([cron.text], zone, policy)
    for _ in range(20):
        following = schedule.next_after(t)
        assert following > t
        assert following.tzinfo is UTC
        t = following


@pytest.mark.parametrize("zone", ZONES)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_every_tick_matches_the_expression_in_local_time(zone: str, data: st.DataObject) -> None:
    cron = data.draw(ANY_CRON, label="cron")
    policy = data.draw(st.sampled_from(["once", "argo"]), label="policy")
    t = data.draw(starts(zone), label="start")
    schedule = compile_schedule([cron.text], zone, policy)
    gap_shifts = not cron.elapsed and policy == "once"
    for _ in range(20):
        t = schedule.next_after(t)
        assert cron.matches(wall_of(t, zone)) or (gap_shifts and is_gap_end(t, cron, zone)), (
            f"{t} is {wall_of(t, zone)} in {zone or 'UTC'}"
        )


@pytest.mark.parametrize("zone", ZONES)
@DST_PROPERTY_SETTINGS
@given(data=st.data())
def test_elapsed_time_ticks_are_exactly_the_matching_instants(
    zone: str, data: st.DataObject
) -> None:
    """Also policy "argo" for wall-clock expressions, which is defined the same way."""
    policy = data.draw(st.sampled_from(["once", "argo"]), label="policy")
    cases = st.tuples(ELAPSED, starts(zone))
    if policy == "argo":
        cases = st.one_of(cases, wall_clock_cases(zone))
    cron, after = data.draw(cases, label="cron, after")
    until = after + WINDOW
    got = list(compile_schedule([cron.text], zone, policy).ticks_between(after, until))
    assert got == brute_force_elapsed(cron, zone, after, until)


@pytest.mark.parametrize("zone", ZONES)
@DST_PROPERTY_SETTINGS
@given(data=st.data())
def test_wall_clock_once_fires_each_named_slot_exactly_once(zone: str, data: st.DataObject) -> None:
    """None skipped across a gap (it fires when the gap ends), none doubled across a fold."""
    cron, after = data.draw(wall_clock_cases(zone), label="cron, after")
    until = after + WINDOW
    got = list(compile_schedule([cron.text], zone).ticks_between(after, until))
    assert got == brute_force_once(cron, zone, after, until)
    walls = [wall_of(t, zone) for t in got]
    assert len(walls) == len(set(walls)), "a wall-clock slot fired twice"


@pytest.mark.parametrize("zone", ZONES)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_several_expressions_are_the_union_of_their_ticks(zone: str, data: st.DataObject) -> None:
    crons_ = data.draw(st.lists(ANY_CRON, min_size=2, max_size=3), label="crons")
    policy = data.draw(st.sampled_from(["once", "argo"]), label="policy")
    after = data.draw(starts(zone), label="after")
    until = after + WINDOW
    union = sorted(
        {
            t
            for c in crons_
            for t in compile_schedule([c.text], zone, policy).ticks_between(after, until)
        }
    )
    combined = compile_schedule([c.text for c in crons_], zone, policy)
    assert list(combined.ticks_between(after, until)) == union
    if union:
        assert combined.next_after(after) == union[0]


@PROPERTY_SETTINGS
@given(
    seconds=st.integers(1, 3 * 86400),
    anchor=st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31)),
    offset=st.integers(-86400 * 30, 86400 * 365),
    zone=st.sampled_from(ZONES),
)
def test_every_ticks_at_whole_periods_from_the_anchor(
    seconds: int, anchor: datetime, offset: int, zone: str
) -> None:
    anchor = anchor.replace(tzinfo=UTC)
    period = timedelta(seconds=seconds)
    schedule = compile_schedule([f"@every {seconds}s"], zone, anchor=anchor)
    t = anchor + timedelta(seconds=offset)
    tick = schedule.next_after(t)
    k, remainder = divmod(tick - anchor, period)
    assert remainder == timedelta(0) and k >= 1
    assert t < tick and (k == 1 or tick - period <= t)


# --------------------------------------------------------------------------- cronsim


def cronsim_ticks(expr: str, zone: str, start: datetime, count: int) -> list[datetime]:
    it = CronSim(expr, start.astimezone(tz(zone)))
    return [next(it).astimezone(UTC) for _ in range(count)]


def our_ticks(
    expr: str, zone: str, start: datetime, count: int, policy: str = "once"
) -> list[datetime]:
    schedule = compile_schedule([expr], zone, policy)
    out, t = [], start
    for _ in range(count):
        t = schedule.next_after(t)
        out.append(t)
    return out


@pytest.mark.parametrize("zone", ZONES)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_agrees_with_cronsim_away_from_transitions(zone: str, data: st.DataObject) -> None:
    cron = data.draw(
        st.one_of(crons(ELAPSED_HOURS, common=True), crons(WALL_HOURS, common=True)), label="cron"
    )
    start = data.draw(
        st.datetimes(
            min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31), timezones=st.just(UTC)
        ),
        label="start",
    )
    changes = transitions(zone)
    # A start just after a fall-back sits in the repeated hour, where cronsim's wall-clock
    # arithmetic restarts from the first occurrence: keep a few hours clear before the start.
    assume(not any(start - LOOKBACK <= c <= start for c in changes))
    horizon = min((c for c in changes if c > start), default=datetime.max.replace(tzinfo=UTC))
    ours = [t for t in our_ticks(cron.text, zone, start, 20) if t < horizon]
    theirs = cronsim_ticks(cron.text, zone, start, len(ours))
    assert ours == theirs


NY = "America/New_York"
SPRING_DAY = datetime(2026, 3, 8, 4, tzinfo=UTC)  # 23:00 EST the evening before
FALL_DAY = datetime(2026, 10, 31, 4, tzinfo=UTC)  # 00:00 EDT the day before


@pytest.mark.parametrize(
    ("expr", "zone", "start", "policy"),
    [
        pytest.param(
            "0 0 */2 * 1",
            "",
            datetime(2026, 1, 1, tzinfo=UTC),
            "once",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="robfig OR"),
            id="day fields: */2 is restricted for robfig, star for Debian",
        ),
        pytest.param(
            "0 0 * * 1/2",
            "",
            datetime(2026, 1, 1, tzinfo=UTC),
            "once",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="7 is Sunday"),
            id="day-of-week N/step reaches 7 (Sunday) in cronsim",
        ),
        pytest.param(
            "0 5-5/6 * * *",
            "",
            datetime(2026, 1, 1, tzinfo=UTC),
            "once",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="5-5/6 is 5"),
            id="one-value range with a step",
        ),
        pytest.param(
            "* 2 * * *",
            NY,
            SPRING_DAY,
            "once",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="hour decides"),
            id="specific hour, star minute: wall-clock for us, fires once at 03:00 EDT",
        ),
        pytest.param(
            "*/30 1 * * *",
            NY,
            FALL_DAY,
            "once",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="hour decides"),
            id="specific hour, stepped minute: once in the repeated hour for us",
        ),
        pytest.param(
            "30 1 * * *",
            NY,
            FALL_DAY,
            "argo",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="argo policy"),
            id="argo policy fires twice in the repeated hour",
        ),
        pytest.param(
            "30 2 * * *",
            NY,
            SPRING_DAY,
            "argo",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason="argo policy"),
            id="argo policy skips the gap",
        ),
        pytest.param(
            "0 9 ? * MON",
            "",
            datetime(2026, 1, 1, tzinfo=UTC),
            "once",
            marks=pytest.mark.xfail(strict=True, raises=CronSimError, reason="no ? in cronsim"),
            id="question mark",
        ),
        pytest.param(
            "@daily",
            "",
            datetime(2026, 1, 1, tzinfo=UTC),
            "once",
            marks=pytest.mark.xfail(strict=True, raises=CronSimError, reason="no descriptors"),
            id="descriptor",
        ),
        pytest.param(
            "30 1 * * *", NY, FALL_DAY, "once", id="same: default policy in the repeated hour"
        ),
        pytest.param("30 2 * * *", NY, SPRING_DAY, "once", id="same: default policy in the gap"),
        pytest.param(
            "17,29,57 * * * *",
            "Australia/Lord_Howe",
            datetime(2026, 4, 4, 14, 0, tzinfo=UTC),
            "once",
            id="same: Lord Howe's repeated half hour",
        ),
    ],
)
def test_known_differences_from_cronsim(expr: str, zone: str, start: datetime, policy: str) -> None:
    assert our_ticks(expr, zone, start, 6, policy) == cronsim_ticks(expr, zone, start, 6)
