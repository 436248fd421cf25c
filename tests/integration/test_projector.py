"""One owner of the projections: tests/unit/test_projector.py's tests
on a real PostgreSQL, and commands from many threads on one PostgreSQL engine.

The same test functions, collected here: their `stores` marker gives them the server stores in
this tier and the embedded ones in the unit tier (tests/conftest.py)."""

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.clock import VirtualClock
from cronsource.domain.manifest import parse_manifest
from tests.http_helpers import manifest
from tests.instants import T0
from tests.unit.test_projector import (  # noqa: F401 (collected here by pytest)
    test_a_reader_waits_for_the_process_that_projects_and_never_projects_beside_it,
    test_with_no_projector_anywhere_a_reader_projects_itself_and_lets_the_lock_go,
    two_engines,
)


@pytest.mark.postgres
def test_commands_from_many_threads_need_no_lock_and_each_sees_its_own_write(pg_url: str) -> None:
    """What Operations' process-wide lock used to serialise: HTTP commands on many threads.
    Each command's write is visible when it returns, and no event is lost or doubled."""
    engine, _other = two_engines(pg_url)
    _other.close()
    ops = Operations(engine, VirtualClock(T0))
    ops.apply(parse_manifest(manifest("shared")))

    def toggle(i: int) -> bool:
        def do(a: Any, at: datetime) -> None:
            (a.suspend if i % 2 else a.resume)(at, "t", "")

        with engine.service.receipt() as wrote:
            _, version = ops.command("default", "shared", do)
        if wrote.position:  # a resume of a running one writes nothing: nothing to see
            (row,) = engine.view.statuses()
            assert row.version >= version  # read-your-write
        return bool(wrote.position)

    with ThreadPoolExecutor(8) as pool:
        writes = sum(pool.map(toggle, range(40)))
    assert writes >= 1  # the first suspend in the log found it running
    final = engine.service.find("default", "shared")
    assert final.version == 1 + writes  # every change saved once, none lost or doubled
    assert engine.projector.settle()
    assert engine.projector.position() == engine.projector.head()
    engine.close()
