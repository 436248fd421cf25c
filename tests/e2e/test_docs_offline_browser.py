"""/docs (Swagger UI) and /redoc (ReDoc) in Debian's headless Chromium with every request off
loopback refused, as in a cluster without internet access: each page must render the API's
operations from the assets in our dependencies (fastapi-offline), not stay blank."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from tests.http_helpers import serving
from tests.instants import T0

pytestmark = pytest.mark.timeout(180)

#: Operations the pages must show (their paths, as the OpenAPI document names them).
PATHS = ["/api/v1/namespaces/{namespace}/cronworkflows", "/api/v1/events", "/readyz"]


@pytest.fixture
def base_url() -> Iterator[str]:
    from cronsource.adapters.bootstrap import bootstrap

    engine = bootstrap("memory:")
    try:
        with serving(create_app(engine, ServeSettings(), VirtualClock(T0))) as base:
            yield base
    finally:
        engine.close()


def offline_page(context: Any) -> tuple[Any, list[str], list[str]]:
    """A page whose requests to anything but 127.0.0.1 are aborted (and listed), with the
    page's errors listed too."""
    page = context.new_page()
    refused: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, refused, errors


def test_swagger_ui_renders_the_operations_offline(base_url: str, browser: Any) -> None:
    page, refused, errors = offline_page(browser)
    page.goto(base_url + "/docs")
    page.wait_for_selector(".opblock", timeout=30_000)
    shown = page.locator(".opblock-summary-path").all_inner_texts()
    for path in PATHS:
        assert any(path in s.replace("\u200b", "") for s in shown), (path, shown[:20])
    assert page.locator(".opblock").count() >= 15
    assert page.locator(".info .title").inner_text().startswith("cronsource")
    assert refused == [] and errors == [], (refused, errors)


def test_redoc_renders_the_operations_offline(base_url: str, browser: Any) -> None:
    page, refused, errors = offline_page(browser)
    page.goto(base_url + "/redoc")
    page.wait_for_selector("[data-section-id^='operation/']", timeout=30_000)
    assert page.locator("[data-section-id^='operation/']").count() >= 15
    text = page.inner_text("body")
    for path in PATHS:
        assert path in text, path
    # Only the "API docs by Redocly" logo of the sidebar's footer is fetched from outside
    # (ReDoc has no option for it): cosmetic, the page renders without it.
    assert set(refused) <= {"https://cdn.redoc.ly/redoc/logo-mini.svg"}, refused
    assert errors == [], errors
