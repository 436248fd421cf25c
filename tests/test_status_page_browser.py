"""The status page in a real headless browser: Debian's chromium, driven by Playwright.

The app serves two days of history made by the real service on a fixed clock (fires, failed
runs, a suspension, an outage); the test loads `/`, checks the table rows (names, last and next
run), that every row drew its timeline with fired, failed and skipped cells, and that a
screenshot is a non-blank PNG in which those cell colours actually appear.

Chromium comes from the distribution (`apt-get install -y chromium`), never from
`playwright install`; without it the test fails (a missing browser must not pass as a skip).
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.http import ServeSettings, create_app
from domain.manifest import parse_manifest
from tests.http_helpers import T0, FixedClock, manifest, pg_engine, serving

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOW = T0 + timedelta(days=2)  # 2026-05-06T10:00:00Z
OUTAGE = (T0 + timedelta(hours=20), T0 + timedelta(hours=26))
SUSPENDED = (T0 + timedelta(hours=30), T0 + timedelta(hours=40))
# the page's colours (adapters/static/style.css)
FIRED, FAILED = (0x2E, 0x9E, 0x4F), (0xD2, 0x3F, 0x31)
SUSPENDED_GREY, DEADLINE_PURPLE = (0x9A, 0xA0, 0xA6), (0x8E, 0x44, 0xAD)


def seed(engine: Any) -> None:
    """Two days as the scheduler would have lived them, every 30 minutes: `hourly` fires each
    hour and every 7th run fails; `halfhourly` is suspended for 10 hours; nobody ran during a
    6-hour outage (its ticks are skipped as DeadlineExceeded); `nightly` fires at 02:30 New York."""
    svc = engine.service
    for m in (
        manifest("hourly", "0 * * * *"),
        manifest("halfhourly", "*/30 * * * *"),
        manifest("nightly", "30 2 * * *", timezone="America/New_York", namespace="ops"),
    ):
        svc.apply(parse_manifest(m), T0)
    ids = [svc.find(ns, n).id for ns, n in [("default", "hourly"), ("default", "halfhourly")]]
    ids.append(svc.find("ops", "nightly").id)
    t = T0
    while t < NOW:
        t += timedelta(minutes=30)
        if OUTAGE[0] <= t < OUTAGE[1]:
            continue
        if t == SUSPENDED[0]:
            svc.suspend(ids[1], t, by="oncall")
        if t == SUSPENDED[1]:
            svc.resume(ids[1], t, by="oncall")
        svc.tick(ids, t)
        if t.minute == 0:
            run = f"hourly-{int(t.timestamp())}"
            phase = "Failed" if t.hour % 7 == 0 else "Succeeded"
            svc.run_completed(
                ids[0], run, phase, t + timedelta(minutes=5), t + timedelta(minutes=5)
            )
    engine.catch_up(NOW)


@pytest.fixture
def page_url(pg_url: str) -> Iterator[str]:
    engine = pg_engine(pg_url)
    seed(engine)
    try:
        with serving(create_app(engine, ServeSettings(), FixedClock(NOW))) as base:
            yield base + "/"
    finally:
        engine.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium);"
            " the status page test needs a real browser"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh --user-data-dir
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 2200, "height": 900},  # timeline cells of ~6 px
        )
        try:
            yield context
        finally:
            context.close()


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB(A) rows of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows] if bpp == 3 else [_rgb(r) for r in rows]


def _rgb(rgba: bytes) -> bytes:
    return bytes(b for i, b in enumerate(rgba) if i % 4 != 3)


def colours(rows: list[bytes]) -> Counter[tuple[int, int, int]]:
    out: Counter[tuple[int, int, int]] = Counter()
    for row in rows:
        for i in range(0, len(row), 3):
            out[(row[i], row[i + 1], row[i + 2])] += 1
    return out


def test_status_page_shows_cronworkflows_and_their_timelines(
    page_url: str, browser: Any, tmp_path: Path
) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(page_url)
    page.wait_for_selector("body[data-state=ready]", timeout=20_000)
    assert errors == []

    rows = page.locator("#crons tbody tr")
    assert rows.count() == 3
    assert [rows.nth(i).get_attribute("data-name") for i in range(3)] == [
        "default/halfhourly",
        "default/hourly",
        "ops/nightly",
    ]
    hourly = page.locator("tr[data-name='default/hourly']")
    assert hourly.locator("td.last").inner_text() == "2026-05-06 10:00 UTC"
    assert hourly.locator("td.next").inner_text() == "2026-05-06 11:00 UTC"
    nightly = page.locator("tr[data-name='ops/nightly']")
    assert nightly.locator("td.next").inner_text() == "2026-05-07 06:30 UTC"
    assert "Summary" not in page.inner_text("#summary")
    assert page.inner_text("#summary").startswith("3 CronWorkflow(s)")

    def cells(row: Any, state: str | None = None) -> int:
        sel = ".timeline .cell" + (f"[data-state={state}]" if state else "")
        return int(row.locator(sel).count())

    half = page.locator("tr[data-name='default/halfhourly']")
    for row in (hourly, half, nightly):
        assert cells(row) == 7 * 24  # the default 7 days, one cell per hour
    assert cells(hourly, "fired") + cells(hourly, "failed") == 48 - 6
    assert cells(hourly, "failed") == 7  # hours 0 mod 7 that fired: 14 21 00 14 21 00 07
    assert cells(hourly, "skipped") == 6  # the outage
    assert cells(half, "skipped") == 6 + 10
    assert half.locator(".cell.reason-Suspended").count() == 10
    assert half.locator(".cell.reason-DeadlineExceeded").count() == 6
    assert cells(nightly, "fired") == 1  # 06:30 UTC on May 5 fell in the outage
    assert nightly.locator(".cell.reason-DeadlineExceeded").count() == 1
    label = nightly.locator(".timeline").get_attribute("aria-label")
    assert label == "fired 1, failed 0, skipped 1"
    title = hourly.locator(".cell[data-state=failed]").first.get_attribute("title")
    assert title is not None and "fired 1, failed 1" in title

    hourly.locator("button.link").click()
    page.wait_for_selector("#events tbody tr")
    assert page.inner_text("#details-title") == "default/hourly: events"
    assert page.locator("#events tbody tr").count() == 50

    shot = tmp_path / "status.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    width, height, pixels = read_png(shot)
    assert width == 2200 and height >= 300
    seen = colours(pixels)
    assert len(seen) > 20, "the screenshot is (nearly) blank"
    cell_px = 4 * 18  # cells share the row's width; at 2200 px each is about 6 px wide
    assert seen[FIRED] >= 30 * cell_px
    assert seen[FAILED] >= 7 * cell_px
    assert seen[SUSPENDED_GREY] >= 10 * cell_px
    assert seen[DEADLINE_PURPLE] >= 13 * cell_px


def test_status_page_asks_for_the_token_then_shows_the_table(pg_url: str, browser: Any) -> None:
    engine = pg_engine(pg_url)
    engine.service.apply(parse_manifest(manifest("hourly")), T0)
    engine.catch_up()
    app = create_app(engine, ServeSettings(token="page-token"), FixedClock(T0))
    try:
        with serving(app) as base:
            page = browser.new_page()
            page.goto(base + "/")
            page.wait_for_selector("body[data-state=login]", timeout=20_000)
            assert page.locator("#crons tbody tr").count() == 0
            page.fill("#token", "page-token")
            page.click("#login button[type=submit]")
            page.wait_for_selector("body[data-state=ready]", timeout=20_000)
            assert page.locator("#crons tbody tr").count() == 1
            assert page.locator("#login").is_hidden()
    finally:
        engine.close()
