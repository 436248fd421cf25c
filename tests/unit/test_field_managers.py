"""Given/when/then tests of server-side apply's field managers (issue 25, item 1) in the
domain, and of a patch's read-patch-write (Operations.patch) on the engine.

The record of the last apply names its manager (absent: `cronsource`, the manager of
`cronsource apply`); an apply by another manager that would change a value the record's
manager set is refused (ApplyConflict, nothing saved) unless forced.
"""

from __future__ import annotations

from typing import Any

import pytest

from cronsource.adapters.application.operations import Operations
from cronsource.adapters.application.patches import apply_merge_patch, merge_patch
from cronsource.adapters.clock import VirtualClock
from cronsource.adapters.runtime.engine import Engine
from cronsource.domain.lastapplied import (
    DEFAULT_MANAGER,
    ApplyConflict,
    ownership_conflicts,
    record_problem,
)
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.service import NotFound, StaleVersion
from tests.instants import at
from tests.unit.test_apply_three_way import manifest, service, types


def test_cronsource_apply_writes_the_record_it_always_wrote() -> None:
    # given a file applied by the default manager (`cronsource apply`)
    svc = service()
    cron_id = svc.apply_config(manifest(), at("10:00:00")).id
    # then its record names no manager
    assert "manager" not in svc.load(cron_id).last_applied


def test_another_manager_changing_an_owned_field_is_refused_and_saves_nothing() -> None:
    # given cronsource applied the schedule
    svc = service()
    cron_id = svc.apply_config(manifest(), at("10:00:00")).id
    before = svc.load(cron_id).version
    # when ci applies another schedule
    with pytest.raises(ApplyConflict) as e:
        svc.apply_config(manifest(schedules=["5 * * * *"]), at("11:00:00"), manager="ci")
    # then the conflict names the field and both managers, and nothing was saved
    assert [c.path for c in e.value.conflicts] == ["spec.schedules"]
    assert (e.value.manager, e.value.owner) == ("ci", DEFAULT_MANAGER)
    assert svc.load(cron_id).version == before


def test_forced_the_other_manager_takes_the_fields_and_the_record() -> None:
    svc = service()
    cron_id = svc.apply_config(manifest(labels={"team": "data"}), at("10:00:00")).id
    # when ci forces its schedule, naming nothing else
    svc.apply_config(manifest(schedules=["5 * * * *"]), at("11:00:00"), manager="ci", force=True)
    # then the schedule is ci's, what ci did not name stays, and the record is ci's
    agg = svc.load(cron_id)
    assert agg.spec["schedules"] == ["5 * * * *"] and agg.labels == {"team": "data"}
    assert agg.last_applied is not None and agg.last_applied["manager"] == "ci"
    assert record_problem(agg.last_applied) is None
    assert types(svc, cron_id)[-1] == "SpecUpdated"
    # and for a third manager ci is now the one that set the schedule
    with pytest.raises(ApplyConflict) as e:
        svc.apply_config(manifest(), at("12:00:00"), manager="cd")
    assert e.value.owner == "ci"


def test_cronsource_apply_never_conflicts_and_applies_two_way_over_another_record() -> None:
    # given ci applied a deadline and the schedule
    svc = service()
    cron_id = svc.apply_config(
        manifest(startingDeadlineSeconds=60), at("10:00:00"), manager="ci"
    ).id
    # when `cronsource apply` (the default manager) applies another schedule
    applied = svc.apply_config(manifest(schedules=["5 * * * *"]), at("11:00:00"))
    # then it is applied two-way, as without a record of its own, and says why
    agg = svc.load(cron_id)
    assert agg.spec["schedules"] == ["5 * * * *"]
    assert "startingDeadlineSeconds" not in agg.spec
    assert applied.notes == (
        "default/nightly: the last apply was field manager 'ci''s: applied two-way (the"
        " file's values replace the live ones); the next apply merges three-way",
    )
    # and the record is cronsource's again, as it always wrote it
    assert agg.last_applied is not None and "manager" not in agg.last_applied


def test_the_same_manager_applies_three_way_as_the_cli() -> None:
    # given ci applied suspend: false, and a command suspended it since
    svc = service()
    cron_id = svc.apply_config(manifest(suspend=False), at("10:00:00"), manager="ci").id
    svc.suspend(cron_id, at("11:00:00"))
    # when ci applies the same file again
    applied = svc.apply_config(manifest(suspend=False), at("12:00:00"), manager="ci")
    # then the command's value is kept with a note, as `cronsource apply` keeps it
    assert svc.load(cron_id).suspended
    assert any("spec.suspend kept at true" in n for n in applied.notes)


