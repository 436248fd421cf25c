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
