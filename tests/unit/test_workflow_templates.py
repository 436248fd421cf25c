"""Argo's per-template validation, offline, in Argo's words (domain/workflowtemplates.py).

Each message below is what Argo v4.0.5's own lint printed for the same spec (the integration
differential, tests/integration/test_argo_lint_differential.py, runs Argo's code on these and
more); here they pin the rules without Argo's build.
"""

from __future__ import annotations

from typing import Any

import pytest

from cronsource.domain.manifest import ManifestError, parse_manifest
from cronsource.domain.workflowspec import workflow_spec_problem

LEAF = {"name": "leaf", "container": {"image": "busybox"}}


def spec(*templates: dict[str, Any], entrypoint: str = "main", **extra: Any) -> dict[str, Any]:
    return {"entrypoint": entrypoint, "templates": list(templates), **extra}


@pytest.mark.parametrize(
    ("workflow_spec", "argo_says"),
    [
        pytest.param(
            spec(LEAF, entrypoint="other"), "template name 'other' undefined", id="entrypoint"
        ),
        pytest.param(spec({"name": "main"}), "template 'main' type is unknown", id="no type"),
        pytest.param(
            spec({"name": "main", "container": {"command": ["true"]}}),
            "templates.main.container.image may not be empty",
            id="no image",
        ),
        pytest.param(
            spec(
                {"name": "main", "container": {"image": "b", "args": ["{{inputs.parameters.x}}"]}}
            ),
            "templates.main: failed to resolve {{inputs.parameters.x}}",
            id="undeclared input",
        ),
        pytest.param(
            spec({"name": "main", "steps": [[{"name": "a", "template": "nope"}]]}),
            "templates.main.steps[0].a template name 'nope' undefined",
            id="step calls nothing",
        ),
        pytest.param(
            spec(
                {
                    "name": "main",
                    "dag": {
                        "tasks": [
                            {"name": "a", "template": "leaf", "dependencies": ["b"]},
                            {"name": "b", "template": "leaf", "dependencies": ["a"]},
                        ]
                    },
                },
                LEAF,
            ),
            "templates.main sorting failed: graph with cycle",
            id="dag cycle",
        ),
        pytest.param(
            spec(
                {"name": "main", "container": {"image": "b"}},
                {"name": "other"},
            ),
            "templates.other template 'other' type is unknown",
            id="an unused template is checked too",
        ),
        pytest.param(
            spec({"name": "main", "container": {"image": "b"}}, onExit="bye"),
            "template name 'bye' undefined",
            id="onExit",
        ),
    ],
)
def test_a_template_argo_refuses_is_refused_with_argos_words(
    workflow_spec: dict[str, Any], argo_says: str
) -> None:
    # Given a workflowSpec Argo's lint refuses, when cronsource checks it, then it says what
    # Argo says after "cannot validate Workflow: ".
    assert workflow_spec_problem(workflow_spec) == f"cannot validate Workflow: {argo_says}"


@pytest.mark.parametrize(
    "workflow_spec",
    [
        pytest.param(spec({"name": "main", "container": {"image": "b"}}), id="one container"),
        pytest.param(
            spec(
                {
                    "name": "main",
                    "steps": [
                        [{"name": "a", "template": "leaf"}],
                        [
                            {
                                "name": "b",
                                "template": "take",
                                "arguments": {
                                    "parameters": [
                                        {"name": "x", "value": "{{steps.a.outputs.result}}"}
                                    ]
                                },
                            }
                        ],
                    ],
                },
                LEAF,
                {
                    "name": "take",
                    "inputs": {"parameters": [{"name": "x"}]},
                    "container": {"image": "b", "args": ["{{inputs.parameters.x}}"]},
                },
            ),
            id="a step reads the output of the step before",
        ),
        pytest.param(
            spec(
                {"name": "main", "container": {"command": ["true"]}},
                templateDefaults={"container": {"image": "busybox"}},
            ),
            id="image from templateDefaults",
        ),
        pytest.param(
            spec(
                {
                    "name": "main",
                    "container": {"image": "b", "args": ["{{workflow.name}}", "{{= nope }}"]},
                }
            ),
            id="a global and an expression (Argo leaves expressions alone)",
        ),
        pytest.param(
            spec(
                {
                    "name": "main",
                    "steps": [[{"name": "a", "templateRef": {"name": "w", "template": "t"}}]],
                }
            ),
            id="a templateRef is the cluster's to resolve",
        ),
    ],
)
def test_a_template_argo_accepts_is_accepted(workflow_spec: dict[str, Any]) -> None:
    assert workflow_spec_problem(workflow_spec) is None