def test_values_that_agree_and_unowned_fields_are_no_conflict() -> None:
    owned = {"spec": {"schedules": ["0 * * * *"], "workflowSpec": {"entrypoint": "main"}}}
    live = {"spec": {**owned["spec"], "timezone": ""}, "metadata": {}}
    file = {"spec": {"schedules": ["0 * * * *"], "timezone": "UTC"}}
    assert ownership_conflicts(owned, file, live) == ()
    nested = {"spec": {"workflowSpec": {"entrypoint": "other"}}}
    assert [c.path for c in ownership_conflicts(owned, nested, live)] == [
        "spec.workflowSpec.entrypoint"
    ]


def test_a_manager_that_is_not_a_string_makes_the_record_unusable() -> None:
    assert record_problem({"spec": {}, "manager": 7}) is not None


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [  # RFC 7386, appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_is_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_a_merge_patch_leaves_the_live_object_alone() -> None:
    live = {"metadata": {"name": "a", "generation": 3}, "spec": {"x": 1}}
    patched = apply_merge_patch(live, {"spec": {"x": 2}})
    assert live == {"metadata": {"name": "a", "generation": 3}, "spec": {"x": 1}}
    assert patched == {"metadata": {"name": "a"}, "spec": {"x": 2}}


def _manifest(doc: dict[str, Any]) -> CronWorkflowManifest:
    doc.pop("status", None)
    doc["metadata"].pop("resourceVersion", None)
    return parse_manifest(doc)


def test_a_patch_rereads_when_another_write_lands_in_between(
    engine: Engine, clock: VirtualClock
) -> None:
    # given hourly, and a writer that suspends it while the first patch is being made
    ops = Operations(engine, clock)
    ops.apply(manifest("hourly"), three_way=True)
    seen: list[int] = []

    def edit(live: dict[str, Any]) -> tuple[CronWorkflowManifest, int | None]:
        seen.append(int(live["metadata"]["resourceVersion"]))
        if len(seen) == 1:
            ops.suspend("default", "hourly", by="other")
        live["spec"]["timezone"] = "UTC"
        return _manifest(live), None

    # when the patch is written
    ops.patch("default", "hourly", edit)
    # then it was made again on the object the other write left, and kept that write
    assert seen == [1, 2]
    agg = ops.find("default", "hourly")
    assert agg.spec["timezone"] == "UTC" and agg.suspended


def test_a_patch_with_a_demanded_version_is_stale_instead(
    engine: Engine, clock: VirtualClock
) -> None:
    ops = Operations(engine, clock)
    ops.apply(manifest("hourly"), three_way=True)

    def edit(live: dict[str, Any]) -> tuple[CronWorkflowManifest, int | None]:
        ops.suspend("default", "hourly", by="other")
        live["spec"]["timezone"] = "UTC"
        return _manifest(live), 1

    with pytest.raises(StaleVersion):
        ops.patch("default", "hourly", edit)
    assert ops.find("default", "hourly").spec.get("timezone", "") == ""


def test_a_command_on_a_cronworkflow_deleted_meanwhile_is_not_found(
    engine: Engine, clock: VirtualClock
) -> None:
    """The loser of a race with a delete re-decides on fresh state: a CronWorkflow deleted
    is not found there, as a lookup after the delete says (six DELETEs at once answered 200
    three times, and a suspend would have been recorded on a deleted stream)."""
    ops = Operations(engine, clock)
    ops.apply(manifest("hourly"), three_way=True)
    attempts: list[int] = []

    def suspend_after_a_delete(agg: Any, at: Any) -> None:
        attempts.append(agg.version)
        if len(attempts) == 1:
            ops.delete("default", "hourly")  # another writer wins the race
        agg.suspend(at, by="loser")

    with pytest.raises(NotFound, match="cronworkflow default/hourly not found"):
        ops.command("default", "hourly", suspend_after_a_delete)
    assert len(attempts) == 1  # the retry read the delete and did nothing
    types = [r.as_event()["type"] for r in ops.history("default", "hourly")]
    assert types[-1] == "CronWorkflowDeleted" and "Suspended" not in types
