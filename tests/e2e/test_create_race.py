"""Create-only across replicas (issue 15, item 1): two `cronsource serve` processes on one
store, two clients POST the same new name at the same instant with `If-None-Match: *` and
different specs. The store decides: exactly one 201, the other 409 AlreadyExists, and the
stored spec is the winner's at version 1. Before the fix both succeeded in 75 of 100 rounds
and the second spec silently replaced the first."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from cronsource.adapters.bootstrap import migrate
from cronsource.adapters.infrastructure.store.config import StoreConfig
from tests.hostile.procs import serve
from tests.http_helpers import manifest

ROUNDS = 30
CW = "/api/v1/namespaces/default/cronworkflows"


def _race(bases: list[str], rounds: int) -> list[tuple[int, int]]:
    clients = [httpx.Client(base_url=b, timeout=30) for b in bases]
    results: list[tuple[int, int]] = []
    try:
        for r in range(rounds):
            name = f"race-{r}"
            barrier = threading.Barrier(2)
            answers: list[Any] = [None, None]

            def post(
                i: int, name: str = name, barrier: Any = barrier, answers: Any = answers
            ) -> None:
                body = manifest(name, f"{i} * * * *")  # different specs: minute 0 and 1
                barrier.wait()
                answers[i] = clients[i].post(CW, json=body, headers={"If-None-Match": "*"})

            threads = [threading.Thread(target=post, args=(i,)) for i in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            codes = sorted(a.status_code for a in answers)
            assert codes == [201, 409], f"round {r}: {[a.text for a in answers]}"
            winner = next(i for i, a in enumerate(answers) if a.status_code == 201)
            loser = answers[1 - winner]
            assert loser.json()["reason"] == "AlreadyExists", loser.text
            for c in clients:  # both replicas read the winner's spec, never overwritten
                got = c.get(f"{CW}/{name}").json()
                assert got["spec"]["schedules"] == [f"{winner} * * * *"], got
                assert got["metadata"]["resourceVersion"] == "1"
            results.append((r, winner))
    finally:
        for c in clients:
            c.close()
    return results


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_two_replicas_creating_one_name_get_exactly_one_winner(
    kind: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    if kind == "sqlite":
        store = f"sqlite:///{tmp_path}/race.db"
    else:
        store = request.getfixturevalue("pg_url")
    migrate(StoreConfig.parse(store))
    with serve(store) as a, serve(store) as b:
        results = _race([a, b], ROUNDS)
    assert len(results) == ROUNDS
    first = sum(w == 0 for _, w in results)
    print(f"{kind}: {ROUNDS} rounds, one winner each; replica 0 won {first}")
