"""The version policy of `CronService`: with `expected_version` (an HTTP If-Match) a command
runs only on exactly that version, and a writer that saved in between makes the save fail
with StaleVersion naming the current version, instead of a decision made again on state the
caller never saw. Without it, the lost race is re-decided (the CLI's and scheduler's way)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronsource.domain.cronworkflow import CronWorkflow
from cronsource.domain.manifest import CronWorkflowManifest, parse_manifest
from cronsource.domain.service import CronService, StaleVersion
from tests.http_helpers import manifest
from tests.instants import T0

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def cron(name: str = "hourly", schedule: str = "0 * * * *") -> CronWorkflowManifest:
    return parse_manifest(manifest(name, schedule))


def two_writers() -> tuple[CronService, CronService]:
    svc = CronService(env=MEMORY)
    return svc, CronService(env=MEMORY, recorder=svc.recorder)


def test_a_command_on_the_expected_version_saves() -> None:
    svc, _ = two_writers()
    cron_id, _ = svc.apply(cron(), T0)
    svc.command(cron_id, lambda a: a.suspend(T0, "alice", ""), expected_version=1)
    assert svc.load(cron_id).version == 2 and svc.load(cron_id).suspended


def test_a_command_on_another_version_is_refused_before_deciding() -> None:
    svc, _ = two_writers()
    cron_id, _ = svc.apply(cron(), T0)
    decided: list[int] = []
    with pytest.raises(StaleVersion) as e:
        svc.command(cron_id, lambda a: decided.append(a.version), expected_version=3)
    assert (e.value.expected, e.value.current) == (3, 1)
    assert decided == [] and svc.load(cron_id).version == 1


def test_a_write_in_between_makes_the_save_stale_not_redecided() -> None:
    svc, peer = two_writers()
    cron_id, _ = svc.apply(cron(), T0)
    calls: list[int] = []

    def suspend_after_the_peer(a: CronWorkflow) -> None:
        calls.append(a.version)
        peer.suspend(cron_id, T0, "bob", "")  # saved: version 2
        a.trigger(T0, "r1")

    with pytest.raises(StaleVersion) as e:
        svc.command(cron_id, suspend_after_the_peer, expected_version=1)
    assert (e.value.expected, e.value.current) == (1, 2)
    assert calls == [1]  # decided once, never again on the peer's state
    assert svc.load(cron_id).suspended and svc.load(cron_id).version == 2


def test_without_an_expected_version_a_lost_race_is_decided_again() -> None:
    svc, peer = two_writers()
    cron_id, _ = svc.apply(cron(), T0)
    calls: list[int] = []

    def trigger(a: CronWorkflow) -> str | None:
        calls.append(a.version)
        if len(calls) == 1:
            peer.suspend(cron_id, T0, "bob", "")
        return a.trigger(T0, "r1")

    svc.command(cron_id, trigger)
    assert calls == [1, 2]


def test_apply_with_an_expected_version_updates_only_that_version() -> None:
    svc, _ = two_writers()
    cron_id, _ = svc.apply(cron(), T0)
    later = T0 + timedelta(minutes=5)
    with pytest.raises(StaleVersion) as stale:
        svc.apply(cron(schedule="5 * * * *"), later, expected_version=2)
    assert (stale.value.expected, stale.value.current) == (2, 1)
    assert svc.apply(cron(schedule="5 * * * *"), later, expected_version=1) == (cron_id, "updated")
    assert svc.apply(cron(schedule="5 * * * *"), later, expected_version=2) == (
        cron_id,
        "unchanged",
    )


def test_apply_with_an_expected_version_never_creates() -> None:
    svc, _ = two_writers()
    with pytest.raises(StaleVersion) as e:
        svc.apply(cron("absent"), T0, expected_version=1)
    assert (e.value.expected, e.value.current) == (1, None)
    with pytest.raises(LookupError):
        svc.find("default", "absent")
