"""cronsource resolves hashed `H` schedules exactly as Argo's PR #16604 does.

The oracle is the PR's own util/cronhash (tests/argo/cronhash: copied unchanged, see its
NOTICE; built by scripts/build-argo-cronhash.sh from Go's standard library alone, in seconds).
Both sides get the same schedule, namespace and name; they must give the same expansion, or
the same error message, character for character. Cases: the fixture tables of
tests/unit/test_cronhash.py, a sweep of many CronWorkflow names over the PR's schedules, and
hypothesis-generated schedules built from Argo's item grammar, malformed items, names, blanks
and prefixes. The tables go to the oracle in one batch; generated cases go one at a time to one
long-lived oracle process, so that hypothesis can shrink a disagreement to its smallest case.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cronsource.domain.cronhash import MalformedHash, expand
from tests.buildscript import REPO, built_paths
from tests.unit import test_cronhash as fixtures

BUILD_SCRIPT = REPO / "scripts" / "build-argo-cronhash.sh"
VENDORED = REPO / "tests" / "argo" / "cronhash" / "cronhash" / "cronhash.go"
#: The git blob of util/cronhash/cronhash.go at the PR's head 9c72a977 (NOTICE).
PR_BLOB = "b7d629fa1a8fc437e2791c3fd12fd84d346f93f4"
ENV_ORACLE = "CRONSOURCE_ARGO_CRONHASH"
BUILD_TIMEOUT = 600.0
CALL_TIMEOUT = 120.0

Case = tuple[str, str, str]  # schedule, namespace, name


@cache
def oracle() -> Path:
    """The oracle binary: CRONSOURCE_ARGO_CRONHASH, else built (once per machine)."""
    explicit = os.environ.get(ENV_ORACLE)
    if explicit:
        return Path(explicit)
    return built_paths(BUILD_SCRIPT, 1, BUILD_TIMEOUT)[0]


def argo(cases: Sequence[Case]) -> list[str]:
    """Argo's answer to each case: the expansion, or `error: <message>`."""
    lines = "".join(
        json.dumps({"id": i, "schedule": s, "namespace": ns, "name": n}) + "\n"
        for i, (s, ns, n) in enumerate(cases)
    )
    proc = subprocess.run(
        [str(oracle())],
        input=lines,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"the cronhash oracle failed: {proc.stderr[-2000:]}"
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line]
    assert [a["id"] for a in answers] == list(range(len(cases)))
    return [a["expanded"] if "expanded" in a else f"error: {a['error']}" for a in answers]


class Session:
    """One oracle process answering one case at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [str(oracle())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.asked = 0

    def ask(self, case: Case) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        s, ns, n = case
        request = {"id": self.asked, "schedule": s, "namespace": ns, "name": n}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the cronhash oracle ended (exit {self.proc.poll()})"
        a = json.loads(line)
        assert a["id"] == self.asked
        self.asked += 1
        return str(a["expanded"]) if "expanded" in a else f"error: {a['error']}"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=CALL_TIMEOUT)


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    s = Session()
    try:
        yield s
    finally:
        s.close()


def ours(case: Case) -> str:
    try:
        return expand(*case)
    except MalformedHash as e:
        return f"error: {e}"


def assert_agree(cases: Sequence[Case]) -> int:
    """Every case answered alike; returns how many were compared."""
    theirs = argo(cases)
    differ = [
        (case, mine, their)
        for case, their in zip(cases, theirs, strict=True)
        if (mine := ours(case)) != their
    ]
    assert not differ, f"{len(differ)} of {len(cases)} differ, first: {differ[:5]}"
    return len(cases)


def test_the_oracle_is_the_prs_file_unchanged() -> None:
    data = VENDORED.read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob == PR_BLOB


def test_the_fixture_tables_agree_with_the_prs_code() -> None:
    """The tables of test_cronhash.py (the PR's tests as data, and our own edge rows) give the
    PR's code the same answers: the fixtures are the PR's behaviour, not only its tests."""
    ns, name = fixtures.NAMESPACE, fixtures.NAME
    schedules = [s for s, _ in fixtures.PR_EXPAND_TABLE + fixtures.PR_DOCS_TABLE]
    schedules += [s for s, _ in fixtures.PR_MALFORMED_TABLE]
    schedules += [
        "H/+5 * * * *",
        "H/007 * * * *",
        "H(+1-5) * * * *",
        "30,H * * * *",
        "\tH  H\n* * *",
        " CRON_TZ=UTC\tH * * * *",
        "H/5_0 * * * *",
        "H/99999999999999999999 * * * *",
        "H(-1-5) * * * *",
        "H(1--5) * * * *",
        "H\x1c * * * *",
        "Hé * * * *",
        "H\u200b * * * *",
        "@every H",
        "@daily H",
        "0 0 31 H *",
    ]
    assert assert_agree([(s, ns, name) for s in schedules]) == len(schedules)


def test_many_names_agree_on_the_prs_schedules() -> None:
    """2,000 random names in 20 namespaces over the PR's own schedules and examples."""
    rng = random.Random(16604)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
    schedules = [
        "H H * * *",
        "H H H H H",
        "H/7 H/5 H/3 H/2 H/4",
        "H(10-20) H(1-5) H(2-6) H(3-9) H(1-4)",
        "H,H * * * *",
        "H(0-29)/10 H(9-17) * * MON-FRI",
        "H H/2 * * *",
        "H(1-20) H/2 * * *",
        "0 0 H(29-31) * *",
        "CRON_TZ=Asia/Tokyo H H * * *",
    ]
    namespaces = ["argo", "default"] + [f"team-{i}" for i in range(18)]
    cases = []
    for i in range(2000):
        name = "cw-" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) + str(i)
        cases += [(s, namespaces[i % len(namespaces)], name) for s in schedules]
    assert assert_agree(cases) == 20_000


