"""The PostgreSQL store URL is libpq's (adapters/infrastructure/store/config.py): every parameter
reaches the connections as psycopg reads it, `schema` is ours, what we cannot honour is refused in
one line, and the password is never shown. Here the parsing and redaction; every connection
against a real server and the CLI's errors: tests/integration/test_store_url.py; `run` and
`serve` as processes: tests/e2e/test_store_url.py."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from psycopg.conninfo import conninfo_to_dict

from cronsource.adapters.infrastructure.store.config import StoreConfig, StoreURLError, redact
from cronsource.adapters.infrastructure.store.conninfo import with_defaults

SECRET = "s3cret-pw"


def params(url: str) -> dict[str, str | int | None]:
    return conninfo_to_dict(StoreConfig.parse(url).pg_conninfo)


def test_a_multi_host_url_keeps_every_host_port_and_target_session_attrs() -> None:
    cfg = StoreConfig.parse(
        "postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write&schema=s"
    )
    assert cfg.kind == "postgresql" and cfg.pg_schema == "s"
    assert params(cfg.url) == {
        "user": "u",
        "dbname": "db",
        "host": "h1,h2",
        "port": "5432,5433",
        "target_session_attrs": "read-write",
    }


def test_a_percent_encoded_password_reaches_libpq_decoded() -> None:
    assert params("postgres://u:p%40ss%2Fw%20rd@db:5433/cron")["password"] == "p@ss/w rd"


def test_every_libpq_parameter_passes_through_and_schema_does_not() -> None:
    given = {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
        "sslcert": "/etc/c.pem",
        "sslkey": "/etc/k.pem",
        "connect_timeout": "7",
        "application_name": "cron source",
        "keepalives_idle": "30",
        "options": "-c statement_timeout=5000",
    }
    query = "&".join(f"{k}={quote(v, safe='/')}" for k, v in given.items())
    got = params(f"postgresql://u@h/db?{query}&schema=mine")
    assert got == {"user": "u", "dbname": "db", "host": "h", **given}
    assert StoreConfig.parse(f"postgresql://u@h/db?{query}&schema=mine").pg_schema == "mine"


def test_schema_alone_leaves_a_plain_url() -> None:
    cfg = StoreConfig.parse("postgresql://u@h/db?schema=s%5F1")
    assert cfg.pg_schema == "s_1"
    assert params(cfg.url) == {"user": "u", "dbname": "db", "host": "h"}


def test_the_database_may_come_from_the_query_as_libpq_reads_it() -> None:
    assert params("postgresql://u@h/?dbname=other")["dbname"] == "other"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        pytest.param("postgresql://u@h/db?sslmod=require", '"sslmod"', id="unknown parameter"),
        pytest.param(
            "postgresql://u@h/db?sslmode=require&sslmode=disable",
            "'sslmode' is given 2 times",
            id="a parameter twice",
        ),
        pytest.param(
            "postgresql://u@h/db?schema=a&schema=b", "'schema' is given 2 times", id="schema twice"
        ),
        pytest.param("postgresql://u@h/db?replication=database", "'replication'", id="replication"),
        # A schema reaches SQL as a name: a syntax error said as a connection failure.
        pytest.param(
            "postgresql://u@h/db?schema=Bad-Schema", "schema 'Bad-Schema' is not", id="schema"
        ),
        pytest.param(
            "postgresql://u@h/db?schema=public%3Bdrop", "schema 'public;drop' is not", id="sql"
        ),
        pytest.param(
            "postgresql://u@h1,h2/db?target_session_attrs=standby",
            "target_session_attrs=standby",
            id="a read-only target",
        ),
        pytest.param("postgresql://u@h:54x/db", "the port is not a number: '54x'", id="port"),
        pytest.param(
            "postgresql://u@h1:5432,h2:x/db", "the port is not a number: 'x'", id="second port"
        ),
        pytest.param(
            "postgresql://u@h1,h2/db?port=1,2,3", "3 ports for 2 hosts", id="ports and hosts"
        ),
        pytest.param("postgresql://u@h", "needs a database name", id="no database"),
        pytest.param("postgresql://u@h?sslmode", '"sslmode"', id="parameter without value"),
    ],
)
def test_what_cannot_be_honoured_is_refused_in_one_line_naming_it(url: str, named: str) -> None:
    with pytest.raises(StoreURLError) as err:
        StoreConfig.parse(url)
    text = str(err.value)
    assert named in text and "\n" not in text and text.startswith("not a valid store URL"), text


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(f"postgresql://u:{SECRET}@h/db?nope=1", id="unknown parameter"),
        pytest.param(f"postgresql://u:{SECRET}@h:x/db", id="bad port"),
        pytest.param("postgresql://u:s3cret%20pw@h", id="no database, encoded password"),
        pytest.param(f"postgresql://u:{SECRET} x@h/db", id="libpq quotes the password"),
        pytest.param(f"postgresql://u:{SECRET}%zz@h/db", id="bad percent-encoding"),
        pytest.param(f"postgresql://u:{SECRET}@[::1/db", id="libpq quotes the whole URL"),
        pytest.param(f"postgresql://u@h/db?password={SECRET}&x=1", id="password parameter"),
        pytest.param(f"postgresql://u@h/db?sslpassword={SECRET}&x=1", id="sslpassword"),
        pytest.param(f"mysql://u:{SECRET}@h/db", id="another scheme"),
    ],
)
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    with pytest.raises(StoreURLError) as err:
        StoreConfig.parse(url)
    text = str(err.value)
    assert "s3cret" not in text and "***" in text, text


def test_the_url_is_shown_without_its_password() -> None:
    cfg = StoreConfig.parse(
        f"postgresql://u:{SECRET}@h1:5432,h2:5432/db?sslpassword=k3y&sslmode=require&schema=s"
    )
    assert cfg.shown == (
        "postgresql://u:***@h1:5432,h2:5432/db?sslpassword=***&sslmode=require&schema=s"
    )
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"  # the last @ ends it
    assert redact("sqlite:///x.db") == "sqlite:///x.db"


# ------------------------------------------------------------ through the command line


# ------------------------------------------------- every connection, against a real server


def test_a_connect_timeout_in_the_url_wins_over_ours() -> None:
    assert conninfo_to_dict(with_defaults("host=h connect_timeout=9", connect_timeout=5)) == {
        "host": "h",
        "connect_timeout": "9",
    }
    assert conninfo_to_dict(with_defaults("host=h", connect_timeout=5))["connect_timeout"] == "5"
