"""Go-style durations (`90s`, `1h30m`, `500ms`), as Argo users write them."""

from __future__ import annotations

import re
from datetime import timedelta

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
MAX_SECONDS = 100 * 366 * 86400  # far beyond any schedule; keeps datetime arithmetic in range
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> timedelta:
    """Parse a positive Go duration; raise ValueError naming the text otherwise."""
    s = text.strip()
    pos = 0
    total = 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"invalid duration {text!r} (expected e.g. '30s', '5m', '1h30m')")
    if total <= 0:
        raise ValueError(f"duration {text!r} must be greater than zero")
    if total > MAX_SECONDS:
        raise ValueError(f"duration {text!r} is longer than 100 years")
    return timedelta(seconds=total)
