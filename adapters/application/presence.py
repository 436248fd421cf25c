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

from typing import Any

from cronsource.adapters.infrastructure.locks import PROJECTOR_LOCK_CLASS, FileLock
from cronsource.adapters.infrastructure.shards import (
    _MEMBER_CLASS,
    _SHARD_CLASS,
    SCHEDULING_MEMBERS,
    SHARDS,
)
from cronsource.adapters.runtime.engine import Engine


def schedulers_running(engine: Engine) -> int | None:
    """How many `cronsource run` processes hold this store now; None when the store cannot
    say (`memory:`). On SQLite at most one can: 1 or 0."""
    kind = engine.config.kind
    if kind == "postgresql":
        return engine.view.lock_holders(_MEMBER_CLASS, below=SCHEDULING_MEMBERS)
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


def replicas(engine: Engine) -> list[dict[str, Any]]:
    """The `cronsource run` replicas on this store, one dict each (`cronsource replicas`,
    the status page): `replica` (its identity), `shards` (how many of SHARDS it owns),
    `projector`, `live` (False: its lease lapsed, by the server's clock; the others end its
    session), `lastRenewal` (when it last renewed its lease: the last sign of life its lease
    thread gave), `lastTurn` (when its loop last finished a turn, as of that renewal: a loop
    stuck while the lease thread renews shows here) and `pids` (its PostgreSQL backends).

    PostgreSQL: the leases joined to the advisory locks the backends hold; a backend holding
    the member lock with no lease row yet (joining) is listed under its pid. SQLite: the one
    `run` holding the file lock, if any. `memory:`: none (nothing outside this process)."""
    kind = engine.config.kind
    if kind == "postgresql":
        rows = engine.view.advisory_locks((_MEMBER_CLASS, _SHARD_CLASS, PROJECTOR_LOCK_CLASS))
        members = {pid for cls, _, pid in rows if cls == _MEMBER_CLASS}
        shards: dict[int, int] = {}
        for cls, _, pid in rows:
            if cls == _SHARD_CLASS:
                shards[pid] = shards.get(pid, 0) + 1
        projector = {pid for cls, _, pid in rows if cls == PROJECTOR_LOCK_CLASS}
        out: list[dict[str, Any]] = []
        named: set[int] = set()
        for holder, pids, renewed_at, _seconds, lapsed, last_turn in engine.view.leases():
            mine = [p for p in pids if p in members]
            named.update(pids)
            if not mine:
                continue  # its session is gone: the row is deleted at the next rebalance
            out.append(
                {
                    "replica": holder,
                    "shards": sum(shards.get(p, 0) for p in mine),
                    "projector": any(p in projector for p in mine),
                    "live": not lapsed,
                    "lastRenewal": renewed_at,
                    "lastTurn": last_turn,
                    "pids": mine,
                }
            )
        for pid in sorted(members - named):
            out.append(
                {
                    "replica": str(pid),
                    "shards": shards.get(pid, 0),
                    "projector": pid in projector,
                    "live": True,
                    "lastRenewal": None,
                    "lastTurn": None,
                    "pids": [pid],
                }
            )
        return out
    if kind == "sqlite" and schedulers_running(engine):
        lock = engine.projector.lock
        name = lock.holder_name() if isinstance(lock, FileLock) else ""
        return [
            {
                "replica": name or "run on this file",
                "shards": SHARDS,
                "projector": True,
                "live": True,
                "lastRenewal": None,
                "lastTurn": None,
                "pids": [],
            }
        ]
    return []
