"""Calendars: `python -m bench.calendars [--days N]`.

What is timed (issue 23 item 2's bounds, measured rather than asserted in unit tests):

- admission of the worst inputs: a calendar of 100,000 dates (refused by its count), one of
  10,000 dates (taken), RRULEs that match no date (DAILY and MONTHLY with contradictory
  filters: refused by a 403-year probe instead of dateutil's day-by-day search to 9999), and
  a rule whose INTERVAL misses every match (left to dateutil's search: the slow case);
- a rule evaluated for one date (cold, then cached), as a decision asks it;
- the cost in decisions: `simulate` of one minutely CronWorkflow for `--days` days, without
  calendars, then naming a calendar of 10,000 dates with an RRULE, then with the annotation;
  none of their dates falls in the span, so every tick is looked up and still fires (the same
  work plus the lookups): ticks per wall-clock second each, and the ratio.

Progress on stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from bench.common import emit, machine_note, manifest, r, self_peak_rss_mb
from cronsource.adapters.entrypoints.simulate import load_scenario, simulate
from cronsource.domain.calendars import CalendarError, calendar_spec, rrule_matches

START = datetime(2026, 3, 2, tzinfo=UTC)


def timed(f: Callable[[], Any]) -> tuple[float, str]:
    t0 = time.perf_counter()
    try:
        f()
        outcome = "taken"
    except CalendarError as e:
        outcome = str(e)
    return time.perf_counter() - t0, outcome


def configmap(dates: str = "", rrule: str = "") -> dict[str, Any]:
    data = {k: v for k, v in (("dates", dates), ("rrule", rrule)) if v}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "holidays",
            "namespace": "default",
            "labels": {"cronsource.io/calendar": "true"},
        },
        "data": data,
    }


def every_other_day(n: int, first: date = date(2000, 1, 1)) -> str:
    """n dates, two days apart from `first`: n entries that merge into no range."""
    return ",".join((first + timedelta(days=2 * i)).isoformat() for i in range(n))


def admission() -> list[dict[str, Any]]:
    ten_thousand = every_other_day(10_000)
    cases = {
        "100,000 dates": configmap(",".join(["2026-12-25"] * 100_000)),
        "10,000 dates": configmap(ten_thousand),
        "DAILY Feb 30": configmap(rrule="RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30"),
        "MONTHLY Apr/Jun 31": configmap(rrule="RRULE:FREQ=MONTHLY;BYMONTH=4,6;BYMONTHDAY=31"),
        "DAILY INTERVAL=7 never Monday": configmap(
            rrule="RRULE:FREQ=DAILY;INTERVAL=7;BYDAY=MO;COUNT=3"
        ),
        "WEEKLY weekends (never ends)": configmap(rrule="RRULE:FREQ=WEEKLY;BYDAY=SA,SU"),
    }
    out = []
    for name, doc in cases.items():

        def admit(doc: dict[str, Any] = doc) -> Any:
            return calendar_spec(doc)

        seconds, outcome = timed(admit)
        out.append({"case": name, "seconds": r(seconds, 3), "outcome": outcome})
    return out


def evaluation() -> dict[str, Any]:
    rule = "RRULE:FREQ=DAILY;INTERVAL=3"
    cold, _ = timed(lambda: rrule_matches(rule, date(2199, 12, 30)))
    warm, _ = timed(lambda: rrule_matches(rule, date(2199, 12, 30)))
    return {
        "rule": rule,
        "date": "2199-12-30",
        "cold_seconds": r(cold, 4),
        "cached_seconds": r(warm, 6),
    }


def simulation(days: float, annotations: dict[str, str], calendar: bool) -> dict[str, Any]:
    cw = manifest("minutely", "* * * * *")
    cw["metadata"]["annotations"] = annotations
    docs: list[dict[str, Any]] = [cw]
    if calendar:
        # Nothing in the simulated span is excluded: every tick is looked up and fires, so
        # the work is the plain case's plus the lookups.
        dates = every_other_day(10_000, date(2030, 1, 1))
        cm = configmap(dates, "RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25")
        cm["metadata"]["namespace"] = cw["metadata"]["namespace"]
        docs.append(cm)
    sc = load_scenario(
        {
            "start": START.isoformat(),
            "end": (START + timedelta(days=days)).isoformat(),
            "runDuration": "10s",
            "cronWorkflows": docs,
        }
    )
    t0 = time.perf_counter()
    result = simulate(sc, None)
    seconds = time.perf_counter() - t0
    decided = sum(1 for w in result["workflows"] if w["trigger"] == "schedule")
    excluded = sum(
        e.get("count", 1)
        for e in result["events"]
        if e["type"] == "ScheduleSkipped" and e.get("reason") == "Excluded"
    )
    return {
        "fired": decided,
        "excluded": excluded,
        "seconds": r(seconds, 3),
        "ticks_per_second": r((decided + excluded) / seconds if seconds else float("nan")),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.calendars", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--days", type=float, default=7.0, help="simulated days (default 7)")
    a = ap.parse_args(argv)
    plain = simulation(a.days, {}, False)
    named = simulation(a.days, {"cronsource.io/calendars": "holidays"}, True)
    annotated = simulation(a.days, {"cronsource.io/exclude-dates": "2030-01-01"}, False)
    emit(
        {
            "name": "calendars",
            "admission": admission(),
            "evaluation": evaluation(),
            "simulate": {
                "days": a.days,
                "plain": plain,
                "named_calendar": named,
                "annotation": annotated,
                "named_over_plain": r(
                    (named["ticks_per_second"] or 0) / (plain["ticks_per_second"] or 1), 3
                ),
            },
            "peak_rss_mb": r(self_peak_rss_mb()),
            "machine": machine_note(),
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