def test_a_label_the_cronworkflow_gives_its_child_may_be_read() -> None:
    # Given a template reading a label that only the CronWorkflow's workflowMetadata sets
    reads = spec(
        {"name": "main", "container": {"image": "b", "args": ["{{workflow.labels.team}}"]}}
    )
    manifest = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "c"},
        "spec": {"schedules": ["0 * * * *"], "workflowSpec": reads},
    }
    # When the label is not set, then Argo's refusal; when it is, then it passes.
    with pytest.raises(ManifestError, match=r"failed to resolve \{\{workflow.labels.team\}\}"):
        parse_manifest(manifest)
    manifest["spec"]["workflowMetadata"] = {"labels": {"team": "a"}}
    assert parse_manifest(manifest).metadata.name == "c"


def test_with_no_schedule_the_schedules_are_named_before_the_workflow_spec() -> None:
    # Argo validates the schedules first and the workflowSpec last.
    manifest = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "c"},
    }
    with pytest.raises(ManifestError, match=r"^spec\.schedules: at least one schedule"):
        parse_manifest(manifest)


def chain(n: int, last: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DAG of n tasks, each depending on the one before and passing on its output."""
    tasks: list[dict[str, Any]] = [{"name": "t0", "template": "leaf"}]
    for i in range(1, n):
        tasks.append(
            {
                "name": f"t{i}",
                "template": "take",
                "dependencies": [f"t{i - 1}"],
                "arguments": {
                    "parameters": [{"name": "x", "value": f"{{{{tasks.t{i - 1}.outputs.result}}}}"}]
                },
            }
        )
    if last is not None:
        tasks.append(last)
    take = {
        "name": "take",
        "inputs": {"parameters": [{"name": "x"}]},
        "container": {"image": "b", "args": ["{{inputs.parameters.x}}"]},
    }
    return spec({"name": "main", "dag": {"tasks": tasks}}, LEAF, take)


def test_a_long_chain_reads_the_status_of_any_ancestor_and_not_of_others() -> None:
    # Given 400 chained tasks, when the last reads the status of the first (an ancestor four
    # hundred steps up), then it is valid; when a task outside the chain reads it, it is not.
    ancestor = {
        "name": "end",
        "template": "leaf",
        "dependencies": ["t399"],
        "when": "{{tasks.t0.status}} == Succeeded",
    }
    assert workflow_spec_problem(chain(400, ancestor)) is None
    stranger = {"name": "end", "template": "leaf", "when": "{{tasks.t0.status}} == Succeeded"}
    assert workflow_spec_problem(chain(400, stranger)) == (
        "cannot validate Workflow: templates.main.tasks.end failed to resolve {{tasks.t0.status}}"
    )


def test_an_argument_from_a_task_that_is_not_an_ancestor_is_a_missing_dependency() -> None:
    stranger = {
        "name": "end",
        "template": "take",
        "arguments": {"parameters": [{"name": "x", "value": "{{tasks.t3.outputs.result}}"}]},
    }
    assert workflow_spec_problem(chain(5, stranger)) == (
        "cannot validate Workflow: templates.main.tasks.end missing dependency 't3' for"
        " parameter 'x'"
    )
