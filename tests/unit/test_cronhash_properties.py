"""Property tests for hashed `H` schedules: every resolution parses, lands where Argo's rules
say, and fires.

Schedules are drawn as structured fields (`Field`, `Item`) that know which values each item
may take, so the checks below never re-implement the hash: whatever value the hash picks, a
bare `H` must land in its range, `H/n` must start within its first `min(n, size)` values and
keep its step, and the compiled schedule's next tick must be a minute those values allow. A
schedule whose resolution has no tick at all (`H(29-31)` in day-of-month with a hashed month
of 30 days) must be refused at admission, and only such a schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cronsource.domain.schedule import (
    NeverFires,
    compile_schedule,
    resolve_expression,
    validate_resolved,
)

#: (low, high) of a bare `H` per field, and of cron itself (what `H(a-b)` may span).
HASH_RANGES = [(0, 59), (0, 23), (1, 28), (1, 12), (0, 6)]
LIMITS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]
MINUTE, HOUR, DOM, MONTH, DOW = range(5)
#: A plain value valid in each field, to stand in for the items not under test.
LIMITS_TEXT = [str(low) for low, _ in LIMITS]
#: Days each month can have (February 29 in leap years).
MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass(frozen=True)
class Item:
    """One item of a field: hashed (`H`, `H/n`, `H(a-b)`, `H(a-b)/n`) or a plain value set."""

    text: str
    hashed: bool
    low: int
    high: int
    step: int | None  # `/n` of a hashed item; None for a single value

    def allowed(self, resolved: str) -> set[int]:
        """The values the item's resolution stands for, after checking it is one Argo's
        rules allow for this item."""
        if not self.hashed:
            return set(range(self.low, self.high + 1, self.step or 1))
        if self.step is None:
            v = int(resolved)
            assert self.low <= v <= self.high, (self.text, resolved)
            return {v}
        first_text, _, rest = resolved.partition("-")
        high_text, _, step_text = rest.partition("/")
        first, high, step = int(first_text), int(high_text), int(step_text)
        size = self.high - self.low + 1
        assert (high, step) == (self.high, self.step), (self.text, resolved)
        assert self.low <= first < self.low + min(self.step, size), (self.text, resolved)
        return set(range(first, high + 1, step))


@dataclass(frozen=True)
class Field:
    items: tuple[Item, ...]

    @property
    def text(self) -> str:
        return ",".join(i.text for i in self.items)

    @property
    def hashed(self) -> bool:
        return any(i.hashed for i in self.items)


def _hashed_item(index: int) -> st.SearchStrategy[Item]:
    low, high = LIMITS[index]
    bare_low, bare_high = HASH_RANGES[index]
    span = st.tuples(st.integers(low, high), st.integers(low, high)).map(sorted)
    step = st.integers(1, 90)
    return st.one_of(
        st.just(Item("H", True, bare_low, bare_high, None)),
        step.map(lambda n: Item(f"H/{n}", True, bare_low, bare_high, n)),
        span.map(lambda r: Item(f"H({r[0]}-{r[1]})", True, r[0], r[1], None)),
        st.tuples(span, step).map(
            lambda p: Item(f"H({p[0][0]}-{p[0][1]})/{p[1]}", True, p[0][0], p[0][1], p[1])
        ),
    )


def _plain_item(index: int) -> st.SearchStrategy[Item]:
    low, high = LIMITS[index]
    return st.one_of(
        st.integers(low, high).map(lambda v: Item(str(v), False, v, v, None)),
        st.tuples(st.integers(low, high), st.integers(low, high))
        .map(sorted)
        .map(lambda r: Item(f"{r[0]}-{r[1]}", False, r[0], r[1], None)),
    )


@st.composite
def field(draw: st.DrawFn, index: int) -> Field:
    """A field: `*` (unrestricted), or one to three items, hashed or plain."""
    if draw(st.integers(0, 3)) == 0:
        return Field(())  # `*`
    items = draw(
        st.lists(st.one_of(_hashed_item(index), _plain_item(index)), min_size=1, max_size=3)
    )
    return Field(tuple(items))


@st.composite
def hashed_schedule(draw: st.DrawFn) -> tuple[Field, ...]:
    """Five fields with at least one hashed item."""
    fields = tuple(draw(field(i)) for i in range(5))
    if not any(f.hashed for f in fields):
        i = draw(st.integers(0, 4))
        extra = draw(_hashed_item(i))
        fields = (*fields[:i], Field((*fields[i].items, extra)), *fields[i + 1 :])
    return fields


def text_of(fields: tuple[Field, ...]) -> str:
    return " ".join(f.text or "*" for f in fields)


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", fullmatch=True)
_start = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
)


def allowed_values(fields: tuple[Field, ...], resolved: str) -> list[set[int] | None]:
    """Per field, the values its resolution allows; None for `*`."""
    out: list[set[int] | None] = []
    for f, text in zip(fields, resolved.split(" "), strict=True):
        if not f.items:
            assert text == "*"
            out.append(None)
            continue
        parts = text.split(",")
        assert len(parts) == len(f.items), (f.text, text)
        values: set[int] = set()
        for item, part in zip(f.items, parts, strict=True):
            if not item.hashed:
                assert part == item.text  # plain items are never touched
            values |= item.allowed(part)
        out.append(values)
    return out


@PROPERTY_SETTINGS
@given(fields=hashed_schedule(), namespace=_label, name=_label, start=_start)
def test_every_resolution_parses_lands_in_range_and_fires(
    fields: tuple[Field, ...], namespace: str, name: str, start: datetime
) -> None:
    schedule = text_of(fields)
    allowed = allowed_values(fields, resolved := _resolve(schedule, namespace, name))
    days, months, weekdays = allowed[DOM], allowed[MONTH], allowed[DOW]
    # robfig: the day fields combine with OR only when both are restricted; an unrestricted
    # day-of-week cannot rescue a day-of-month that no allowed month has.
    possible = (
        weekdays is not None
        and days is not None
        or any(d <= MONTH_DAYS[m] for d in (days or {1}) for m in (months or set(MONTH_DAYS)))
    )
    try:
        validate_resolved(schedule, namespace, name)
    except NeverFires:
        event("refused: never fires")
        assert not possible, (schedule, resolved)
        return
    assert possible, (schedule, resolved)
    event("admitted")
    tick = compile_schedule([resolved]).next_after(start)
    assert start < tick
    # Leap days only: February 29 in a year divisible by 4 within eight years.
    assert tick - start <= timedelta(days=366 * 8 + 2), (schedule, resolved, start)
    for value, values in (
        (tick.minute, allowed[MINUTE]),
        (tick.hour, allowed[HOUR]),
        (tick.month, months),
    ):
        assert values is None or value in values, (schedule, resolved, tick)
    weekday = (tick.weekday() + 1) % 7  # cron: Sunday is 0
    day_ok = days is None or tick.day in days
    weekday_ok = weekdays is None or weekday in weekdays
    both_restricted = days is not None and weekdays is not None
    assert (day_ok or weekday_ok) if both_restricted else (day_ok and weekday_ok), (
        schedule,
        resolved,
        tick,
    )


_late_days = st.sampled_from(["29", "30", "31", "30,31", "H(29-31)", "H(30-31)", "H(29-31)/2"])
_short_months = st.sampled_from(["H", "H(2-4)", "H(2-6)/2", "H(4-11)/7", "2", "4,6", "H,H"])


@PROPERTY_SETTINGS
@given(days=_late_days, months=_short_months, namespace=_label, name=_label)
def test_a_resolution_without_any_tick_is_refused_and_only_then(
    days: str, months: str, namespace: str, name: str
) -> None:
    """Late days of the month in hashed months: whether the schedule ever fires depends on
    the name. Admission must refuse exactly the resolutions that never fire."""
    schedule = f"0 0 {days} {months} *"
    resolved = _resolve(schedule, namespace, name)
    zero = Field((Item("0", False, 0, 0, None),))
    fields = [zero, zero] + [
        Field(tuple(_parse_item(t, i) for t in text.split(",")))
        for i, text in ((DOM, days), (MONTH, months))
    ]
    allowed = allowed_values((*fields, Field(())), resolved)
    days_allowed, months_allowed = allowed[DOM], allowed[MONTH]
    assert days_allowed is not None and months_allowed is not None
    possible = any(d <= MONTH_DAYS[m] for d in days_allowed for m in months_allowed)
    try:
        validate_resolved(schedule, namespace, name)
    except NeverFires as e:
        event("refused")
        assert not possible, (schedule, resolved)
        if resolved != schedule:  # the refusal says what `H` became for this name
            assert f"for {namespace}/{name} it resolves to {resolved!r}" in str(e)
        return
    event("admitted")
    assert possible, (schedule, resolved)
    tick = compile_schedule([resolved]).next_after(datetime(2026, 1, 1, tzinfo=UTC))
    assert tick.day in days_allowed and tick.month in months_allowed


def _parse_item(text: str, index: int) -> Item:
    """An Item for one of the fixed texts above (the test's own table, not cron parsing)."""
    if not text.startswith("H"):
        v = int(text)
        return Item(text, False, v, v, None)
    low, high = HASH_RANGES[index]
    rest = text[1:]
    if rest.startswith("("):
        span, _, rest = rest[1:].partition(")")
        low, high = (int(x) for x in span.split("-"))
    step = int(rest[1:]) if rest.startswith("/") else None
    return Item(text, True, low, high, step)


def _resolve(schedule: str, namespace: str, name: str) -> str:
    resolved = resolve_expression(schedule, namespace, name)
    assert "H" not in resolved
    return resolved


@PROPERTY_SETTINGS
@given(fields=hashed_schedule(), namespace=_label, name=_label, other=_label)
def test_resolution_depends_on_namespace_name_and_position_only(
    fields: tuple[Field, ...], namespace: str, name: str, other: str
) -> None:
    """The same CronWorkflow resolves the same way next to any other schedule, and a hashed
    item resolves as it would alone in its position (the hash sees no other item's text)."""
    schedule = text_of(fields)
    resolved = _resolve(schedule, namespace, name)
    assert _resolve(schedule, namespace, name) == resolved
    for index, f in enumerate(fields):
        for position, item in enumerate(f.items):
            if not item.hashed:
                continue
            # The same item at the same position, every other item replaced by a plain one.
            alone = [
                ["*"] if not g.items else [LIMITS_TEXT[i]] * len(g.items)
                for i, g in enumerate(fields)
            ]
            alone[index][position] = item.text
            text = " ".join(",".join(parts) for parts in alone)
            got = _resolve(text, namespace, name).split(" ")[index].split(",")[position]
            assert got == resolved.split(" ")[index].split(",")[position]
