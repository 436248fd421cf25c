"""A scenario's actions are checked when it is read (adapters/entrypoints/simulate/scenario.py),
each mistake one line naming the action: one outside start..end was applied out of time (an
audit going back in time) or silently dropped, and one naming a CronWorkflow the scenario does
not have by then stopped the simulation half way with `NotFound`."""

from __future__ import annotations

from typing import Any

import pytest

from cronsource.adapters.entrypoints.simulate import ScenarioError, load_scenario, simulate

START, END = "2026-05-04T14:00:00Z", "2026-05-04T15:00:00Z"


def cron(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedule": "*/10 * * * *",
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        },
    }


def scenario(*actions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "start": START,
        "end": END,
        "cronWorkflows": [cron("c")],
        "actions": list(actions),
        **extra,
    }


@pytest.mark.parametrize(
    ("at", "said"),
    [
        ("2026-05-04T13:00:00Z", "actions[0].at: 2026-05-04T13:00:00Z is before start"),
        ("2026-05-04T16:00:00Z", "actions[0].at: 2026-05-04T16:00:00Z is after end"),
    ],
)
def test_an_action_outside_the_scenario_is_refused_naming_it(at: str, said: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(scenario({"at": at, "suspend": "c"}))
    assert str(e.value).startswith(said), e.value
    assert "\n" not in str(e.value)


def test_actions_at_the_start_and_at_the_end_are_inside() -> None:
    sc = load_scenario(scenario({"at": START, "suspend": "c"}, {"at": END, "resume": "c"}))
    events = [e["type"] for e in simulate(sc, "memory:")["events"]]
    assert "Suspended" in events and "Resumed" in events


@pytest.mark.parametrize(
    ("actions", "said"),
    [
        ([{"at": START, "suspend": "nope"}], "actions[0].suspend: 'nope': no CronWorkflow"),
        ([{"at": START, "resume": "other/c"}], "actions[0].resume: 'other/c': no CronWorkflow"),
        ([{"at": START, "suspend": "a/b/c"}], "actions[0].suspend: 'a/b/c' is not NAME or"),
        (
            [{"at": "2026-05-04T14:10:00Z", "delete": "c"}, {"at": END, "resume": "c"}],
            "actions[1].resume: 'c': no CronWorkflow default/c in the scenario at"
            " 2026-05-04T15:00:00Z",
        ),
        (
            # Sorted by time as the simulation applies them: the delete comes first.
            [{"at": END, "delete": "c"}, {"at": START, "delete": "c"}],
            "actions[0].delete: 'c': no CronWorkflow",
        ),
    ],
)
def test_an_action_naming_a_cronworkflow_the_scenario_lacks_is_refused(
    actions: list[dict[str, Any]], said: str
) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(scenario(*actions))
    assert str(e.value).startswith(said), e.value


def test_a_cronworkflow_applied_by_an_earlier_action_may_be_named() -> None:
    sc = load_scenario(
        scenario(
            {"at": "2026-05-04T14:05:00Z", "apply": cron("later", "team")},
            {"at": "2026-05-04T14:06:00Z", "suspend": "team/later"},
            {"at": "2026-05-04T14:07:00Z", "delete": "c"},
        )
    )
    assert len(sc.actions) == 3


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("runPhase", "Running", "runPhase: Input should be 'Succeeded', 'Failed' or 'Error'"),
        ("replicas", 1.5, "replicas: Input should be a valid integer"),
        ("runDuration", 30, "runDuration: Input should be a valid string"),
    ],
)
def test_a_refused_field_names_its_value(field: str, value: Any, said: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(scenario(**{field: value}))
    assert str(e.value).startswith(said), e.value
    assert str(e.value).endswith(f"(value: {value!r})"), e.value


def test_complete_and_remove_workflow_act_on_the_run_they_name() -> None:
    sc = load_scenario(
        scenario(
            {
                "at": "2026-05-04T14:10:05Z",
                "complete": {"workflow": "c-1777903800", "phase": "Failed"},
            },
            {"at": "2026-05-04T14:20:05Z", "removeWorkflow": "c-1777904400"},
            runDuration="5m",
        )
    )
    result = simulate(sc, "memory:")
    runs = {w["name"]: w for w in result["workflows"]}
    assert runs["c-1777903800"]["phase"] == "Failed"
    assert runs["c-1777903800"]["finishedAt"] == "2026-05-04T14:10:05Z"
    assert runs["c-1777904400"]["deletedAt"] == "2026-05-04T14:20:05Z"
    said = [(e["type"], e["workflow"]) for e in result["events"]]
    assert ("RunCompleted", "c-1777903800") in said
    assert ("RunVanished", "c-1777904400") in said


@pytest.mark.parametrize(
    ("action", "said"),
    [
        (
            # A tick's name with a typo: nothing was ended, and the preview said nothing.
            {"at": "2026-05-04T14:10:05Z", "complete": {"workflow": "c-177790380"}},
            "actions[0].complete.workflow: no Workflow 'c-177790380' was created by"
            " 2026-05-04T14:10:05Z",
        ),
        (
            # The tick's own name, but before its tick came.
            {"at": "2026-05-04T14:05:00Z", "removeWorkflow": "c-1777903800"},
            "actions[0].removeWorkflow: no Workflow 'c-1777903800' was created by"
            " 2026-05-04T14:05:00Z",
        ),
    ],
)
def test_an_action_naming_a_workflow_never_created_is_refused(
    action: dict[str, Any], said: str
) -> None:
    sc = load_scenario(scenario(action))
    with pytest.raises(ScenarioError) as e:
        simulate(sc, "memory:")
    assert str(e.value).startswith(said), e.value
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("actions", "said"),
    [
        (
            # 14:10's run ended by its 5m run duration at 14:15: no Failed at 14:20.
            [{"at": "2026-05-04T14:20:05Z", "complete": {"workflow": "c-1777903800"}}],
            "actions[0].complete.workflow: Workflow 'c-1777903800' had ended by"
            " 2026-05-04T14:20:05Z (Succeeded at 2026-05-04T14:15:00Z)",
        ),
        (
            # Removed first, then completed.
            [
                {"at": "2026-05-04T14:11:00Z", "removeWorkflow": "c-1777903800"},
                {"at": "2026-05-04T14:12:00Z", "complete": {"workflow": "c-1777903800"}},
            ],
            "actions[1].complete.workflow: Workflow 'c-1777903800' had ended by"
            " 2026-05-04T14:12:00Z (Deleted at 2026-05-04T14:11:00Z)",
        ),
    ],
)
def test_completing_a_workflow_that_had_ended_is_refused(
    actions: list[dict[str, Any]], said: str
) -> None:
    """The phase asked for never happened; the preview went on and showed the run's own
    end."""
    sc = load_scenario(scenario(*actions, runDuration="5m"))
    with pytest.raises(ScenarioError) as e:
        simulate(sc, "memory:")
    assert str(e.value).startswith(said), e.value
    assert "\n" not in str(e.value)


