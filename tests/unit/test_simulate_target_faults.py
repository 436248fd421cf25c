"""`simulate` with a target that refuses creates (`targetFails`, `--target-fails`) and the
Kubernetes Events it would send (`kubeEvents: true`, `--kube-events`): issue 23 items 5 and 6
through the real runtime on a virtual clock (adapters/entrypoints/simulate/).

The scenarios tests/scenarios/submission-retries.yaml and kubernetes-events.yaml show the
same end to end through the CLI; here each rule is one given/when/then on `memory:`.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from click.testing import CliRunner

from cronsource.adapters.entrypoints.cli import cli
from cronsource.adapters.entrypoints.simulate import ScenarioError, load_scenario, simulate
from cronsource.adapters.entrypoints.simulate.target import SimTarget, TargetFault
from cronsource.adapters.infrastructure.kube import ApiError, Backoff, KubeTarget
from cronsource.projections.dispatch import PermanentSubmissionError
from tests.instants import T0
from tests.kube.fake import FakeKube
from tests.unit.test_kube_target import workflow

START, END = "2026-05-04T10:00:30Z", "2026-05-04T10:10:30Z"


def cron(name: str = "report", schedule: str = "5 10 * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedules": [schedule],
            "workflowSpec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
            **spec,
        },
    }


def run(*actions: dict[str, Any], crons: Any = None, **extra: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "start": START,
        "end": END,
        "runDuration": "20s",
        "cronWorkflows": crons if crons is not None else [cron(startingDeadlineSeconds=120)],
        "actions": list(actions),
        **extra,
    }
    kube_events = bool(sc.pop("kube_events", False))
    return simulate(load_scenario(sc), "memory:", kube_events=kube_events)


def fails(at: str, for_: str, error: Any = 503, **more: Any) -> dict[str, Any]:
    return {"at": at, "targetFails": {"for": for_, "error": error, **more}}


def of(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in result["events"] if e["type"] == kind]


# ------------------------------------------------------------------ retried submissions


def test_a_refusal_shorter_than_the_deadline_is_retried_and_the_workflow_created_late() -> None:
    # Given the API server answers 503 to every create from 10:04:30 for 90 s
    # When the 10:05 tick fires (startingDeadlineSeconds 120)
    result = run(fails("2026-05-04T10:04:30Z", "90s"))
    # Then it is retried with the dispatch's backoff (0, 0.5, 1.5, 3.5, 7.5 s, then every 5 s:
    # DISPATCH_MAX_BACKOFF) and created at the first retry after the window, 10:06:02.5
    (wf,) = result["workflows"]
    assert (wf["scheduledTime"], wf["createdAt"]) == (
        "2026-05-04T10:05:00Z",
        "2026-05-04T10:06:02Z",
    )
    (failed,) = of(result, "SubmissionFailed")
    assert failed["reason"] == "TransientSubmissionError" and failed["attempts"] == 1
    assert failed["message"].startswith("503 Service Unavailable (attempt 1; retried until")
    (recovered,) = of(result, "SubmissionRecovered")
    assert (recovered["attempts"], recovered["at"]) == (16, "2026-05-04T10:06:02Z")
    assert result["cronWorkflows"][0]["status"]["conditions"] == []


def test_a_refusal_past_the_deadline_is_given_up_with_its_attempts() -> None:
    # Given creates are refused with 503 from 10:04:30 for 5 minutes
    result = run(fails("2026-05-04T10:04:30Z", "5m"))
    # Then the 10:05 fire is given up at the first retry past 10:07, with no Workflow
    assert result["workflows"] == []
    first, given_up = of(result, "SubmissionFailed")
    assert (first["reason"], first["transient"]) == ("TransientSubmissionError", True)
    assert given_up["reason"] == "SubmissionRetriesExhausted" and not given_up["transient"]
    assert given_up["attempts"] == 27 and given_up["at"] == "2026-05-04T10:07:02Z"
    assert "given up after its starting deadline of 2m" in given_up["message"]
    status = result["cronWorkflows"][0]["status"]
    assert [c["type"] for c in status["conditions"]] == ["TransientSubmissionError"]
    assert status["active"] == []


@pytest.mark.parametrize(
    ("error", "reason", "attempts"),
    [
        pytest.param(400, "SubmissionError", 1, id="400"),
        pytest.param(403, "SubmissionError", 1, id="403"),
        pytest.param(404, "SubmissionError", 1, id="404 no such namespace"),
        pytest.param(422, "SubmissionError", 1, id="422"),
        pytest.param(429, "SubmissionRetriesExhausted", 27, id="429"),
        pytest.param("500", "SubmissionRetriesExhausted", 27, id="500"),
        pytest.param(504, "SubmissionRetriesExhausted", 27, id="504"),
        pytest.param("timeout", "SubmissionRetriesExhausted", 27, id="timeout"),
        pytest.param("reset", "SubmissionRetriesExhausted", 27, id="reset"),
    ],
)
def test_a_refusal_for_good_is_not_retried_and_a_transient_one_is(
    error: Any, reason: str, attempts: int
) -> None:
    # Given every create is refused with `error` for the whole run
    result = run(fails(START, "1h", error))
    # Then the fire's last word is `reason`, after `attempts` creates
    last = of(result, "SubmissionFailed")[-1]
    assert (last["reason"], last["attempts"]) == (reason, attempts)
    assert result["workflows"] == []


def test_a_fault_of_one_cron_workflow_leaves_the_others_created_on_time() -> None:
    # Given only `report`'s creates get no answer, and `other` fires at the same tick
    crons = [cron(startingDeadlineSeconds=120), cron("other")]
    result = run(fails(START, "1h", "reset", cronWorkflow="report"), crons=crons)
    # Then `other`'s Workflow is created at its tick, in the same dispatch
    assert [(w["name"], w["createdAt"]) for w in result["workflows"]] == [
        ("other-1777889100", "2026-05-04T10:05:00Z")
    ]
    assert {e["cronWorkflow"] for e in of(result, "SubmissionFailed")} == {"default/report"}


@pytest.mark.parametrize(
    "status", [400, 403, 404, 422, 429, 500, 503, 0], ids=lambda s: f"status {s}"
)
def test_the_simulated_target_sorts_an_error_as_the_cluster_target_does(status: int) -> None:
    """Given the same answer to a create from a cluster (FakeKube, through KubeTarget) and
    from the simulated target, both raise the same: a PermanentSubmissionError with the same
    message, or the error itself for the dispatcher to retry."""
    reason = HTTPStatus(status).phrase if status else "ClientOSError: reset"
    kube = FakeKube()
    try:
        kube.fail("create", status, times=5, reason=reason)
        with pytest.raises(Exception) as on_cluster:
            KubeTarget(kube, Backoff(sleep=lambda s: None)).create(
                workflow(), cron_id="cron", trigger="schedule", at=T0
            )
    finally:
        kube.close()
    sim = SimTarget(default_duration=T0 - T0, default_phase="Succeeded")
    sim.faults.append(TargetFault(T0, T0.replace(year=2099), str(status or "reset")))
    wf = workflow()
    wf["metadata"]["labels"] = {"workflows.argoproj.io/cron-workflow": "job"}
    with pytest.raises(Exception) as simulated:
        sim.create(wf, cron_id="cron", trigger="schedule", at=T0)
    assert type(on_cluster.value) in (PermanentSubmissionError, ApiError)
    assert isinstance(simulated.value, type(on_cluster.value))
    if isinstance(on_cluster.value, PermanentSubmissionError):
        assert str(simulated.value) == str(on_cluster.value)
    else:
        assert isinstance(simulated.value, ApiError) and isinstance(on_cluster.value, ApiError)
        assert simulated.value.status == on_cluster.value.status


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        pytest.param(
            {"for": "3m", "error": 418},
            "actions[0].targetFails.error: 418 is not an HTTP status the cluster target"
            " retries (429, 5xx) or refuses for good (400, 403, 404, 422), or timeout, reset",
            id="unknown status",
        ),
        pytest.param(
            {"for": "3m", "error": 409},
            "actions[0].targetFails.error: 409 is not an HTTP status",
            id="409 means something else",
        ),
        pytest.param(
            {"for": "3m", "error": "boom"},
            "actions[0].targetFails.error: 'boom' is not an HTTP status",
            id="unknown word",
        ),
        pytest.param(
            {"for": "-3m"},
            "actions[0].targetFails.for: duration '-3m' must be greater than zero",
            id="negative duration",
        ),
        pytest.param({"error": 503}, "actions[0].targetFails.for: Field required", id="no for"),
    ],
)
def test_a_bad_target_fails_is_one_line_naming_the_field(
    fault: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario(
            {"start": START, "end": END, "actions": [{"at": START, "targetFails": fault}]}
        )
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_bad_target_fails_in_a_file_exits_2_with_one_line(tmp_path: Any) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        json.dumps(
            {
                "start": START,
                "end": END,
                "actions": [{"at": START, "targetFails": {"for": "3m", "error": 418}}],
            }
        )
    )
    res = CliRunner().invoke(cli, ["simulate", str(f)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "actions[0].targetFails.error: 418" in res.output
    assert "Traceback" not in res.output


def _plain(tmp_path: Any, *flags: str) -> Any:
    f = tmp_path / "cw.yaml"
    f.write_text(json.dumps(cron(startingDeadlineSeconds=120)))
    args = ["simulate", "-f", str(f), "--start", START, "--end", END, "-o", "json", *flags]
    return CliRunner().invoke(cli, args)


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        pytest.param("2026-05-04T10:04:30Z..2026-05-04T10:09:00Z", "Retries", id="default 503"),
        pytest.param("2026-05-04T10:04:30Z..2026-05-04T10:09:00Z:403", "Error", id="403"),
        pytest.param("2026-05-04T10:04:30Z..2026-05-04T12:09:00+02:00:429", "Retries", id="429"),
        pytest.param("2026-05-04T10:04:30Z..2026-05-04T12:09:00+02:00", "Retries", id="offset"),
        pytest.param("2026-05-04T10:04:30Z..2026-05-04T10:09:00Z:timeout", "Retries", id="word"),
    ],
)
def test_simulate_f_takes_target_fails_windows(tmp_path: Any, window: str, reason: str) -> None:
    res = _plain(tmp_path, "--target-fails", window)
    assert res.exit_code == 0, res.output
    last = of(json.loads(res.output), "SubmissionFailed")[-1]
    assert last["reason"] == f"Submission{reason}" + ("Exhausted" if reason == "Retries" else "")


@pytest.mark.parametrize(
    ("window", "message"),
    [
        pytest.param(
            "2026-05-04T10:04:30Z..2026-05-04T10:09:00Z:418",
            "error: --target-fails: '418' is not an HTTP status",
            id="unknown error",
        ),
        pytest.param(
            "2026-05-04T10:09:00Z..2026-05-04T10:04:30Z",
            "error: --target-fails: '2026-05-04T10:09:00Z..2026-05-04T10:04:30Z' ends before"
            " it starts",
            id="backwards",
        ),
        pytest.param("10:04", "error: --target-fails: '10:04' is not FROM..TO", id="no window"),
    ],
)
def test_a_bad_target_fails_flag_exits_2_with_one_line(
    tmp_path: Any, window: str, message: str
) -> None:
    res = _plain(tmp_path, "--target-fails", window)
    assert res.exit_code == 2 and res.output.startswith(message), res.output
    assert res.output.count("\n") == 1


def test_target_fails_is_for_f_alone(tmp_path: Any) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps({"start": START, "end": END}))
    res = CliRunner().invoke(cli, ["simulate", str(f), "--target-fails", f"{START}..{END}"])
    assert res.exit_code == 2 and "--target-fails: only with -f" in res.output


# ------------------------------------------------------------------ Kubernetes Events


def kube(result: dict[str, Any], reason: str | None = None) -> list[dict[str, Any]]:
    return [e for e in result["kubeEvents"] if reason is None or e["reason"] == reason]


def test_kube_events_are_shown_only_when_asked_for() -> None:
    assert "kubeEvents" not in run()
    assert kube(run(kube_events=True), "SuccessfulCreate")
    assert kube(run(kubeEvents=True), "SuccessfulCreate")  # the scenario asks itself


def test_each_decision_becomes_the_event_run_kube_would_send() -> None:
    # Given a refusal for good at 10:05, then a pause after one failed run, and a resume
    crons = [
        cron(startingDeadlineSeconds=120),
        {
            **cron("flaky", "* * * * *"),
            "metadata": {
                "name": "flaky",
                "namespace": "default",
                "annotations": {
                    "cronsource.io/pause-after-failures": "1",
                    "cronsource.io/simulate-run-phase": "Failed",
                },
            },
        },
    ]
    result = run(
        fails("2026-05-04T10:04:30Z", "1m", 403, cronWorkflow="report"),
        {"at": "2026-05-04T10:03:30Z", "resume": "flaky"},
        crons=crons,
        kube_events=True,
    )
    # Then each is an Event on its CronWorkflow, with Kubernetes CronJob's or Argo's reason
    said = {(e["cronWorkflow"], e["type"], e["reason"]) for e in kube(result)}
    assert said >= {
        ("default/flaky", "Normal", "SuccessfulCreate"),
        ("default/flaky", "Normal", "SawCompletedJob"),
        ("default/flaky", "Warning", "PausedAfterFailures"),
        ("default/flaky", "Normal", "Resumed"),
        ("default/flaky", "Normal", "PausedAfterFailures"),  # the paused ticks, skipped
        ("default/report", "Warning", "SubmissionError"),
    }
    (refused,) = kube(result, "SubmissionError")
    assert refused["message"] == (
        "Failed to submit Workflow: workflow default/report-1777889100 refused (403 Forbidden)"
    )
    assert refused["firstTimestamp"] == refused["lastTimestamp"] == "2026-05-04T10:05:00Z"


def test_the_same_event_again_is_one_event_with_a_count() -> None:
    # Given a CronWorkflow suspended and resumed three times (the same message each time)
    actions = []
    for minute in (1, 2, 3):
        actions += [
            {"at": f"2026-05-04T10:0{minute}:10Z", "suspend": "report"},
            {"at": f"2026-05-04T10:0{minute}:20Z", "resume": "report"},
        ]
    result = run(*actions, kube_events=True)
    # Then each is one Event, counted, from the first time to the last (client-go's dedup)
    (suspended,) = kube(result, "Suspended")
    assert suspended["count"] == 3 and suspended["message"] == "Suspended by simulate"
    assert (suspended["firstTimestamp"], suspended["lastTimestamp"]) == (
        "2026-05-04T10:01:10Z",
        "2026-05-04T10:03:10Z",
    )
    assert kube(result, "Resumed")[0]["count"] == 3


def test_similar_events_are_combined_from_the_tenth_on() -> None:
    # Given a `when` that is false at each of 12 ticks (12 messages: each names its tick)
    crons = [cron(schedule="* * * * *", when="{{= cronworkflow.namespace == 'x' }}")]
    result = simulate(
        load_scenario(
            {
                "start": "2026-05-04T10:00:30Z",
                "end": "2026-05-04T10:12:30Z",
                "cronWorkflows": crons,
            }
        ),
        "memory:",
        kube_events=True,
    )
    # Then 9 are Events of their own, and the rest one combined Event counting them
    skips = kube(result, "WhenFalse")
    assert [e["count"] for e in skips] == [1] * 9 + [3]
    assert skips[-1]["message"].startswith("(combined from similar events): Skipped tick")


def test_a_deleted_cron_workflow_gets_no_more_events() -> None:
    """The watch forgets a deleted object; what happens to its runs after has no object."""
    crons = [cron(schedule="* * * * *")]
    result = run({"at": "2026-05-04T10:01:10Z", "delete": "report"}, crons=crons, kube_events=True)
    assert [e["message"] for e in kube(result)] == ["Created workflow report-1777888860"]


def test_after_an_outage_nothing_recorded_during_it_is_sent() -> None:
    """As a restarted `run --kube`: its feed starts at the head of the log (a suspend made
    while no replica ran is in `history`, not in an Event), its correlator empty."""
    result = run(
        {"at": "2026-05-04T10:01:00Z", "outage": "2m"},
        {"at": "2026-05-04T10:02:00Z", "suspend": "report"},
        {"at": "2026-05-04T10:04:00Z", "resume": "report"},
        kube_events=True,
    )
    assert of(result, "Suspended") and not kube(result, "Suspended")
    assert kube(result, "Resumed")


def test_the_table_shows_the_events_when_asked(tmp_path: Any) -> None:
    f = tmp_path / "cw.yaml"
    f.write_text(json.dumps(cron(startingDeadlineSeconds=120)))
    base = ["simulate", "-f", str(f), "--start", START, "--end", END]
    shown = CliRunner().invoke(cli, [*base, "--kube-events"])
    assert shown.exit_code == 0
    assert "Kubernetes Events" in shown.output and "SuccessfulCreate" in shown.output
    assert "Kubernetes Events" not in CliRunner().invoke(cli, base).output
    names = CliRunner().invoke(cli, [*base, "--kube-events", "--name", "other", "-o", "json"])
    assert json.loads(names.output)["kubeEvents"] == []  # --name filters them too


def test_a_refusal_for_good_shows_argos_submission_error_until_a_create_succeeds() -> None:
    """Argo's controller sets SubmissionError ("Failed to submit Workflow: ...") when a
    submission is refused, and removes it at the next that succeeds; it showed only as an
    Event here, and `.status.conditions` stayed empty."""
    crons = [cron(schedule="*/5 10 * * *", startingDeadlineSeconds=120)]
    refused = run(fails("2026-05-04T10:04:30Z", "1m", 403), crons=crons, end="2026-05-04T10:06:00Z")
    [cond] = refused["cronWorkflows"][0]["status"]["conditions"]
    assert cond["type"] == "SubmissionError" and cond["status"] == "True"
    assert cond["message"] == (
        "Failed to submit Workflow: workflow default/report-1777889100 refused (403 Forbidden)"
    )
    later = run(fails("2026-05-04T10:04:30Z", "1m", 403), crons=crons, end="2026-05-04T10:11:00Z")
    assert later["cronWorkflows"][0]["status"]["conditions"] == []
    assert [w["name"] for w in later["workflows"]] == ["report-1777889400"]
