"""Real `cronsource serve` processes for the hostile-input tests, over real HTTP."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests import serve_process

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def serve(store: str, *extra: str) -> Iterator[str]:
    """One `cronsource serve` on `store`; yields its base URL, stops it with SIGTERM."""
    command = [sys.executable, "-m", "cronsource.adapters.entrypoints.cli"]
    with serve_process.serve(command, store, *extra, env=os.environ, cwd=ROOT) as served:
        yield served.base
