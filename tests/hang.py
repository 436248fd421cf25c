"""A hang guard for unit tests: a bound that fails a hang, never a slow machine.

A unit test asserts what the code decided, not how long it took: how fast admission, parsing
or evaluation is, is a figure for bench/. Where a regression would show only as time (an
unbounded parse of a hostile input, a read that queues behind a lock), the call runs inside
`no_hang`: HANG_SECONDS is far above any honest run on two loaded cores and far below
pytest-timeout's 600 s, so a hang fails as itself, naming what hung.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

HANG_SECONDS = 30.0


@contextmanager
def no_hang(what: str, seconds: float = HANG_SECONDS) -> Iterator[None]:
    """Fail if the block takes `seconds` or more, whether it returns or raises (a refusal is
    guarded as much as an answer)."""
    started = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - started
        assert took < seconds, f"{what} took {took:.1f}s: it hangs (this bound is no speed target)"