# --------------------------------------------------------------------------- generated


_numbers = st.one_of(
    st.integers(0, 70).map(str),
    st.sampled_from(["", "+5", "-1", "007", "a", "5_0", "99999999999999999999", "٣"]),
)
#: A range valid in every field (1-6 lies in day-of-week's 0-6 and month's 1-12), or one that
#: is valid in some fields only.
_range = st.integers(0, 5).flatmap(
    lambda i: (
        st.tuples(st.integers(0, 59), st.integers(0, 59)).map(lambda p: f"{min(p)}-{max(p)}")
        if i == 0
        else st.tuples(st.integers(1, 6), st.integers(1, 6)).map(lambda p: f"{min(p)}-{max(p)}")
    )
)
_well_formed = st.one_of(
    st.just("H"),
    st.integers(1, 90).map(lambda n: f"H/{n}"),
    _range.map(lambda r: f"H({r})"),
    st.builds(lambda r, n: f"H({r})/{n}", _range, st.integers(1, 90)),
)
_odd = st.one_of(
    st.builds(lambda n: f"H/{n}", _numbers),
    st.builds(lambda a, b: f"H({a}-{b})", _numbers, _numbers),
    st.builds(lambda a, b, n: f"H({a}-{b})/{n}", _numbers, _numbers, _numbers),
    # malformed shapes: an open range, text after a range, no separator, odd characters
    st.builds(lambda a: f"H({a}", _numbers),
    st.builds(lambda a, b, x: f"H({a}-{b}){x}", _numbers, _numbers, st.sampled_from(["x", "/"])),
    st.builds(lambda a: f"H{a}", _numbers),
    st.builds(lambda c: f"H{c}", st.sampled_from(["\x1c", "é", "\u200b", '"', "\\", "\x7f"])),
)
#: Mostly well-formed items (one in ten odd), so that most schedules get past their first `H`.
_hashed_item = st.integers(0, 9).flatmap(lambda i: _odd if i == 0 else _well_formed)
_plain_item = st.sampled_from(
    ["*", "?", "0", "5", "*/15", "1-5", "MON-FRI", "THU", "JAN", "30", "h", "R"]
)
_field = st.lists(st.one_of(_hashed_item, _plain_item), min_size=1, max_size=3).map(",".join)
_blank = st.sampled_from([" ", "  ", "\t", " \t", "\n", "\u00a0", "\u3000"])


@st.composite
def _schedule(draw: st.DrawFn) -> str:
    count = draw(st.sampled_from([5] * 8 + [4, 6]))
    fields = [draw(_field) for _ in range(count)]
    text = fields[0] + "".join(draw(_blank) + f for f in fields[1:])
    prefix = draw(
        st.sampled_from(["", "", "", "", "CRON_TZ=Asia/Tokyo ", "TZ=UTC\t", " ", "@every "])
    )
    return prefix + text


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
_case = st.tuples(_schedule(), _label, _label)


#: One case per example, answered by the long-lived oracle: about 5 ms an example.
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case)
def test_generated_schedules_agree(session: Session, case: Case) -> None:
    mine = ours(case)
    # What the run covered (`pytest --hypothesis-show-statistics` lists these).
    if mine.startswith("error: "):
        event("refused: " + mine.partition("malformed: ")[2].split(" ")[0])
    else:
        event("resolved" if mine != case[0] else "left to the cron parser")
    assert mine == session.ask(case)
