"""Go-style durations (`90s`, `1h30m`, `500ms`), as Argo users write them.

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
_UNIT: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DIGITS: Final = frozenset("0123456789")


def _invalid(text: str) -> ValueError:
    return ValueError(f"invalid duration {text!r} (expected e.g. '30s', '5m', '1h30m')")


def parse_duration(text: str) -> timedelta:
    """Parse a positive Go duration; raise ValueError naming the text otherwise."""
    if len(text) > MAX_DURATION_CHARS:
        raise ValueError(
            f"duration {text[:20]!r}... is {len(text)} characters, longer than the limit"
            f" of {MAX_DURATION_CHARS}"
        )
    s = text.strip()
    if not s:
        raise _invalid(text)
    total, i, n = 0.0, 0, len(s)
    while i < n:
        start = i
        while i < n and s[i] in _DIGITS:
            i += 1
        if i == start:
            raise _invalid(text)
        if i < n and s[i] == ".":
            i += 1
            fraction = i
            while i < n and s[i] in _DIGITS:
                i += 1
            if i == fraction:
                raise _invalid(text)
        number = float(s[start:i])
        if s.startswith("ms", i):
            unit, i = "ms", i + 2
        elif i < n and s[i] in "hms":
            unit, i = s[i], i + 1
        else:
            raise _invalid(text)
        total += number * _UNIT[unit]
    if total <= 0:
        raise ValueError(f"duration {text!r} must be greater than zero")
    if total > MAX_SECONDS:
        raise ValueError(f"duration {text!r} is longer than 100 years")
    return timedelta(seconds=total)
