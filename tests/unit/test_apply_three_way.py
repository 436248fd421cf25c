"""Given/when/then tests of `apply` as kubectl's three-way apply (issue 21, item 4).

Given a CronWorkflow applied from a file and then changed by another writer (a command such
as `cronsource suspend`, or a two-way writer: the Kubernetes watch or an HTTP PUT, both
`CronService.apply`), when the file is applied again, then a field the other writer changed
keeps that writer's value as long as the file's value for it has not changed since the last
apply, even when the file names it; `force` (`--force-conflicts`) takes the file's values.
Every test reads the events back from the log (memory store); time is an argument.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest

from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.lastapplied import MISSING, merge
from cronsource.domain.manifest import CronWorkflowManifest, ManifestError, parse_manifest
from cronsource.domain.service import CronService, NotFound, event_type
from tests.instants import at
from tests.unit.test_golden import replay

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def manifest(
    name: str = "nightly",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> CronWorkflowManifest:
    """A manifest; `spec` keys as in YAML. Labels/annotations only when given (a file
    that does not name them leaves them to other writers)."""
    spec.setdefault("schedules", ["0 * * * *"])
    spec.setdefault(
        "workflowSpec",
        {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
    )
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return parse_manifest(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "CronWorkflow",
            "metadata": meta,
            "spec": spec,
        }
    )


def service() -> CronService:
    return CronService(env=MEMORY)


def types(svc: CronService, cron_id: UUID, after: int = 0) -> list[str]:
    return [event_type(e) for e in svc.events.get(cron_id, gt=after or None)]


def spec_of(svc: CronService, cron_id: UUID) -> dict[str, Any]:
    agg = svc.load(cron_id)
    return {**agg.spec, "suspend": agg.suspended}


def applied(svc: CronService, m: CronWorkflowManifest, t: str, force: bool = False) -> UUID:
    return svc.apply_config(m, at(t), force=force).id


# ---------------------------------------------------------------------- suspend (the issue)


def test_a_cli_suspend_survives_reapplying_a_file_that_says_suspend_false() -> None:
    svc = service()
    cron_id = applied(svc, manifest(suspend=False), "10:00:30")
    svc.suspend(cron_id, at("10:10:00"), by="cli")
    version = svc.load(cron_id).version

    result = svc.apply_config(manifest(suspend=False), at("10:20:00"))

    assert result.what == "unchanged"
    assert svc.load(cron_id).suspended
    assert types(svc, cron_id, after=version) == []  # no "Resumed by=spec"
    assert result.notes == (
        "default/nightly: spec.suspend kept at true, set since the last apply by another"
        " writer (the file still says false; --force-conflicts takes it)",
    )


@pytest.mark.parametrize("field", ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"])
def test_a_negative_history_limit_then_dropped_warns_of_no_conflict(field: str) -> None:
    """A negative limit is kept as written (Argo reads it as unset, and so do we): the same
    file again changes nothing, and a file without the field is the user's own change, not a
    value another writer removed."""
    svc = service()
    cron_id = applied(svc, manifest(**{field: -1}), "10:00:30")
    version = svc.load(cron_id).version

    again = svc.apply_config(manifest(**{field: -1}), at("10:10:00"))
    dropped = svc.apply_config(manifest(), at("10:20:00"))

    assert (again.what, again.notes) == ("unchanged", ())
    assert (dropped.what, dropped.notes) == ("updated", ())
    assert types(svc, cron_id, after=version) == ["SpecUpdated"]


def test_force_conflicts_takes_the_files_suspend_false() -> None:
    svc = service()
    cron_id = applied(svc, manifest(suspend=False), "10:00:30")
    svc.suspend(cron_id, at("10:10:00"), by="cli")

    result = svc.apply_config(manifest(suspend=False), at("10:20:00"), force=True)

    assert not svc.load(cron_id).suspended and result.notes == ()
    resumed = [e for e in svc.events.get(cron_id) if event_type(e) == "Resumed"]
    assert [(e.by, e.note) for e in resumed] == [("spec", "spec.suspend is false")]


def test_a_file_whose_suspend_changed_since_the_last_apply_wins() -> None:
    svc = service()
    cron_id = applied(svc, manifest(suspend=True), "10:00:30")
    svc.resume(cron_id, at("10:10:00"), by="cli")
    # The file still says true: the CLI resume stays.
    assert svc.apply_config(manifest(suspend=True), at("10:20:00")).notes
    assert not svc.load(cron_id).suspended

    # The file changes its value (true -> false -> true): each change is the file's to make.
    svc.apply_config(manifest(suspend=False), at("10:30:00"))
    result = svc.apply_config(manifest(suspend=True), at("10:40:00"))
    assert svc.load(cron_id).suspended and result.notes == ()


def test_a_file_that_never_names_suspend_keeps_the_live_value() -> None:
    svc = service()
    cron_id = applied(svc, manifest(), "10:00:30")
    svc.suspend(cron_id, at("10:10:00"), by="cli")

    assert svc.apply_config(manifest(), at("10:20:00")).what == "unchanged"
    assert svc.load(cron_id).suspended


# ---------------------------------------------------------------------- other fields, other writers


def test_a_field_another_writer_changed_stays_while_the_files_value_is_unchanged() -> None:
    svc = service()
    cron_id = applied(svc, manifest(startingDeadlineSeconds=60), "10:00:30")
    # Another writer (an HTTP PUT, or the cluster's object) sets a new deadline.
    svc.apply(manifest(startingDeadlineSeconds=300), at("10:05:00"))

    result = svc.apply_config(manifest(startingDeadlineSeconds=60), at("10:10:00"))

    assert spec_of(svc, cron_id)["startingDeadlineSeconds"] == 300
    assert result.what == "unchanged"
    assert "spec.startingDeadlineSeconds kept at 300" in result.notes[0]


def test_a_field_whose_file_value_changed_takes_the_files_value_over_another_writers() -> None:
    svc = service()
    cron_id = applied(svc, manifest(concurrencyPolicy="Allow"), "10:00:30")
    svc.apply(manifest(concurrencyPolicy="Forbid"), at("10:05:00"))

    result = svc.apply_config(manifest(concurrencyPolicy="Replace"), at("10:10:00"))

    assert spec_of(svc, cron_id)["concurrencyPolicy"] == "Replace"
    assert result.what == "updated" and result.notes == ()


@pytest.mark.parametrize(
    ("changed_by_other", "expected"),
    [
        pytest.param(False, None, id="still as last applied: removed, back to the default"),
        pytest.param(True, 300, id="changed by another writer: kept"),
    ],
)
def test_a_field_the_file_drops(changed_by_other: bool, expected: int | None) -> None:
    svc = service()
    cron_id = applied(svc, manifest(startingDeadlineSeconds=60), "10:00:30")
    if changed_by_other:
        svc.apply(manifest(startingDeadlineSeconds=300), at("10:05:00"))

    result = svc.apply_config(manifest(), at("10:10:00"))

    assert spec_of(svc, cron_id).get("startingDeadlineSeconds") == expected
    assert bool(result.notes) is changed_by_other


@pytest.mark.parametrize(
    "metadata",
    [{"labels": {"a": "b"}}, {"annotations": {"x": "y"}}],
    ids=["labels only", "annotations only"],
)
def test_a_map_the_file_drops_is_removed_though_the_live_one_holds_its_defaults(
    metadata: dict[str, Any],
) -> None:
    """The live workflowMetadata holds the other map empty; the record only what the file
    said. Compared as they were, dropping the field was a conflict with "another writer"
    that never wrote, and the value could not be removed by apply at all."""
    svc = service()
    cron_id = applied(svc, manifest(workflowMetadata=metadata), "10:00:30")

    result = svc.apply_config(manifest(), at("10:10:00"))

    assert spec_of(svc, cron_id).get("workflowMetadata") is None
    assert not result.notes


def test_labels_are_merged_key_by_key() -> None:
    svc = service()
    cron_id = applied(svc, manifest(labels={"team": "data", "tier": "gold"}), "10:00:30")
    # Another writer adds a label and changes one the file set.
    svc.apply(manifest(labels={"team": "web", "tier": "gold", "owner": "ops"}), at("10:05:00"))

    # The file drops `tier` and keeps `team` as it was.
    result = svc.apply_config(manifest(labels={"team": "data"}), at("10:10:00"))

    assert svc.load(cron_id).labels == {"team": "web", "owner": "ops"}
    assert result.notes == (
        'default/nightly: metadata.labels.team kept at "web", set since the last apply by'
        ' another writer (the file still says "data"; --force-conflicts takes it)',
    )


def test_force_conflicts_takes_every_value_the_file_names_and_drops() -> None:
    svc = service()
    cron_id = applied(
        svc, manifest(labels={"team": "data"}, startingDeadlineSeconds=60), "10:00:30"
    )
    svc.apply(
        manifest(labels={"team": "web", "owner": "ops"}, startingDeadlineSeconds=300),
        at("10:05:00"),
    )

    svc.apply_config(manifest(labels={"team": "data"}), at("10:10:00"), force=True)

    agg = svc.load(cron_id)
    # The file's label wins, the dropped deadline goes; a label the file never named stays.
    assert agg.labels == {"team": "data", "owner": "ops"}
    assert "startingDeadlineSeconds" not in agg.spec


def test_a_merge_that_is_not_a_valid_cronworkflow_is_refused_and_saves_nothing() -> None:
    svc = service()
    cron_id = applied(svc, manifest(timezone="Europe/Berlin"), "10:00:30")
    svc.apply(manifest(timezone="Asia/Tokyo"), at("10:05:00"))  # another writer
    version = svc.load(cron_id).version

    # The file drops `timezone` and puts the zone into the schedule: valid on its own, but
    # the live Asia/Tokyo (kept: another writer set it) conflicts with CRON_TZ.
    with pytest.raises(ManifestError, match="--force-conflicts") as refused:
        svc.apply_config(manifest(schedules=["CRON_TZ=UTC 0 * * * *"]), at("10:10:00"))
    assert str(refused.value).startswith("default/nightly: spec.schedules: ")
    assert "spec.timezone is 'Asia/Tokyo'" in str(refused.value)
    assert svc.load(cron_id).version == version

    svc.apply_config(manifest(schedules=["CRON_TZ=UTC 0 * * * *"]), at("10:10:00"), force=True)
    assert svc.load(cron_id).spec["schedules"] == ["CRON_TZ=UTC 0 * * * *"]


# ---------------------------------------------------------------------- the record


def test_the_record_is_a_version_2_field_of_the_events_under_the_same_topic() -> None:
    svc = service()
    cron_id = applied(svc, manifest(suspend=False), "10:00:30")
    svc.apply_config(manifest(suspend=False, concurrencyPolicy="Forbid"), at("10:10:00"))

    stored = list(svc.recorder.select_events(cron_id))
    assert [s.topic for s in stored] == [
        "cronsource:CronWorkflowCreated/v1",
        "cronsource:SpecUpdated/v1",
    ]
    states = [json.loads(s.state) for s in stored]
    assert [s["class_version"] for s in states] == [2, 2]
    assert states[1]["last_applied"] == {
        "spec": {
            "schedules": ["0 * * * *"],
            "concurrencyPolicy": "Forbid",
            "suspend": False,
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        }
    }


def test_version_1_events_upcast_to_no_record_and_the_first_apply_falls_back_once() -> None:
    svc = replay("suspend-resume-once")  # a log recorded before records were kept
    cron_id = svc.find("default", "pinger").id
    assert svc.load(cron_id).last_applied is None
    pinger = manifest(
        "pinger",
        schedules=["* * * * *"],
        startingDeadlineSeconds=60,
        workflowSpec={
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}],
        },
    )

    first = svc.apply_config(pinger, at("06:20:00"))
    second = svc.apply_config(pinger, at("06:21:00"))

    assert first.notes == (
        "default/pinger: no last-applied record: applied two-way (the file's values replace"
        " the live ones); the next apply merges three-way",
    )
    # Nothing in the spec changed: only the record was written, under the same generation.
    assert first.what == "updated" and svc.load(cron_id).generation == 1
    assert second.what == "unchanged" and second.notes == ()


def test_a_cronworkflow_created_by_a_two_way_writer_falls_back_and_says_so() -> None:
    svc = service()
    cron_id, _ = svc.apply(manifest(startingDeadlineSeconds=300), at("10:00:30"))  # the watch

    result = svc.apply_config(manifest(startingDeadlineSeconds=60), at("10:10:00"))

    assert "no last-applied record: applied two-way" in result.notes[0]
    assert spec_of(svc, cron_id)["startingDeadlineSeconds"] == 60  # the file's value


def test_a_two_way_writer_keeps_the_record_of_the_last_apply() -> None:
    svc = service()
    cron_id = applied(svc, manifest(suspend=False), "10:00:30")
    record = svc.load(cron_id).last_applied

    svc.apply(manifest(startingDeadlineSeconds=300), at("10:05:00"))

    assert svc.load(cron_id).last_applied == record


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(["not", "a", "mapping"], id="a list"),
        pytest.param({"spec": "garbage"}, id="spec not a mapping"),
        pytest.param({"metadata": {"labels": {"a": 1}}}, id="a label that is not a string"),
        pytest.param({"status": {}}, id="an unknown key"),
    ],
)
def test_a_corrupt_record_falls_back_to_two_way_and_says_so(record: Any) -> None:
    svc = service()
    agg = CronWorkflow.from_manifest(manifest(suspend=False), at("10:00:30"), last_applied=record)
    svc.save(agg)
    svc.suspend(agg.id, at("10:05:00"), by="cli")

    result = svc.apply_config(manifest(suspend=False), at("10:10:00"))

    assert len(result.notes) == 1 and "last-applied record is corrupt" in result.notes[0]
    assert "applied two-way" in result.notes[0]
    assert not svc.load(agg.id).suspended  # two-way: the file's value
    assert svc.load(agg.id).last_applied == {
        "spec": {
            "schedules": ["0 * * * *"],
            "suspend": False,
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        }
    }


# ---------------------------------------------------------------------- the merge itself


@pytest.mark.parametrize(
    ("last", "file", "live", "merged", "kept"),
    [
        pytest.param({"a": 1}, {"a": 1}, {"a": 2}, {"a": 2}, ["a"], id="unchanged file, live kept"),
        pytest.param({"a": 1}, {"a": 3}, {"a": 2}, {"a": 3}, [], id="changed file wins"),
        pytest.param({}, {"a": 1}, {"a": 2}, {"a": 1}, [], id="newly named: the file's value"),
        pytest.param({"a": 1}, {}, {"a": 1}, {}, [], id="dropped, live as applied: removed"),
        pytest.param({"a": 1}, {}, {"a": 2}, {"a": 2}, ["a"], id="dropped, live changed: kept"),
        pytest.param({}, {}, {"a": 2}, {"a": 2}, [], id="never named: live"),
        pytest.param({"a": 1}, {"a": 1}, {}, {}, ["a"], id="another writer removed it: stays"),
        pytest.param(
            {"m": {"x": 1}},
            {"m": {"x": 1, "y": 2}},
            {"m": {"x": 5, "z": 3}},
            {"m": {"x": 5, "y": 2, "z": 3}},
            ["m.x"],
            id="maps merge key by key",
        ),
        pytest.param(
            {"l": [1]}, {"l": [1]}, {"l": [1, 2]}, {"l": [1, 2]}, ["l"], id="a list is one value"
        ),
    ],
)
def test_merge_table(
    last: dict[str, Any],
    file: dict[str, Any],
    live: dict[str, Any],
    merged: dict[str, Any],
    kept: list[str],
) -> None:
    result = merge(last, file, live, force=False)
    assert result.config == merged
    assert [k.path for k in result.kept] == kept
    forced = merge(last, file, live, force=True)
    assert forced.kept == ()
    assert {k: v for k, v in forced.config.items() if v is not MISSING} == {
        **{k: v for k, v in live.items() if k not in file and k not in last},
        **{k: _forced(v, live.get(k)) for k, v in file.items()},
    }


def _forced(file: Any, live: Any) -> Any:
    """What force gives one key the file names: its value (maps: merged into live's)."""
    if isinstance(file, dict) and isinstance(live, dict):
        return {**live, **file}
    return file


def test_a_dry_run_decides_on_the_current_state_and_saves_nothing() -> None:
    svc = service()
    cron_id = applied(svc, manifest(timezone="Europe/Berlin"), "10:00:30")
    svc.apply(manifest(timezone="Asia/Tokyo"), at("10:05:00"))
    version = svc.load(cron_id).version

    with pytest.raises(ManifestError, match="spec.timezone is 'Asia/Tokyo'"):
        svc.apply_config(
            manifest(schedules=["CRON_TZ=UTC 0 * * * *"]), at("10:10:00"), dry_run=True
        )
    would = svc.apply_config(manifest(concurrencyPolicy="Forbid"), at("10:10:00"), dry_run=True)
    new = svc.apply_config(manifest("other"), at("10:10:00"), dry_run=True)

    assert would.what == "updated" and svc.load(cron_id).version == version
    assert new.what == "created"
    with pytest.raises(NotFound):
        svc.find("default", "other")
