# ruff: noqa: E501  (manifests are data: one case a line reads best)
"""CronWorkflow manifests of our own for the lint differential, each aimed at one rule of Argo's
validation (workflow/validate.ValidateCronWorkflow and ValidateWorkflow), its strict decoding
(unknown fields, wrong JSON types) or its CRD. No verdict is written here: Argo's own lint
gives it at test time, and cronsource must agree."""

from __future__ import annotations

_HEAD = """apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: {name}
"""

_WORKFLOW_SPEC = """  workflowSpec:
    entrypoint: main
    templates:
    - name: main
      container:
        image: busybox
"""


def _cron(
    spec: str = "  schedules: ['0 * * * *']\n",
    workflow_spec: str = _WORKFLOW_SPEC,
    name: str = "c",
    metadata: str = "",
) -> str:
    return _HEAD.format(name=name) + metadata + "spec:\n" + spec + workflow_spec


_REF = "  workflowSpec:\n    workflowTemplateRef:\n      name: tmpl\n"
_TEMPLATE = """---
apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata:
  name: tmpl
spec:
  entrypoint: main
  templates:
  - name: main
    container:
      image: busybox
"""

CASES: dict[str, str] = {
    "valid": _cron(),
    "name-52-chars": _cron(name="a" * 52),
    "name-53-chars": _cron(name="a" * 53),
    "no-schedules": _cron(spec="  schedules: []\n"),
    "no-schedules-field": _cron(spec="  suspend: false\n"),
    "legacy-schedule": _cron(spec="  schedule: '0 * * * *'\n"),
    "schedule-six-fields": _cron(spec="  schedules: ['0 0 * * * *']\n"),
    "schedule-garbage": _cron(spec="  schedules: ['every minute']\n"),
    "schedule-every-10s": _cron(spec="  schedules: ['@every 10s']\n"),
    "schedule-every-1500ms": _cron(spec="  schedules: ['@every 1500ms']\n"),
    "schedule-every-0s": _cron(spec="  schedules: ['@every 0s']\n"),
    "schedule-hourly": _cron(spec="  schedules: ['@hourly']\n"),
    "schedule-cron-tz": _cron(spec="  schedules: ['CRON_TZ=Asia/Tokyo 0 9 * * *']\n"),
    "schedule-tz-prefix": _cron(spec="  schedules: ['TZ=Asia/Tokyo 0 9 * * *']\n"),
    "schedule-bad-cron-tz": _cron(spec="  schedules: ['CRON_TZ=Mars/Olympus 0 9 * * *']\n"),
    "schedule-day-names": _cron(spec="  schedules: ['0 9 * * MON-FRI']\n"),
    "schedule-question-mark": _cron(spec="  schedules: ['0 9 ? * *']\n"),
    "schedule-out-of-range": _cron(spec="  schedules: ['61 * * * *']\n"),
    "schedules-duplicate": _cron(spec="  schedules: ['0 * * * *', '0 * * * *']\n"),
    "timezone-valid": _cron(spec="  schedules: ['0 * * * *']\n  timezone: Europe/Paris\n"),
    "timezone-unknown": _cron(spec="  schedules: ['0 * * * *']\n  timezone: Mars/Olympus\n"),
    "timezone-null": _cron(spec="  schedules: ['0 * * * *']\n  timezone: null\n"),
    "timezone-empty": _cron(spec="  schedules: ['0 * * * *']\n  timezone: ''\n"),
    "suspend-null": _cron(spec="  schedules: ['0 * * * *']\n  suspend: null\n"),
    "suspend-string": _cron(spec="  schedules: ['0 * * * *']\n  suspend: 'yes'\n"),
    "concurrency-null": _cron(spec="  schedules: ['0 * * * *']\n  concurrencyPolicy: null\n"),
    "concurrency-empty": _cron(spec="  schedules: ['0 * * * *']\n  concurrencyPolicy: ''\n"),
    "concurrency-lowercase": _cron(
        spec="  schedules: ['0 * * * *']\n  concurrencyPolicy: forbid\n"
    ),
    "concurrency-replace": _cron(spec="  schedules: ['0 * * * *']\n  concurrencyPolicy: Replace\n"),
    "deadline-negative": _cron(spec="  schedules: ['0 * * * *']\n  startingDeadlineSeconds: -1\n"),
    "deadline-zero": _cron(spec="  schedules: ['0 * * * *']\n  startingDeadlineSeconds: 0\n"),
    "deadline-float": _cron(spec="  schedules: ['0 * * * *']\n  startingDeadlineSeconds: 1.5\n"),
    "history-negative": _cron(
        spec="  schedules: ['0 * * * *']\n  successfulJobsHistoryLimit: -1\n"
    ),
    "history-null": _cron(spec="  schedules: ['0 * * * *']\n  failedJobsHistoryLimit: null\n"),
    "labels-null": _cron(metadata="  labels:\n"),
    "unknown-spec-field": _cron(spec="  schedules: ['0 * * * *']\n  scheduel: x\n"),
    "unknown-metadata-field": _cron(metadata="  nmae: x\n"),
    "no-workflow-spec": _cron(workflow_spec=""),
    "workflow-spec-null": _cron(workflow_spec="  workflowSpec: null\n"),
    "workflow-spec-empty": _cron(workflow_spec="  workflowSpec: {}\n"),
    "unknown-workflow-spec-field": _cron(workflow_spec=_WORKFLOW_SPEC + "    entrypiont: main\n"),
    "missing-entrypoint": _cron(workflow_spec=_WORKFLOW_SPEC.replace("    entrypoint: main\n", "")),
    "entrypoint-not-a-template": _cron(
        workflow_spec=_WORKFLOW_SPEC.replace("entrypoint: main", "entrypoint: other")
    ),
    "bad-template-name": _cron(workflow_spec=_WORKFLOW_SPEC.replace("main", "'bad template name'")),
    "template-name-uppercase": _cron(workflow_spec=_WORKFLOW_SPEC.replace("main", "Main")),
    "templates-null": _cron(
        workflow_spec="  workflowSpec:\n    entrypoint: main\n    templates:\n"
    ),
    "template-without-type": _cron(
        workflow_spec="  workflowSpec:\n    entrypoint: main\n    templates:\n    - name: main\n"
    ),
    "template-two-types": _cron(
        workflow_spec=_WORKFLOW_SPEC
        + "      script:\n        image: busybox\n        source: 'true'\n"
    ),
    "templates-and-ref": _cron(
        workflow_spec=_REF
        + "    templates:\n    - name: main\n      container:\n        image: busybox\n"
    )
    + _TEMPLATE,
    "ref-in-same-file": _cron(workflow_spec=_REF) + _TEMPLATE,
    "ref-not-in-file": _cron(workflow_spec=_REF),
    "parameters-as-map": _cron(
        workflow_spec=_WORKFLOW_SPEC + "    arguments:\n      parameters:\n        a: b\n"
    ),
    "parameters-valid": _cron(
        workflow_spec=_WORKFLOW_SPEC
        + "    arguments:\n      parameters:\n      - name: a\n        value: b\n"
    ),
    "parameter-without-name": _cron(
        workflow_spec=_WORKFLOW_SPEC + "    arguments:\n      parameters:\n      - value: b\n"
    ),
    "unresolved-variable": _cron(
        workflow_spec=_WORKFLOW_SPEC.replace(
            "image: busybox", "image: '{{workflow.parameters.nope}}'"
        )
    ),
    "container-without-image": _cron(
        workflow_spec=_WORKFLOW_SPEC.replace(
            "        image: busybox\n", "        command: ['true']\n"
        )
    ),
    "when-simple-tag": _cron(
        spec="  schedules: ['0 * * * *']\n  when: \"'{{cronworkflow.namespace}}' == 'default'\"\n"
    ),
    "when-expression": _cron(
        spec="  schedules: ['0 * * * *']\n  when: '{{= cronworkflow.failed < 3 }}'\n"
    ),
    "when-sprig": _cron(
        spec="  schedules: ['0 * * * *']\n  when: \"{{= sprig.contains('a', cronworkflow.name) }}\"\n"
    ),
    "when-matches": _cron(
        spec="  schedules: ['0 * * * *']\n  when: \"{{= cronworkflow.name matches '^c' }}\"\n"
    ),
    "when-hour": _cron(spec="  schedules: ['0 * * * *']\n  when: '{{= now().Hour() < 12 }}'\n"),
    "when-syntax-error": _cron(spec="  schedules: ['0 * * * *']\n  when: '{{= 1 + }}'\n"),
    "stop-expression": _cron(
        spec="  schedules: ['0 * * * *']\n  stopStrategy:\n    expression: cronworkflow.failed >= 3\n"
    ),
    "stop-syntax-error": _cron(
        spec="  schedules: ['0 * * * *']\n  stopStrategy:\n    expression: 'cronworkflow.failed >='\n"
    ),
    "stop-empty": _cron(spec="  schedules: ['0 * * * *']\n  stopStrategy: {}\n"),
    "with-workflow-template": _cron() + _TEMPLATE,
    "with-workflow": _cron()
    + "---\napiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: w\nspec:\n  entrypoint: main\n  templates:\n  - name: main\n    container:\n      image: busybox\n",
    "with-configmap": _cron() + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n",
    "two-cron-workflows": _cron() + "---\n" + _cron(name="d"),
    "with-uid": _cron(
        metadata="  uid: 0b4c5f3e-1f3a-4c55-9f55-2f4b7e8a8c11\n  resourceVersion: '12'\n"
    ),
    "with-status": _cron()
    + "status:\n  active: []\n  phase: Active\n  succeeded: 1\n  failed: 0\n",
    "workflow-metadata": _cron(
        workflow_spec="  workflowMetadata:\n    labels: {a: b}\n    finalizers: [x/y]\n"
        + _WORKFLOW_SPEC
    ),
    "workflow-metadata-unknown": _cron(
        workflow_spec="  workflowMetadata:\n    lables: {a: b}\n" + _WORKFLOW_SPEC
    ),
    "json-manifest": '{"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow", "metadata": {"name": "c"},'
    ' "spec": {"schedules": ["0 * * * *"], "workflowSpec": {"entrypoint": "main",'
    ' "templates": [{"name": "main", "container": {"image": "busybox"}}]}}}\n',
    "not-yaml": "spec: [\n",
    "empty-file": "",
}


