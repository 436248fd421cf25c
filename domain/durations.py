"""Go durations (`90s`, `1h30m`, `500ms`, `-1.5h`), read as Go's time.ParseDuration reads them.

One parser for every use: `@every` schedules, the cronsource annotations and CLI flags take
a positive duration of at most 100 years; expr-lang's `duration()` takes anything Go
returns (negative, zero, up to Go's int64 nanoseconds, about 292 years), since its results
must equal Argo's.

Parsed by one left-to-right scan, so the time is linear in the text; the text is bounded
too (MAX_DURATION_CHARS). A regular expression searched part by part took quadratic time:
`@every ` and 20,000 digits held a request (and /healthz with it) for 30 s.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

MAX_SECONDS = 100 * 366 * 86400  # far beyond any schedule; keeps datetime arithmetic in range
#: Longest duration text: `100h59m59s999ms` is 15 characters; 64 leaves room for spaces
#: and odd but valid spellings (`0001h`), and keeps every message short.
MAX_DURATION_CHARS: Final = 64
#: Nanoseconds per unit, Go's unitMap (both spellings of the micro sign included).
_UNIT_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DIGITS: Final = frozenset("0123456789")
_INT64_LIMIT: Final = 1 << 63  # Go: |a Duration| in nanoseconds is at most this


def _invalid(text: str) -> ValueError:
    return ValueError(f"invalid duration {text!r} (expected e.g. '30s', '5m', '1h30m')")


def parse_duration(text: str, *, signed: bool = False) -> timedelta:
    """Parse a Go duration; raise ValueError naming the text otherwise.

    By default (schedules, annotations, flags) the duration must be positive and at most
    100 years; surrounding blanks are ignored. With `signed`, every value Go's
    time.ParseDuration accepts is returned, exactly as Go reads the text (expr-lang's
    `duration()`). Nanoseconds are truncated to the microseconds a `timedelta` holds.
    """
    if len(text) > MAX_DURATION_CHARS:
        raise ValueError(
            f"duration {text[:20]!r}... is {len(text)} characters, longer than the limit"
            f" of {MAX_DURATION_CHARS}"
        )
    nanoseconds = _go_nanoseconds(text if signed else text.strip(), text)
    if signed and not -_INT64_LIMIT <= nanoseconds < _INT64_LIMIT:
        raise _invalid(text)  # Go's overflow error
    if not signed and nanoseconds > MAX_SECONDS * 1_000_000_000:
        raise ValueError(f"duration {text!r} is longer than 100 years")
    # toward zero, as Go's integer division: then `Milliseconds()` of the result is Go's
    microseconds = abs(nanoseconds) // 1000
    duration = timedelta(microseconds=-microseconds if nanoseconds < 0 else microseconds)
    if not signed and duration <= timedelta(0):
        raise ValueError(f"duration {text!r} must be greater than zero")
    return duration


def _go_nanoseconds(s: str, text: str) -> int:
    """Go's ParseDuration scan (`[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+` or `0`), in exact integers;
    the caller applies Go's int64 bound. As Go, fraction digits beyond what a uint64 holds
    are ignored, and a fraction is scaled in float64."""
    negative = s[:1] == "-"
    if s[:1] in ("-", "+"):
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise _invalid(text)
    total, i, n = 0, 0, len(s)
    while i < n:
        if not (s[i] == "." or s[i] in _DIGITS):
            raise _invalid(text)
        start = i
        while i < n and s[i] in _DIGITS:
            i += 1
        whole = int(s[start:i]) if i > start else 0
        has_whole, has_fraction = i > start, False
        fraction, scale = 0, 1.0
        if i < n and s[i] == ".":
            i += 1
            fraction_start, overflow = i, False
            while i < n and s[i] in _DIGITS:
                if not overflow:
                    shifted = fraction * 10 + int(s[i])
                    if fraction > (_INT64_LIMIT - 1) // 10 or shifted > _INT64_LIMIT:
                        overflow = True
                    else:
                        fraction, scale = shifted, scale * 10
                i += 1
            has_fraction = i > fraction_start
        if not (has_whole or has_fraction):
            raise _invalid(text)
        unit_start = i
        while i < n and not (s[i] == "." or s[i] in _DIGITS):
            i += 1
        unit = _UNIT_NS.get(s[unit_start:i])
        if unit is None:
            raise _invalid(text)
        total += whole * unit
        if fraction:
            total += int(float(fraction) * (float(unit) / scale))
    return -total if negative else total


def format_duration(d: timedelta) -> str:
    """`1.5s`, `60s`, `25m`, `1h2m3s`: a duration as a person reads it in a message (not
    Python's `3 days, 0:00:00`)."""
    seconds = d.total_seconds()
    if seconds < 10:
        return f"{seconds:.3g}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{unit}" for v, unit in ((h, "h"), (m, "m"), (s, "s")) if v)
