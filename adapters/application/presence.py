"""Whether a `cronsource run` holds the store: the one signal the status page and the CLI read.

Only `cronsource run` decides ticks and creates Workflows; a store nobody runs on records
commands and fires nothing. What says a `run` is there is the lock it holds while it lives,
which the kernel or the server drops when it dies (even by SIGKILL):

- PostgreSQL: each replica's member lock (adapters/infrastructure/shards.py), counted on this
database;
- SQLite: the projector file lock beside the database (adapters/runtime/projector.py `FileLock`),
  which `run` holds from its first turn to its exit;
- `memory:`: nothing to ask (the store lives and dies with one process).

The status page (`GET /api/v1/scheduler`, `schedulers`) and the CLI's warning that nothing
fires (adapters/entrypoints/cli/) both read `schedulers_running`.
"""

from __future__ import annotations

from cronsource.adapters.infrastructure.locks import FileLock
from cronsource.adapters.infrastructure.shards import _MEMBER_CLASS
from cronsource.adapters.runtime.engine import Engine


def schedulers_running(engine: Engine) -> int | None:
    """How many `cronsource run` processes hold this store now; None when the store cannot
    say (`memory:`). On SQLite at most one can: 1 or 0."""
    kind = engine.config.kind
    if kind == "postgresql":
        return engine.view.lock_holders(_MEMBER_CLASS)
    if kind != "sqlite":
        return None
    projector = engine.projector
    if projector.worker_running:
        return 1  # this process is the `run`
    lock = projector.lock
    if not isinstance(lock, FileLock):
        return None
    # A command catching up the read model holds the lock too, for at most SETTLE_BUDGET
    # seconds: seen then as a `run`, which errs towards saying nothing.
    return 1 if lock.held_elsewhere() else 0
