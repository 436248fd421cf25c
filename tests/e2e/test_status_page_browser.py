"""The status page in a real headless browser: Debian's chromium, driven by Playwright, against
the real `cronsource serve` (the installed entry point) on PostgreSQL.

The history is made by the real engine with the time passed in, ending at the real clock (the
server has no other): two days of four CronWorkflows, every 10 minutes, with failed runs, a
suspension, a six-hour outage, and a Forbid CronWorkflow whose runs outlast its period (so every
hour both fires and skips), and then the scheduler stops. The tests read the page at 1280 px
as an operator would, check the DOM and decode the screenshot's pixels, and click the commands.
The screenshots they take are the ones docs/user-guide.md shows.

Chromium comes from the distribution (`apt-get install -y chromium`), never from
`playwright install`; without it the test fails (a missing browser must not pass as a skip).
"""

from __future__ import annotations

import os
import re
import struct
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest

from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.entrypoints.http import ServeSettings, create_app
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.manifest import parse_manifest
from tests import serve_process
from tests.http_helpers import manifest, pg_engine, serving
from tests.instants import T0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TOKEN = "page-token-7"
STEP = timedelta(minutes=10)
# the page's colours (adapters/entrypoints/http/static/style.css)
FIRED, FAILED = (0x2E, 0x9E, 0x4F), (0xD2, 0x3F, 0x31)
SUSPENDED_GREY, FORBID_ORANGE = (0x9A, 0xA0, 0xA6), (0xF0, 0x8C, 0x00)
DEADLINE_PURPLE = (0x8E, 0x44, 0xAD)
ABSOLUTE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")  # to the second, zone named


