"""The Python API's contract, run twice: over `cronsource.open` (in process) and over
`cronsource.Client` against a real `cronsource serve` process. Each method must behave the same
on both: the same results (the same models), the same errors with the same fields, the same
preconditions."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import pytest

import cronsource
from cronsource import CronWorkflowObject
from tests.serve_process import serve

CLI = [str(Path(sys.executable).with_name("cronsource"))]


class Api(Protocol):
    """What both implementations offer (the test uses it through this one type)."""

    def __getattr__(self, name: str) -> Any: ...


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = f"sqlite:///{tmp_path_factory.mktemp('served') / 'cs.db'}"
    with serve(CLI, store) as process:
        yield process.base


@pytest.fixture(scope="module", params=["open", "client"])
def api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, served: str
) -> Iterator[Any]:
    if request.param == "open":
        store = f"sqlite:///{tmp_path_factory.mktemp('open') / 'cs.db'}"
        with cronsource.open(store) as lib:
            yield lib
    else:
        with cronsource.Client(served) as client:
            yield client


def manifest(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "data"}},
        "spec": {
            "schedule": "0 3 * * *",
            "timezone": "Europe/Berlin",
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def fresh(prefix: str = "cw") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def version(obj: CronWorkflowObject) -> int:
    return int(obj.metadata["resourceVersion"])


# ---------------------------------------------------------------------- commands


def test_apply_creates_then_updates_and_get_returns_the_same_object(api: Any) -> None:
    name = fresh()
    created = api.apply(manifest(name))
    assert isinstance(created, CronWorkflowObject)
    assert created.metadata["name"] == name and created.spec["schedule"] == "0 3 * * *"
    updated = api.apply(manifest(name, schedule="0 4 * * *"))
    assert updated.spec["schedule"] == "0 4 * * *" and version(updated) > version(created)
    assert api.get("default", name) == updated


def test_apply_takes_yaml_text_and_a_namespace_for_a_manifest_without_one(api: Any) -> None:
    name = fresh()
    text = (
        "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\n"
        f"metadata: {{name: {name}}}\n"
        "spec: {schedule: '*/5 * * * *', workflowSpec: {entrypoint: main,"
        " templates: [{name: main, container: {image: busybox}}]}}\n"
    )
    got = api.apply(text, namespace="team-a")
    assert got.metadata["namespace"] == "team-a"


def test_create_only_of_an_existing_name_is_already_exists_with_its_version(api: Any) -> None:
    name = fresh()
    first = api.apply(manifest(name))
    with pytest.raises(cronsource.AlreadyExists) as e:
        api.apply(manifest(name), create_only=True)
    assert e.value.current_version == version(first)


def test_create_creates_once_and_a_second_create_is_already_exists_changing_nothing(
    api: Any,
) -> None:
    # given a name no CronWorkflow has
    name = fresh()
    # when it is created, then created again with another schedule
    created = api.create(manifest(name))
    with pytest.raises(cronsource.AlreadyExists) as e:
        api.create(manifest(name, schedule="0 4 * * *"))
    # then the second create changed nothing and names the version it found
    assert e.value.current_version == version(created)
    got = api.get("default", name)
    assert got.spec["schedule"] == "0 3 * * *" and version(got) == version(created)
    # and the object a create made is one `apply` merges with three-way, as an applied one
    assert api.apply(manifest(name, schedule="0 5 * * *")).spec["schedule"] == "0 5 * * *"


def test_apply_after_a_create_keeps_upserting(api: Any) -> None:
    # given a CronWorkflow made by create
    name = fresh()
    api.create(manifest(name))
    # when the same manifest is applied twice, then a changed one
    again = api.apply(manifest(name))
    same = api.apply(manifest(name))
    changed = api.apply(manifest(name, schedule="0 6 * * *"))
    # then apply updates in place (no AlreadyExists), and only a change moves the version
    assert version(again) == version(same)
    assert version(changed) == version(same) + 1


def test_a_stale_expected_version_is_a_conflict_and_changes_nothing(api: Any) -> None:
    name = fresh()
    first = api.apply(manifest(name))
    api.suspend("default", name)
    with pytest.raises(cronsource.Conflict) as e:
        api.resume("default", name, expected_version=version(first))
    assert e.value.current_version == version(first) + 1
    assert e.value.expected_version == version(first)
    assert api.get("default", name).spec["suspend"] is True


def test_the_three_way_rule_keeps_a_field_another_writer_changed(api: Any) -> None:
    name = fresh()
    api.apply(manifest(name, suspend=False))
    api.suspend("default", name, by="oncall", note="incident 7")
    # The same file again: its value for suspend did not change since the last apply, and a
    # command changed the live one, so the command's value stays; `force` takes the file's.
    assert api.apply(manifest(name, suspend=False)).spec["suspend"] is True
    assert api.apply(manifest(name, suspend=False), force=True).spec["suspend"] is False


def test_suspend_resume_trigger_delete(api: Any) -> None:
    name = fresh()
    api.apply(manifest(name))
    assert api.suspend("default", name).spec["suspend"] is True
    assert api.resume("default", name).spec["suspend"] is False
    fired = api.trigger("default", name, request_id="r-1")
    again = api.trigger("default", name, request_id="r-1")
    assert fired.triggered and not again.triggered and fired.workflow == again.workflow
    deleted = api.delete("default", name)
    assert deleted.name == name and deleted.status == "Success"
    with pytest.raises(cronsource.NotFound):
        api.get("default", name)


def test_backfill_dry_run_lists_the_ticks_and_runs_nothing(api: Any) -> None:
    name = fresh()
    api.apply(manifest(name, schedule="0 * * * *", timezone="UTC"))
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    plan = api.backfill("default", name, end - timedelta(hours=2), end, dry_run=True)
    assert plan.dryRun and plan.ticks == 3 and len(plan.items) == 3
    assert api.history("default", name, types=["ScheduleFired"]).items == []


# ---------------------------------------------------------------------- reads


def test_list_with_a_selector_and_across_namespaces(api: Any) -> None:
    a, b = fresh("sel"), fresh("sel")
    api.apply(manifest(a))
    other = manifest(b, namespace="team-b")
    other["metadata"]["labels"] = {"team": "web"}
    api.apply(other)
    data = {o.metadata["name"] for o in api.list("default", selector="team=data").items}
    assert a in data and b not in data
    everywhere = {o.metadata["name"] for o in api.list(None).items}
    assert {a, b} <= everywhere


def test_next_history_events_and_why(api: Any) -> None:
    name = fresh()
    api.apply(manifest(name, timezone="UTC"))
    nxt = api.next("default", name, count=3)
    assert nxt.timezone == "UTC" and len(nxt.items) == 3
    history = api.history("default", name)
    assert [e.type for e in history.items] == ["CronWorkflowCreated"]
    assert history.nextAfter is None
    page = api.events(namespace="default", name=name, limit=1)
    assert len(page.items) == 1 and page.items[0].cronWorkflow == f"default/{name}"
    decision = api.why("default", name, datetime(2020, 1, 1, 3, tzinfo=UTC))
    assert decision.outcome  # before the CronWorkflow existed: said so, not an error


def test_why_takes_a_time_in_any_zone_as_the_cli_takes_it_written(api: Any) -> None:
    """A datetime in the CronWorkflow's own zone is answered as the same time written on the
    command line: 02:30 on a spring-forward night is the tick that ran for it; the second
    02:30 of the autumn night is an instant after the tick (policy `once`); the same wall
    time in UTC is a real instant, no tick. Arithmetic on a zoned datetime is on its wall
    clock, which made all three NotATick, each about another instant."""
    name = fresh()
    api.apply(manifest(name, schedule="30 2 * * *"))
    berlin = ZoneInfo("Europe/Berlin")
    gap = api.why("default", name, datetime(2027, 3, 28, 2, 30, tzinfo=berlin))
    assert (gap.at, gap.outcome) == ("2027-03-28T01:00:00Z", "Pending"), gap
    assert gap.dst is not None and gap.dst.kind == "gap"
    first = api.why("default", name, datetime(2027, 10, 31, 2, 30, tzinfo=berlin))
    assert (first.at, first.outcome) == ("2027-10-31T00:30:00Z", "Pending"), first
    second = api.why("default", name, datetime(2027, 10, 31, 2, 30, tzinfo=berlin, fold=1))
    assert (second.at, second.outcome) == ("2027-10-31T01:30:00Z", "NotATick"), second
    utc = api.why("default", name, datetime(2027, 3, 28, 2, 30, tzinfo=UTC))
    assert (utc.at, utc.outcome, utc.dst) == ("2027-03-28T02:30:00Z", "NotATick", None), utc


def test_wait_returns_once_the_read_side_caught_up(api: Any) -> None:
    api.apply(manifest(fresh()))
    assert api.wait(timeout=10) is True


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda api: api.history("default", "x", since=datetime(2026, 1, 1)), "since"),
        (lambda api: api.why("default", "x", datetime(2026, 1, 1)), "at"),
        (lambda api: api.list("no-such-namespace"), "namespace"),
        (lambda api: api.events(namespace="no-such-namespace"), "namespace"),
        (lambda api: api.list("default", selector="team in (a"), "labelSelector"),
        (lambda api: api.get("Not_A_Name", "x"), "namespace"),
        (lambda api: api.next("default", "x", count=0), "count"),
        (
            lambda api: api.history(
                "default",
                "x",
                since=datetime(2026, 2, 1, tzinfo=UTC),
                until=datetime(2026, 1, 1, tzinfo=UTC),
            ),
            "until",
        ),
        (lambda api: api.events(types=["NoSuchEvent"]), "type"),
        (lambda api: api.apply(manifest("bad", schedule="61 * * * *")), "spec.schedule"),
    ],
)
def test_bad_arguments_are_invalid_naming_the_argument(api: Any, call: Any, field: str) -> None:
    api.apply(manifest(fresh()))  # so that "default" is a namespace the store knows
    with pytest.raises(cronsource.Invalid) as e:
        call(api)
    assert e.value.field == field


T0, T1 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda api, n: api.suspend("default", n, by=5), "by"),
        (lambda api, n: api.resume("default", n, note=None), "note"),
        (lambda api, n: api.suspend("default", n, expected_version="2"), "expected_version"),
        (lambda api, n: api.delete("default", n, expected_version=-1), "expected_version"),
        (lambda api, n: api.trigger("default", n, request_id=""), "request_id"),
        (lambda api, n: api.trigger("default", n, request_id=5), "request_id"),
        (lambda api, n: api.backfill("default", n, T0, T1, overlap="junk"), "overlap"),
        (lambda api, n: api.backfill("default", n, T0, T1, parallel=-3), "parallel"),
        (lambda api, n: api.backfill("default", n, T0, T1, dry_run="no"), "dry_run"),
        (lambda api, n: api.backfill("default", n, T0, T1, max_ticks=0), "max_ticks"),
        (lambda api, n: api.apply(manifest(n), force="yes"), "force"),
        (lambda api, n: api.why("default", n, datetime(9999, 12, 31, tzinfo=UTC)), "at"),
        (lambda api, n: api.why("default", n, datetime(1969, 12, 31, tzinfo=UTC)), "at"),
        (lambda api, n: api.history("default", n, types="Suspended"), "types"),
        (lambda api, n: api.list("default", selector={"a": "b"}), "selector"),
        (lambda api, n: api.wait(-1), "timeout"),
    ],
)
def test_a_bad_argument_of_a_command_is_invalid_and_stores_nothing(
    api: Any, call: Any, field: str
) -> None:
    """Each was stored as given (`by=5`, a backfill queued with overlap 'junk' and parallel
    -3), taken for another value (`request_id=""` a new run each call, `max_ticks=0` the
    default, `dry_run="no"` a dry run that said it was not), or raised a Python error."""
    name = fresh()
    api.apply(manifest(name))
    with pytest.raises(cronsource.Invalid) as e:
        call(api, name)
    assert e.value.field == field, e.value
    assert [x.type for x in api.history("default", name).items] == ["CronWorkflowCreated"]


def test_a_call_after_close_is_unavailable_in_one_line(tmp_path: Path, served: str) -> None:
    closed = [cronsource.open(f"sqlite:///{tmp_path / 'cs.db'}"), cronsource.Client(served)]
    for api in closed:
        api.close()
        with pytest.raises(cronsource.Unavailable) as e:
            api.list()
        assert "closed" in str(e.value)


def test_an_end_before_the_start_of_a_backfill_is_invalid(api: Any) -> None:
    name = fresh()
    api.apply(manifest(name))
    t = datetime(2026, 1, 2, tzinfo=UTC)
    with pytest.raises(cronsource.Invalid) as e:
        api.backfill("default", name, t, t - timedelta(days=1))
    assert e.value.field == "end"


def test_unknown_names_are_not_found(api: Any) -> None:
    for call in (
        lambda: api.get("default", "ghost"),
        lambda: api.suspend("default", "ghost"),
        lambda: api.trigger("default", "ghost"),
        lambda: api.history("default", "ghost"),
        lambda: api.next("default", "ghost"),
    ):
        with pytest.raises(cronsource.NotFound):
            call()


# ---------------------------------------------------------------------- calendars


def calendar(name: str, dates: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"cronsource.io/calendar": "true"}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"dates": dates}}


def test_a_calendar_is_applied_read_changed_and_deleted_with_its_versions(api: Any) -> None:
    name = fresh("holidays")
    created = api.apply_calendar(calendar(name, "2026-12-25"))
    assert (created.name, created.namespace, created.outcome) == (name, "default", "created")
    assert created.dates == "2026-12-25" and not created.deleted
    again = api.apply_calendar(calendar(name, "2026-12-25"))
    assert (again.outcome, again.version) == ("unchanged", created.version)
    changed = api.apply_calendar(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n"
        '    cronsource.io/calendar: "true"\ndata:\n  dates: 2026-12-25,2027-01-01\n'
    )
    assert changed.outcome == "updated" and changed.version > created.version
    got = api.get_calendar("default", name)
    assert got.dates == "2026-12-25,2027-01-01" and got.version == changed.version
    # A CronWorkflow naming it is admitted, and `next` marks the day it names as excluded,
    # with the calendar's version.
    day = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    named = api.apply_calendar(calendar(name, day))
    cw = fresh()
    api.apply(
        manifest(cw, schedule="0 3 * * *", timezone="UTC")
        | {
            "metadata": {
                "name": cw,
                "namespace": "default",
                "annotations": {"cronsource.io/calendars": name},
            }
        }
    )
    ticks = {t.utc[:10]: t for t in api.next("default", cw, count=6).items}
    assert ticks[day].excluded is not None
    assert f"{name} (version {named.version})" in ticks[day].excluded.message
    assert [d for d, t in ticks.items() if t.excluded] == [day]
    gone = api.delete_calendar("default", name)
    assert gone.deleted and gone.version > named.version
    with pytest.raises(cronsource.NotFound):
        api.get_calendar("default", name)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (calendar("cal", "2026-02-30"), "data.dates"),
        (calendar("cal", "2026-12-25") | {"metadata": {"name": "cal"}}, "metadata.labels"),
        (calendar("Not_A_Name", "2026-12-25"), "metadata.name"),
        (calendar("cal", "2026-12-25") | {"kind": "Secret"}, "kind"),
        ("- just\n- a list\n", "manifest"),
    ],
)
def test_a_bad_calendar_is_invalid_naming_the_field_and_stores_nothing(
    api: Any, doc: Any, field: str
) -> None:
    with pytest.raises(cronsource.Invalid) as e:
        api.apply_calendar(doc)
    assert e.value.field == field
    with pytest.raises(cronsource.NotFound):
        api.get_calendar("default", "cal")


def test_an_unknown_calendar_is_not_found(api: Any) -> None:
    for call in (
        lambda: api.get_calendar("default", "ghost"),
        lambda: api.delete_calendar("default", "ghost"),
    ):
        with pytest.raises(cronsource.NotFound):
            call()


# ---------------------------------------------------------------------- the two agree


def test_a_value_round_trips_between_the_library_and_the_client(
    served: str, tmp_path: Path
) -> None:
    """The same manifest applied through each: the models differ only where the stores do
    (uid, versions, times), and one parsed from the other's JSON is equal to it."""
    name = fresh()
    with cronsource.open(f"sqlite:///{tmp_path / 'cs.db'}") as lib:
        ours = lib.apply(manifest(name))
    with cronsource.Client(served) as client:
        theirs = client.apply(manifest(name))
    assert ours.spec == theirs.spec and ours.kind == theirs.kind
    assert CronWorkflowObject.model_validate_json(ours.model_dump_json()) == ours


def test_a_client_pointed_at_something_else_says_so_in_one_line(tmp_path: Path) -> None:
    with cronsource.Client("http://127.0.0.1:9") as client, pytest.raises(cronsource.Unavailable):
        client.get("default", "x")
    import httpx

    def other_server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"info": {"title": "cronsource", "version": "2"}})

    client = cronsource.Client("http://example.test", transport=httpx.MockTransport(other_server))
    with pytest.raises(cronsource.IncompatibleServer) as e:
        client.get("default", "x")
    assert "\n" not in str(e.value) and "version '2'" in str(e.value)
