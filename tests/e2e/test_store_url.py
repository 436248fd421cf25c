"""The password of a PostgreSQL store URL is printed nowhere by the installed CLI, a `cronsource
run` process (its log, /metrics, /readyz) or a `cronsource serve` process (its pages and log),
against a real server that answers."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.integration.test_store_url import CLI, cs
from tests.probe_helpers import EVERY_SECOND, RunProcess
from tests.serve_process import serve as serve_process
from tests.unit.test_store_url import SECRET


@pytest.mark.postgres
def test_the_password_is_printed_nowhere_by_a_store_that_answers(
    migrated_pg_url: str, tmp_path: Path
) -> None:
    """The test server trusts every login, so a password in the URL is accepted and ignored:
    each command below really works against it, and its output never shows the password."""
    parts = urlsplit(migrated_pg_url)
    netloc = f"{parts.username}:{SECRET}@{parts.hostname}:{parts.port}"
    url = urlunsplit(parts._replace(netloc=netloc, query="sslpassword=" + SECRET))
    shown = f"{parts.username}:***@{parts.hostname}:{parts.port}"
    for args in (["migrate"], ["version"], ["-o", "json", "version"], ["list"]):
        r = cs("--store", url, *args)
        assert r.returncode == 0, r.stderr
        assert "s3cret" not in r.stdout + r.stderr, r.stdout + r.stderr
        if args[-1] in ("migrate", "version"):
            assert shown in r.stdout, r.stdout
    manifest = tmp_path / "every-second.yaml"
    manifest.write_text(EVERY_SECOND)
    run = RunProcess(
        [CLI, "--store", url, "run", str(manifest), "--http-port", "0"]
        + ["--workflows-dir", str(tmp_path / "workflows")],
    )
    try:
        run.wait_for_probes()
        scraped = run.get("/metrics")[2] + run.get("/readyz")[2]
    finally:
        assert run.stop() == 0, run.stderr[-3000:]
    assert f"store postgresql://{shown}" in run.stderr, run.stderr
    assert "s3cret" not in run.stderr + scraped
    with serve_process([CLI], url) as served:
        page = "".join(
            httpx.get(served.base + path, timeout=10).text
            for path in ("/", "/metrics", "/api/v1/scheduler", "/healthz")
        )
    assert "s3cret" not in page + served.stderr and shown in served.stderr, served.stderr