def floor(t: datetime, step: timedelta = STEP) -> datetime:
    s = step.total_seconds()
    return datetime.fromtimestamp(t.timestamp() // s * s, UTC)


@dataclass
class History:
    start: datetime  # when the CronWorkflows were applied
    stop: datetime  # the scheduler's last decision
    ids: dict[str, UUID]
    fired: dict[str, list[str]]  # per CronWorkflow, its Workflows in the order they fired
    phase: dict[str, str]  # how each Workflow ended (Active: it has not)
    nightly: str  # `ops/nightly`'s time of day in New York, HH:MM


def seed(engine: Engine, now: datetime) -> History:
    """Two days as `cronsource run` would have lived them, one scheduler pass every 10 minutes
    up to `stop`, at least a minute and a whole period before `now` (so a tick is overdue by
    more than the 30 s late tolerance when the page is read):
    - `hourly` fires each hour; the runs of hours 0 mod 7 fail;
    - `halfhourly` is suspended for 10 hours;
    - `mixed` (every 10 min, concurrencyPolicy Forbid) has runs of 15 min, so every other tick
      is skipped (ConcurrencyForbid) in the same hour as fires; suspended for one hour too;
    - `ops/nightly` fires once a day, New York time, half a day from `now`: its next run
      is ahead of the page whatever the hour the test runs (a fixed 02:30 was due in the
      minutes after 07:30 UTC, and the page then rightly named it late);
    - nobody ran during a 6-hour outage (its ticks are skipped as DeadlineExceeded)."""
    svc = engine.service
    stop = floor(now - timedelta(minutes=1)) - STEP
    nightly = (now + timedelta(hours=12)).astimezone(ZoneInfo("America/New_York"))
    if nightly.hour in (1, 2):  # the hours a DST change skips or repeats there
        nightly += timedelta(hours=3)
    start = stop - timedelta(days=2)
    outage = (start + timedelta(hours=20), start + timedelta(hours=26))
    suspensions = {
        "halfhourly": (start + timedelta(hours=30), start + timedelta(hours=40)),
        "mixed": (start + timedelta(hours=33, minutes=20), start + timedelta(hours=34, minutes=20)),
    }
    docs = {
        "hourly": manifest("hourly", "0 * * * *"),
        "halfhourly": manifest("halfhourly", "*/30 * * * *"),
        "mixed": manifest("mixed", "*/10 * * * *", concurrencyPolicy="Forbid"),
        "nightly": manifest(
            "nightly",
            f"{nightly.minute} {nightly.hour} * * *",
            timezone="America/New_York",
            namespace="ops",
        ),
    }
    for m in docs.values():
        svc.apply(parse_manifest(m), start)
    ids = {name: svc.find(m["metadata"]["namespace"], name).id for name, m in docs.items()}
    duration = {
        "hourly": timedelta(minutes=5),
        "halfhourly": timedelta(minutes=20),
        "mixed": timedelta(minutes=15),
        "nightly": timedelta(hours=1),
    }
    ends: list[tuple[datetime, str, str, str]] = []  # (finished, cron, workflow, phase)
    seen: set[str] = set()
    done: list[tuple[datetime, str, str, str]] = []
    fired: dict[str, list[str]] = {name: [] for name in docs}
    t = start
    while t < stop:
        t += STEP
        for end in sorted(e for e in ends if e[0] <= t):
            svc.run_completed(ids[end[1]], end[2], end[3], end[0], end[0])  # type: ignore[arg-type]
            ends.remove(end)
            done.append(end)
        for name, (a, b) in suspensions.items():
            if t == a:
                svc.suspend(ids[name], t, by="oncall", note="maintenance")
            if t == b:
                svc.resume(ids[name], t, by="oncall")
        if outage[0] <= t < outage[1]:
            continue
        svc.tick(list(ids.values()), t)
        for name, cid in ids.items():
            for wf in svc.repository.get(cid).active:
                if wf in seen:
                    continue
                seen.add(wf)
                n = int(wf.rsplit("-", 1)[1])
                hour = datetime.fromtimestamp(n, UTC).hour
                failed = (name == "hourly" and hour % 7 == 0) or (name == "mixed" and n % 7 == 0)
                ends.append((t + duration[name], name, wf, "Failed" if failed else "Succeeded"))
                fired[name].append(wf)
    engine.projector.catch_up(stop)
    phase = {wf: p for end, _, wf, p in done} | {e[2]: "Active" for e in ends}
    return History(start, stop, ids, fired, phase, f"{nightly:%H:%M}")


@dataclass
class Served:
    url: str  # the page
    pg_url: str
    engine: Engine  # the test's own engine on the same store (the "scheduler" that stopped)
    history: History


@pytest.fixture
def served(pg_url: str, tmp_path: Path) -> Iterator[Served]:
    """`cronsource serve --token-file` as a user starts it, over the seeded store."""
    exe = Path(sys.executable).with_name("cronsource")
    if not exe.exists():
        pytest.fail(f"{exe} is missing: install the project (pip install -e '.[dev]')")
    engine = pg_engine(pg_url)
    history = seed(engine, datetime.now(UTC))
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    env = {**os.environ, "PATH": f"{exe.parent}:{os.environ.get('PATH', '')}"}
    try:
        with serve_process.serve([str(exe)], pg_url, "--token-file", str(token), env=env) as proc:
            yield Served(proc.base + "/", pg_url, engine, history)
    finally:
        engine.close()
    assert proc.returncode == 0, proc.stderr[-2000:]


def open_page(browser: Any, url: str, errors: list[str]) -> Any:
    """The page at `url`, signed in with the token, the list shown."""
    page = browser.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url)
    page.wait_for_selector("body[data-state=login]", timeout=20_000)
    page.fill("#token", TOKEN)
    page.click("#login button[type=submit]")
    page.wait_for_selector("body[data-state=ready]", timeout=20_000)
    assert all("401" in e for e in errors), errors  # only the request that asked for a token
    errors.clear()
    return page


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit, non-interlaced PNG (what Chromium writes)."""
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


def colours(
    rows: list[bytes], box: tuple[float, float, float, float] | None = None
) -> Counter[tuple[int, int, int]]:
    """Pixel colours of the image, or of the CSS-pixel box (x, y, width, height) in it."""
    x0, y0, x1, y1 = 0, 0, len(rows[0]) // 3, len(rows)
    if box is not None:
        x, y, w, h = box
        x0, y0, x1, y1 = round(x), round(y), round(x + w), round(y + h)
    out: Counter[tuple[int, int, int]] = Counter()
    for row in rows[y0:y1]:
        for i in range(3 * x0, 3 * x1, 3):
            out[(row[i], row[i + 1], row[i + 2])] += 1
    return out


def box_of(locator: Any) -> tuple[float, float, float, float]:
    b = locator.bounding_box()
    assert b is not None
    return b["x"], b["y"], b["width"], b["height"]


def fits(page: Any, width: int) -> None:
    """Nothing is cut off at this width: no horizontal scrolling, and every timeline lies
    inside the window and takes most of it."""
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_timeout(100)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for tl in page.locator("#crons .timeline").all():
        x, _, w, _ = box_of(tl)
        assert x >= 0 and x + w <= width, (x, w, width)
        assert w >= 0.85 * width, (w, width)
    x, _, w, _ = box_of(page.locator("#crons .axis"))
    assert x + w <= width


def test_overview_shows_skips_in_fired_buckets_and_a_banner_when_no_scheduler_decides(
    served: Served, browser: Any
) -> None:
    errors: list[str] = []
    page = open_page(browser, served.url, errors)
    assert errors == []
    names = page.locator("#crons tr.cw")
    assert [names.nth(i).get_attribute("data-name") for i in range(names.count())] == [
        "default/halfhourly",
        "default/hourly",
        "default/mixed",
        "ops/nightly",
    ]

    # The scheduler stopped at `stop`: the banner says so, and the next runs read as late.
    stale = page.locator("#stale")
    assert stale.is_visible()
    text = stale.inner_text()
    assert "No scheduler is deciding" in text and "late tolerance 30 s" in text
    assert re.search(
        r"default/\w+ (and \d more CronWorkflow\(s\) )?ha(s|ve) a tick due since", text
    )
    assert "No `cronsource run` is connected" in text
    mixed = page.locator("tr.cw[data-name='default/mixed']")
    nxt = mixed.locator("td.next .when")
    assert "overdue" in (nxt.get_attribute("class") or "")
    assert re.search(r"\d+ (s|min) late$", nxt.inner_text()), nxt.inner_text()

    # Times to the second with their zone, and relative times beside them.
    last = mixed.locator("td.last").inner_text()
    fired = datetime.fromtimestamp(int(served.history.fired["mixed"][-1].rsplit("-", 1)[1]), UTC)
    assert last.startswith(fired.strftime("%Y-%m-%d %H:%M:%S UTC")), last
    assert re.search(r"\d+ min ago$", last), last
    nightly = page.locator("tr.cw[data-name='ops/nightly']")
    assert re.search(r"in \d+ (h|min|s)", nightly.locator("td.next").inner_text())
    assert ABSOLUTE.search(nightly.locator("td.next").inner_text())

    # Buckets that fired and skipped show both; skip reasons have their own colours.
    def cells(row: str, selector: str) -> Any:
        return page.locator(f"tr.tlrow[data-name='{row}'] .cell{selector}")

    both = cells(
        "default/mixed",
        ".mixed[data-skips~=ConcurrencyForbid]:is([data-state=fired], [data-state=failed])",
    )
    assert both.count() >= 36  # every hour of two days, but the outage and the suspension
    assert cells("default/mixed", "[data-skips~=Suspended]").count() >= 1
    # the outage's 6 hours, which need not start on the hour, and the suspension's 10
    assert cells("default/mixed", "[data-skips~=DeadlineExceeded]").count() in (6, 7)
    assert cells("default/halfhourly", "[data-skips~=Suspended]").count() in (10, 11)
    failed = [wf for wf in served.history.fired["hourly"] if served.history.phase[wf] == "Failed"]
    assert cells("default/hourly", "[data-state=failed]").count() == len(failed) > 0
    title = both.first.get_attribute("title") or ""
    assert re.search(r"fired \d, .*skipped \d \(ConcurrencyForbid\)", title), title

    # A time axis with a label per day over the 7 days shown.
    ticks = page.locator("#crons .axis .tick.day")
    assert 6 <= ticks.count() <= 8
    assert re.fullmatch(r"[A-Z][a-z]{2} \d{1,2} [A-Z][a-z]{2}", ticks.first.inner_text())

    fits(page, 1400)
    fits(page, 1280)
    shot = DOCS / "status-page.png"
    page.screenshot(path=str(shot), full_page=True)
    width, _, pixels = read_png(shot)
    assert width == 1280
    seen = colours(pixels)
    assert len(seen) > 20, "the screenshot is (nearly) blank"
    for colour in (FIRED, FAILED, SUSPENDED_GREY, FORBID_ORANGE, DEADLINE_PURPLE):
        assert seen[colour] >= 100, colour
    # In the pixels of single buckets that fired, the skip colour is drawn too.
    for i in range(0, both.count(), 5):
        inside = colours(pixels, box_of(both.nth(i)))
        assert inside[FIRED] + inside[FAILED] >= 8 and inside[FORBID_ORANGE] >= 8, inside

    # The scheduler comes back and decides what was due: the banner goes.
    svc = served.engine.service
    svc.tick(list(served.history.ids.values()), datetime.now(UTC))
    page.click("#refresh")
    page.wait_for_selector("body[data-scheduler=ok][data-state=ready]", timeout=20_000)
    assert stale.is_hidden()
    nxt = mixed.locator("td.next .when")
    assert "overdue" not in (nxt.get_attribute("class") or "")
    assert re.search(r"in \d+ (s|min)$", nxt.inner_text()), nxt.inner_text()

    # Times in the browser's zone, on request (and remembered).
    page.select_option("#zone", "local")
    page.wait_for_selector("body[data-state=ready]", timeout=20_000)
    berlin = fired.astimezone(ZoneInfo("Europe/Berlin"))
    offset = int(berlin.utcoffset().total_seconds()) // 3600  # type: ignore[union-attr]
    shown = mixed.locator("td.last .abs").inner_text()
    assert shown == berlin.strftime(f"%Y-%m-%d %H:%M:%S GMT+{offset}"), shown
    assert page.evaluate("localStorage.getItem('cronsource.zone')") == "local"
    assert errors == []


def test_each_cronworkflow_has_a_page_with_its_workflows_next_runs_and_commands(
    served: Served, browser: Any
) -> None:
    errors: list[str] = []
    page = open_page(browser, served.url, errors)
    page.click("tr.cw[data-name='default/hourly'] a.name")
    page.wait_for_selector("body[data-view=detail][data-state=ready]", timeout=20_000)
    assert page.url.endswith("#/namespaces/default/cronworkflows/hourly")
    assert page.inner_text("#detail-title") == "default/hourly"

    # Its Workflows, newest first, with the phases their runs ended in.
    h = served.history
    wfs = page.locator("#workflows tbody tr")
    shown = [
        (wfs.nth(i).get_attribute("data-workflow"), wfs.nth(i).locator(".badge").inner_text())
        for i in range(wfs.count())
    ]
    assert shown == [(wf, h.phase[wf]) for wf in reversed(h.fired["hourly"][-20:])]
    assert {"Failed", "Succeeded"} <= {p for _, p in shown}
    # Its next runs, in its own zone and in UTC, with how far off they are.
    assert page.locator("#next tbody tr").count() == 5
    assert re.search(r"in \d+ (s|min|h)", page.locator("#next tbody tr").first.inner_text())

    # A CronWorkflow with a run still going: its newest Workflow is Active.
    page.goto(served.url + "#/namespaces/default/cronworkflows/mixed")
    page.wait_for_selector("#detail[data-name='default/mixed']", timeout=20_000)
    page.wait_for_selector("body[data-state=ready]")
    wfs = page.locator("#workflows tbody tr")
    assert wfs.count() == 20  # the newest 20
    newest = h.fired["mixed"][-1]
    assert h.phase[newest] == "Active"
    assert wfs.first.get_attribute("data-workflow") == newest
    assert wfs.first.locator(".badge").inner_text() == "Active"
    phases = Counter(wfs.nth(i).get_attribute("data-phase") for i in range(20))
    assert phases == Counter(h.phase[wf] for wf in h.fired["mixed"][-20:])
    page.screenshot(path=str(DOCS / "status-page-detail.png"), full_page=True)

    # The next runs of a CronWorkflow in New York are shown in New York time.
    page.goto(served.url + "#/namespaces/ops/cronworkflows/nightly")
    page.wait_for_selector("#detail[data-name='ops/nightly']", timeout=20_000)
    page.wait_for_selector("body[data-state=ready]")
    local = page.locator("#next tbody td.local").first.inner_text()
    at = served.history.nightly
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\d {at}:00 E[SD]T", local), local
    assert page.inner_text("#next-zone") == "(America/New_York)"

    # The buttons (a token was given) call the API; the store shows the result.
    page.goto(served.url + "#/namespaces/default/cronworkflows/hourly")
    page.wait_for_selector("#detail[data-name='default/hourly']", timeout=20_000)
    page.wait_for_selector("body[data-state=ready]")
    assert page.locator("#actions").is_visible() and page.locator("#resume").is_hidden()
    svc = served.engine.service

    def stored() -> Any:
        return svc.repository.get(served.history.ids["hourly"])

    page.click("#suspend")
    page.wait_for_selector("#action-result.ok", timeout=20_000)
    assert page.inner_text("#action-result").startswith("suspended")
    assert stored().suspended
    page.wait_for_selector("#detail-state.Suspended", timeout=20_000)
    assert page.locator("#suspend").is_hidden()
    page.click("#resume")
    page.wait_for_function(
        "document.querySelector('#action-result').textContent.startsWith('resumed')"
    )
    assert not stored().suspended
    page.on("dialog", lambda d: d.accept())
    page.click("#trigger")
    page.wait_for_function(
        "document.querySelector('#action-result').textContent.startsWith('started')"
    )
    started = page.inner_text("#action-result").removeprefix("started ")
    assert started in stored().active
    page.wait_for_selector(f"#workflows tr[data-workflow='{started}']", timeout=20_000)
    row = page.locator(f"#workflows tr[data-workflow='{started}']")
    assert row.locator("td").nth(2).inner_text() == "manual"
    assert errors == []


def test_status_page_asks_for_the_token_then_shows_the_table(pg_url: str, browser: Any) -> None:
    engine = pg_engine(pg_url)
    engine.service.apply(parse_manifest(manifest("hourly")), T0)
    engine.projector.catch_up()
    app = create_app(engine, ServeSettings(token="page-token"), VirtualClock(T0))
    try:
        with serving(app) as base:
            page = browser.new_page()
            page.goto(base + "/")
            page.wait_for_selector("body[data-state=login]", timeout=20_000)
            assert page.locator("#crons tbody tr").count() == 0
            page.fill("#token", "page-token")
            page.click("#login button[type=submit]")
            page.wait_for_selector("body[data-state=ready]", timeout=20_000)
            assert page.locator("#crons tbody tr.cw").count() == 1
            assert page.locator("#login").is_hidden()
    finally:
        engine.close()


def test_a_cronworkflow_paused_after_failures_shows_paused_until_resumed(
    pg_url: str, browser: Any
) -> None:
    """Issue 23 item 1: the page shows a pause after failures as a `Paused` badge (its tooltip
    and the detail page name the runs), offers Resume, and the resume clears it."""
    engine = pg_engine(pg_url)
    body = manifest("flaky", "* * * * *")
    body["metadata"]["annotations"] = {"cronsource.io/pause-after-failures": "2"}
    svc = engine.service
    cron_id, _ = svc.apply(parse_manifest(body), T0)
    runs = []
    for m in (1, 2):
        t = T0 + timedelta(minutes=m)
        svc.tick([cron_id], t)
        runs.append(f"flaky-{int(t.timestamp())}")
        svc.run_completed(cron_id, runs[-1], "Failed", t + timedelta(seconds=5), t)
    engine.projector.catch_up()
    app = create_app(engine, ServeSettings(), VirtualClock(T0 + timedelta(minutes=3)))
    try:
        with serving(app) as base:
            page = browser.new_page()
            page.goto(base + "/")
            page.wait_for_selector("body[data-state=ready]", timeout=20_000)
            badge = page.locator("#crons tr.cw[data-name='default/flaky'] .badge")
            assert badge.inner_text() == "Paused"
            assert ", ".join(runs) in (badge.get_attribute("title") or "")
            page.goto(base + "/#/namespaces/default/cronworkflows/flaky")
            page.wait_for_selector("#detail[data-name='default/flaky']", timeout=20_000)
            page.wait_for_selector("body[data-state=ready]")
            assert page.inner_text("#detail-state") == "Paused"
            assert "paused after 2 consecutive failed runs" in page.inner_text("#paused")
            assert page.locator("#resume").is_visible() and page.locator("#suspend").is_hidden()
            page.click("#resume")
            page.wait_for_selector("#detail-state.Active", timeout=20_000)
            assert page.locator("#paused").count() == 0
            assert svc.load(cron_id).failure_pause is None
    finally:
        engine.close()
