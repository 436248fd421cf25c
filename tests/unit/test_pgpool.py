"""Which store errors are a connection that broke (adapters/infrastructure/pgpool.py): those
are tried again on a fresh connection; a statement the server refused is not."""

from __future__ import annotations

import psycopg
import pytest
from eventsourcing.persistence import OperationalError
from psycopg_pool import PoolTimeout

from cronsource.adapters.infrastructure.pgpool import broken_connection


def wrapped(cause: BaseException) -> OperationalError:
    """As eventsourcing raises them: its own error, from psycopg's."""
    try:
        raise OperationalError(str(cause)) from cause
    except OperationalError as e:
        return e


@pytest.mark.parametrize(
    "error, broken",
    [
        pytest.param(psycopg.errors.AdminShutdown("terminating"), True, id="server shut down"),
        pytest.param(psycopg.errors.CrashShutdown("crash"), True, id="server crashed"),
        pytest.param(psycopg.OperationalError("the connection is closed"), True, id="closed"),
        pytest.param(psycopg.InterfaceError("the connection is lost"), True, id="lost"),
        pytest.param(psycopg.errors.QueryCanceled("timeout"), False, id="statement timeout"),
        pytest.param(psycopg.errors.LockNotAvailable("lock"), False, id="lock timeout"),
        pytest.param(PoolTimeout("no connection"), False, id="pool gave none"),
        pytest.param(ValueError("x"), False, id="not the store's"),
    ],
)
def test_a_broken_connection_is_told_from_a_refused_statement(
    error: BaseException, broken: bool
) -> None:
    assert broken_connection(error) is broken
    assert broken_connection(wrapped(error)) is broken