def _templates(body: str, entrypoint: str = "main", extra: str = "") -> str:
    """A workflowSpec whose templates are `body` (flow YAML, one template a line)."""
    return _cron(
        workflow_spec=f"  workflowSpec:\n    entrypoint: {entrypoint}\n{extra}    templates:\n"
        + "".join(f"    - {line}\n" for line in body.strip().splitlines())
    )


_C = "container: {image: busybox}"
#: Cases aimed at Argo's per-template validation (validate.go validateTemplate and below).
TEMPLATE_CASES: dict[str, str] = {
    "steps-valid": _templates(
        "{name: main, steps: [[{name: a, template: leaf}], [{name: b, template: leaf, arguments: {parameters: [{name: x, value: '{{steps.a.outputs.result}}'}]}}]]}\n"
        "{name: leaf, inputs: {parameters: [{name: x, default: y}]}, container: {image: busybox, args: ['{{inputs.parameters.x}}']}}"
    ),
    "steps-undefined-template": _templates("{name: main, steps: [[{name: a, template: nope}]]}"),
    "steps-name-invalid": _templates(
        f"{{name: main, steps: [[{{name: A_b, template: leaf}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "steps-name-duplicate": _templates(
        f"{{name: main, steps: [[{{name: a, template: leaf}}], [{{name: a, template: leaf}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "steps-future-output": _templates(
        "{name: main, steps: [[{name: a, template: leaf, arguments: {parameters: [{name: x, value: '{{steps.b.outputs.result}}'}]}}], [{name: b, template: leaf}]]}\n"
        "{name: leaf, inputs: {parameters: [{name: x, default: y}]}, container: {image: busybox}}"
    ),
    "steps-argument-without-value": _templates(
        f"{{name: main, steps: [[{{name: a, template: leaf, arguments: {{parameters: [{{name: x}}]}}}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "steps-with-items": _templates(
        "{name: main, steps: [[{name: a, template: leaf, withItems: [{k: 1}], arguments: {parameters: [{name: x, value: '{{item.k}}'}]}}]]}\n"
        "{name: leaf, inputs: {parameters: [{name: x}]}, container: {image: busybox}}"
    ),
    "steps-with-items-unknown-key": _templates(
        "{name: main, steps: [[{name: a, template: leaf, withItems: [{k: 1}], arguments: {parameters: [{name: x, value: '{{item.nope}}'}]}}]]}\n"
        "{name: leaf, inputs: {parameters: [{name: x}]}, container: {image: busybox}}"
    ),
    "steps-with-param": _templates(
        "{name: main, steps: [[{name: a, template: leaf, withParam: '[1]', arguments: {parameters: [{name: x, value: '{{item.any}}'}]}}]]}\n"
        "{name: leaf, inputs: {parameters: [{name: x}]}, container: {image: busybox}}"
    ),
    "steps-items-and-param": _templates(
        f"{{name: main, steps: [[{{name: a, template: leaf, withItems: [1], withParam: '[1]'}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "steps-template-ref": _templates(
        "{name: main, steps: [[{name: a, templateRef: {name: wt, template: t}}], [{name: b, templateRef: {name: wt, template: t}, arguments: {parameters: [{name: x, value: '{{steps.a.outputs.parameters.p}}'}]}}]]}"
    ),
    "steps-template-ref-without-template": _templates(
        "{name: main, steps: [[{name: a, templateRef: {name: wt}}]]}"
    ),
    "steps-parallelism-on-leaf": _templates(
        "{name: main, parallelism: 2, container: {image: busybox}}"
    ),
    "steps-active-deadline": _templates(
        f"{{name: main, activeDeadlineSeconds: 10, steps: [[{{name: a, template: leaf}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "steps-timeout": _templates(
        f"{{name: main, timeout: 10s, steps: [[{{name: a, template: leaf}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "leaf-timeout-number": _templates("{name: main, timeout: '10', container: {image: busybox}}"),
    "leaf-timeout-valid": _templates("{name: main, timeout: 10s, container: {image: busybox}}"),
    "dag-valid": _templates(
        "{name: main, dag: {tasks: [{name: a, template: leaf}, {name: b, template: leaf, depends: a.Succeeded, arguments: {parameters: [{name: x, value: '{{tasks.a.outputs.result}}'}]}}]}}\n"
        "{name: leaf, inputs: {parameters: [{name: x, default: y}]}, container: {image: busybox}}"
    ),
    "dag-cycle": _templates(
        f"{{name: main, dag: {{tasks: [{{name: a, template: leaf, dependencies: [b]}}, {{name: b, template: leaf, dependencies: [a]}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-unknown-dependency": _templates(
        f"{{name: main, dag: {{tasks: [{{name: a, template: leaf, dependencies: [z]}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-duplicate-task": _templates(
        f"{{name: main, dag: {{tasks: [{{name: a, template: leaf}}, {{name: a, template: leaf}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-no-tasks": _templates("{name: main, dag: {tasks: []}}"),
    "dag-bad-task-result": _templates(
        f"{{name: main, dag: {{tasks: [{{name: a, template: leaf}}, {{name: b, template: leaf, depends: a.Finished}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-depends-and-dependencies": _templates(
        f"{{name: main, dag: {{tasks: [{{name: a, template: leaf}}, {{name: b, template: leaf, depends: a, dependencies: [a]}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-digit-name": _templates(
        f"{{name: main, dag: {{tasks: [{{name: 1a, template: leaf}}, {{name: b, template: leaf, dependencies: [1a]}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-missing-argument-dependency": _templates(
        "{name: main, dag: {tasks: [{name: a, template: leaf}, {name: b, template: leaf, arguments: {parameters: [{name: x, value: '{{tasks.a.outputs.result}}'}]}}]}}\n"
        "{name: leaf, inputs: {parameters: [{name: x, default: y}]}, container: {image: busybox}}"
    ),
    "dag-status-of-non-ancestor": _templates(
        "{name: main, dag: {tasks: [{name: a, template: leaf}, {name: b, template: leaf, when: '{{tasks.a.status}} == Succeeded'}]}}\n"
        f"{{name: leaf, {_C}}}"
    ),
    "dag-target-undefined": _templates(
        f"{{name: main, dag: {{target: z, tasks: [{{name: a, template: leaf}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "dag-items-condition-without-items": _templates(
        f"{{name: main, dag: {{tasks: [{{name: a, template: leaf}}, {{name: b, template: leaf, depends: a.AnySucceeded}}]}}}}\n{{name: leaf, {_C}}}"
    ),
    "on-exit-undefined": _templates(f"{{name: main, {_C}}}", extra="    onExit: nope\n"),
    "on-exit-failures": _templates(
        f"{{name: main, {_C}}}\n{{name: bye, container: {{image: busybox, args: ['{{{{workflow.failures}}}}']}}}}",
        extra="    onExit: bye\n",
    ),
    "failures-without-on-exit": _templates(
        "{name: main, container: {image: busybox, args: ['{{workflow.failures}}']}}"
    ),
    "script-without-image": _templates("{name: main, script: {source: 'true'}}"),
    "template-defaults-image": _templates(
        "{name: main, container: {command: ['true']}}",
        extra="    templateDefaults:\n      container:\n        image: busybox\n",
    ),
    "resource-bad-action": _templates("{name: main, resource: {action: frob, manifest: 'a: b'}}"),
    "resource-without-manifest": _templates("{name: main, resource: {action: create}}"),
    "suspend-template": _templates("{name: main, suspend: {}}"),
    "retry-policy-unknown": _templates(
        "{name: main, retryStrategy: {retryPolicy: Sometimes}, container: {image: busybox}}"
    ),
    "retries-variable": _templates(
        "{name: main, retryStrategy: {limit: 2}, container: {image: busybox, args: ['{{retries}}']}}"
    ),
    "hook-without-expression": _templates(
        f"{{name: main, {_C}}}", extra="    hooks:\n      running:\n        template: main\n"
    ),
    "pod-gc-unknown": _templates(
        f"{{name: main, {_C}}}", extra="    podGC:\n      strategy: Sometimes\n"
    ),
    "input-undeclared": _templates(
        "{name: main, container: {image: busybox, args: ['{{inputs.parameters.nope}}']}}"
    ),
    "input-artifact-from": _templates(
        "{name: main, inputs: {artifacts: [{name: a, from: x, path: /a}]}, container: {image: busybox}}"
    ),
    "output-without-value": _templates(
        "{name: main, outputs: {parameters: [{name: o}]}, container: {image: busybox}}"
    ),
    "output-path-on-steps": _templates(
        f"{{name: main, outputs: {{parameters: [{{name: o, valueFrom: {{path: /o}}}}]}}, steps: [[{{name: a, template: leaf}}]]}}\n{{name: leaf, {_C}}}"
    ),
    "output-global-name": _templates(
        "{name: main, outputs: {parameters: [{name: o, globalName: g, valueFrom: {path: /o}}]}, container: {image: busybox}}"
    ),
    "workflow-labels-tag": _templates(
        "{name: main, container: {image: busybox, args: ['{{workflow.labels.team}}']}}"
    ),
    "workflow-name-tag": _templates(
        "{name: main, container: {image: busybox, args: ['{{workflow.name}}', '{{workflow.scheduledTime}}', '{{pod.name}}']}}"
    ),
    "unknown-root-tag": _templates(
        "{name: main, container: {image: busybox, args: ['{{foo.bar}}']}}"
    ),
    "expression-tag": _templates(
        "{name: main, container: {image: busybox, args: ['{{= workflow.nope }}']}}"
    ),
    "unused-template-broken": _templates(f"{{name: main, {_C}}}\n{{name: other}}"),
    "mount-collision": _templates(
        "{name: main, inputs: {artifacts: [{name: a, path: /d, raw: {data: x}}]}, container: {image: busybox, volumeMounts: [{name: v, mountPath: /d}]}}"
    ),
}
CASES.update(TEMPLATE_CASES)
CASES["workflow-labels-from-metadata"] = _cron(
    spec="  schedules: ['0 * * * *']\n  workflowMetadata:\n    labels: {team: a}\n",
    workflow_spec=_WORKFLOW_SPEC.replace(
        "image: busybox",
        "image: busybox\n        args: ['{{workflow.labels.team}}', '{{workflow.labels.workflows.argoproj.io/cron-workflow}}', '{{workflow.annotations.workflows.argoproj.io/scheduled-time}}']",
    ),
)
CASES["workflow-labels-from-spec-metadata"] = _cron(
    workflow_spec="  workflowSpec:\n    workflowMetadata:\n      annotations: {note: a}\n"
    + _WORKFLOW_SPEC.replace("  workflowSpec:\n", "").replace(
        "image: busybox", "image: busybox\n        args: ['{{workflow.annotations.note}}']"
    ),
)
# Ancestry beyond the direct dependency (domain/workflowdag.py Lineage walks only as far as a
# tag asks): the status of a grandparent may be read, that of a task off the chain may not.
CASES["dag-grandparent-status"] = _templates(
    "{name: main, dag: {tasks: [{name: a, template: leaf}, {name: b, template: leaf, dependencies: [a]}, {name: c, template: leaf, dependencies: [b], when: '{{tasks.a.status}} == Succeeded'}]}}\n"
    f"{{name: leaf, {_C}}}"
)
CASES["dag-status-off-the-chain"] = _templates(
    "{name: main, dag: {tasks: [{name: a, template: leaf}, {name: b, template: leaf, dependencies: [a]}, {name: c, template: leaf, when: '{{tasks.a.status}} == Succeeded'}]}}\n"
    f"{{name: leaf, {_C}}}"
)
CASES["dag-argument-from-off-the-chain"] = _templates(
    "{name: main, dag: {tasks: [{name: a, template: leaf}, {name: b, template: leaf, dependencies: [a]}, {name: c, template: take, dependencies: [b], arguments: {parameters: [{name: x, value: '{{tasks.a.outputs.result}}'}]}}, {name: d, template: take, arguments: {parameters: [{name: x, value: '{{tasks.b.outputs.result}}'}]}}]}}\n"
    f"{{name: leaf, {_C}}}\n"
    "{name: take, inputs: {parameters: [{name: x}]}, container: {image: busybox}}"
)
