"""A command on SQLite loads no driver or client it does not use: psycopg (with its pool and
eventsourcing's PostgreSQL module) cost 0.2 s of CPU of a 0.9 s `get`, and the Kubernetes
client (aiohttp, lightkube) 0.25 s. Each is imported where a connection is made instead
(adapters/infrastructure/store/conninfo.py, adapters/infrastructure/kube/__init__.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

NOT_ON_SQLITE = ("psycopg", "psycopg_pool", "eventsourcing.postgres", "aiohttp", "lightkube")

# The CLI's own entry point, in a fresh interpreter: what it imported is what a user pays.
SCRIPT = """
import json, sys
from cronsource.adapters.entrypoints.cli import main
sys.argv = ["cronsource", "--store", sys.argv[1], *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _loaded(cwd: Path, *args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"sqlite:///{cwd / 'c.db'}", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("get",), ("get", "-A", "-o", "json"), ("history", "x")])
def test_a_command_on_sqlite_loads_no_postgresql_driver_or_kubernetes_client(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    loaded = _loaded(tmp_path, *args)
    # It did open the store, through the SQLite recorder.
    assert "cronsource.adapters.infrastructure.store.recorders.sqlite" in loaded
    assert not loaded & set(NOT_ON_SQLITE), sorted(loaded & set(NOT_ON_SQLITE))