def test_a_target_fault_for_a_cronworkflow_the_scenario_never_has_is_refused() -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(
            scenario({"at": START, "targetFails": {"for": "3m", "cronWorkflow": "nosuch"}})
        )
    assert str(e.value) == (
        "actions[0].targetFails.cronWorkflow: 'nosuch': no CronWorkflow default/nosuch in the"
        " scenario"
    )
    # One applied later, within or after the fault's window, may be named.
    later = {"at": "2026-05-04T14:30:00Z", "apply": cron("later")}
    fault = {"at": START, "targetFails": {"for": "1h", "cronWorkflow": "later"}}
    assert len(load_scenario(scenario(fault, later)).actions) == 2


@pytest.mark.parametrize("value", [True, "3", 1.0])
def test_replicas_is_an_integer_itself(value: Any) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(scenario(replicas=value))
    assert str(e.value).startswith("replicas: Input should be a valid integer"), e.value


def test_a_scenario_that_applies_no_cronworkflow_is_refused() -> None:
    """Two empty tables and exit 0 read as "nothing would run" when the manifests were
    missing (a list left empty, a key misspelled in a generated file)."""
    with pytest.raises(ScenarioError) as e:
        load_scenario({"start": START, "end": END, "cronWorkflows": []})
    assert str(e.value).startswith("cronWorkflows: the scenario applies no CronWorkflow")


def test_a_scenario_whose_cronworkflows_come_by_an_apply_action_runs() -> None:
    sc = load_scenario(
        {
            "start": START,
            "end": END,
            "actions": [{"at": "2026-05-04T14:05:00Z", "apply": cron("later")}],
        }
    )
    names = {w["cronWorkflow"] for w in simulate(sc, "memory:")["workflows"]}
    assert names == {"later"}
