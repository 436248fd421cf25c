"""The Helm chart deploy/helm/cronsource: `helm lint` and `helm template` of Helm's own
command (v4.3.0, scripts/build-helm.sh), the rendered objects applied with strict server-side
validation to a real kube-apiserver (tests/kube/apiserver.py) as tests/e2e/test_kube_deploy.py
applies the kustomization, the service account's permissions checked by SubjectAccessReviews,
and the defaults compared with the kustomization's objects: the same Deployment (pod spec,
probes, env), Job, RBAC, ConfigMap and Service. The ServiceMonitor and PrometheusRule, whose
CRDs the test server does not have, are decoded strictly into the Prometheus Operator's Go
types (tests/helm/moncheck)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploytools import CHART, DASHBOARD, RULE_FILE, moncheck, run_helm, template
from tests.e2e.test_kube_deploy import NEEDED, OTHERS, VERBS, Admin, split
from tests.kube import apiserver as kube
from tests.kube import kustomize

REPO = Path(__file__).resolve().parents[2]
#: Everything the chart can switch on, less the two kinds the test server has no CRD for.
EVERY_OPTION = [
    "store.create=true",
    "store.url=postgresql://cronsource:secret@postgres.example:5432/cronsource",
    "store.token=metrics-token",
    "store.secretName=sched-store",
    "instanceId=cronsource",
    "replicaCount=3",
    "lateTolerance=1m",
    "metrics.port=9100",
    "metrics.perCronWorkflow=true",
    "extraArgs={--retain,90d}",
    "grafanaDashboard.enabled=true",
    "serviceAccount.annotations.team=platform",
    "podAnnotations.team=platform",
    "nodeSelector.kubernetes\\.io/os=linux",
]
MONITORING = [
    "metrics.serviceMonitor.enabled=true",
    "metrics.serviceMonitor.bearerToken=true",
    "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    "prometheusRule.enabled=true",
]
#: (release, namespace, --set values): the names of the kustomization, and another release.
RELEASES = [
    ("cronsource", "cronsource", ["store.create=true", "store.url=postgresql://u:p@db/cs"]),
    ("sched", "team-a", EVERY_OPTION),
]


def objects(text: str) -> list[dict[str, Any]]:
    return [doc for doc, _ in split(text)]


def by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(out) == len(docs), "two objects of one kind and name"
    return out


def test_helm_lint_is_clean_with_the_defaults_and_with_every_option() -> None:
    for sets in ([], EVERY_OPTION + MONITORING):
        args = ["lint", str(CHART), "--strict"] + [a for s in sets for a in ("--set", s)]
        done = run_helm(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("replicaCount=two", "at '/replicaCount': got string, want integer"),
        ("replica=3", "additional properties 'replica' not allowed"),
        ("lateTolerance=2d", "at '/lateTolerance': '2d' does not match pattern"),
        ("metrics.port=0", "at '/metrics/port': minimum: got 0, want 1"),
        ("metrics.serviceMonitor.interval=often", "at '/metrics/serviceMonitor/interval'"),
        ("store.create=true", "store.url: empty; with store.create=true the chart needs"),
        ("store.secretName=", "at '/store/secretName': minLength"),
    ],
)
def test_a_bad_value_fails_the_render_naming_it_and_renders_nothing(
    value: str, message: str
) -> None:
    done = run_helm("template", "cronsource", str(CHART), "--set", value)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr and "panic" not in done.stderr


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod spec as the comparison sees it: the chart spells out imagePullPolicy
    IfNotPresent, which is what the API server defaults to for the kustomization's tagged
    image."""
    spec = copy.deepcopy(obj["spec"]["template"]["spec"])
    for container in spec["containers"]:
        if container.get("imagePullPolicy") == "IfNotPresent":
            del container["imagePullPolicy"]
    return spec


def test_the_defaults_render_the_kustomization_s_objects() -> None:
    kustomized = by_key(objects(kustomize.render(REPO / "deploy")))
    del kustomized[("Namespace", "cronsource")]  # helm install --create-namespace
    chart = by_key(objects(template("cronsource", "cronsource")))
    assert set(chart) == set(kustomized)
    for key, obj in chart.items():
        assert obj["metadata"].get("namespace") == kustomized[key]["metadata"].get("namespace")
    pair = {kind: (chart[(kind, n)], kustomized[(kind, n)]) for kind, n in chart}
    got, want = pair["Deployment"]
    assert got["spec"]["replicas"] == want["spec"]["replicas"]
    assert _pod_spec(got) == _pod_spec(want)
    got, want = pair["Job"]
    assert _pod_spec(got) == _pod_spec(want)
    for kind, field in [("ConfigMap", "data"), ("ClusterRole", "rules")]:
        got, want = pair[kind]
        assert got[field] == want[field], kind
    got, want = pair["ClusterRoleBinding"]
    assert (got["roleRef"], got["subjects"]) == (want["roleRef"], want["subjects"])
    got, want = pair["Service"]
    assert got["spec"]["ports"] == want["spec"]["ports"]
    # The Service reaches the pods of `run` and not the migrate Job's.
    deployment, job = pair["Deployment"][0], pair["Job"][0]
    selector = got["spec"]["selector"].items()
    assert selector <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert not selector <= job["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )


def test_the_options_reach_the_pods() -> None:
    chart = by_key(objects(template("sched", "team-a", *EVERY_OPTION)))
    deployment = chart[("Deployment", "sched-cronsource")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert deployment["spec"]["replicas"] == 3
    assert container["args"][-3:] == ["--per-cronworkflow-metrics", "--retain", "90d"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}]
    secrets = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in container["env"]
        if "secretKeyRef" in e["valueFrom"]
    }
    assert secrets == {"sched-store"}
    # The replica's identity is its pod's name (downward API): metrics, logs, decidedBy.
    pod_name = [e for e in container["env"] if e["name"] == "POD_NAME"]
    assert pod_name == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    config = chart[("ConfigMap", "sched-cronsource")]["data"]
    assert config["CRONSOURCE_INSTANCE_ID"] == "cronsource"
    assert config["CRONSOURCE_HTTP_PORT"] == "9100"
    assert config["CRONSOURCE_LATE_TOLERANCE"] == "1m"
    secret = chart[("Secret", "sched-store")]
    assert secret["stringData"]["token"] == "metrics-token"
    # The Secret exists before the migrate Job that reads it: both hooks, lower weight first.
    job = chart[("Job", "sched-cronsource-migrate")]
    for hooked in (secret, job):
        assert hooked["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    weight = [int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in (secret, job)]
    assert weight[0] < weight[1]
    # A changed ConfigMap rolls the pods.
    before = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    other = by_key(objects(template("sched", "team-a", *EVERY_OPTION, "lateTolerance=2m")))
    after = other[("Deployment", "sched-cronsource")]["spec"]["template"]["metadata"]
    assert after["annotations"]["checksum/config"] != before


def test_the_monitoring_objects_decode_into_the_prometheus_operator_s_types(
    tmp_path: Path,
) -> None:
    text = template("sched", "team-a", *EVERY_OPTION, *MONITORING)
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(text)
    done = subprocess.run([moncheck(), str(rendered)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "ok PrometheusRule sched-cronsource",
        "ok ServiceMonitor sched-cronsource",
    ]
    # The check means something: a misspelt field of each fails, naming the field.
    for good, bad in [("interval: 30s", "intervall: 30s"), ("- alert: ", "- alret: ")]:
        rendered.write_text(text.replace(good, bad, 1))
        done = subprocess.run([moncheck(), str(rendered)], capture_output=True, text=True)
        field = bad.split(":")[0].lstrip("- ")
        assert done.returncode == 1 and f'unknown field "{field}"' in done.stdout, done.stdout


def test_the_servicemonitor_scrapes_the_metrics_service_with_the_token() -> None:
    chart = by_key(objects(template("sched", "team-a", *EVERY_OPTION, *MONITORING)))
    monitor = chart[("ServiceMonitor", "sched-cronsource")]
    service = chart[("Service", "sched-cronsource-metrics")]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    credentials = endpoint["authorization"]["credentials"]
    assert credentials == {"name": "sched-store", "key": "token"}
    assert "token" in chart[("Secret", "sched-store")]["stringData"]


def test_the_chart_carries_the_rule_file_and_the_dashboard_unchanged() -> None:
    chart = by_key(objects(template("sched", "team-a", *EVERY_OPTION, *MONITORING)))
    rule = chart[("PrometheusRule", "sched-cronsource")]
    assert rule["spec"] == yaml.safe_load(RULE_FILE.read_text())["spec"]
    assert rule["metadata"]["namespace"] == "team-a"
    # Alert templates reach Prometheus as written, not expanded by Helm.
    assert "{{ $labels.projection }}" in json.dumps(rule["spec"])
    dashboard = chart[("ConfigMap", "sched-cronsource-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["cronsource.json"]) == json.loads(DASHBOARD.read_text())
    # Off by default: the chart installs on a cluster without the Prometheus Operator.
    kinds = {kind for kind, _ in by_key(objects(template("cronsource", "cronsource")))}
    assert not kinds & {"ServiceMonitor", "PrometheusRule", "Secret"}


def _go_mod_versions(path: Path) -> dict[str, str]:
    versions = {}
    for line in path.read_text().splitlines():
        found = re.match(r"^\s*(?:require\s+)?([\w./~-]+)\s+(v\S+)(?:\s*//.*)?$", line)
        if found and "=>" not in line and not line.lstrip().startswith(("module", "go ")):
            versions[found[1]] = found[2]
    return versions


def test_the_helm_build_shares_the_apiserver_s_compiled_packages() -> None:
    """scripts/build-helm.sh is cheap in CI because tests/helm pins the modules it shares
    with the test API server to the apiserver's versions, so the build cache serves packages
    the apiserver build compiled (measured in the script's header). A bump of either go.mod
    that breaks this makes cold CI runs longer: re-pin (`go get MODULE@VERSION` in
    tests/helm), or choose the Helm release whose requirements fit."""
    helm = _go_mod_versions(REPO / "tests" / "helm" / "go.mod")
    apiserver = _go_mod_versions(REPO / "tests" / "kube" / "apiserver" / "go.mod")
    differ = {
        m: (helm[m], apiserver[m])
        for m in helm.keys() & apiserver.keys()
        if helm[m] != apiserver[m] and apiserver[m] != "v0.0.0"
    }
    # Helm v4.3.0 needs these three newer than the apiserver has (and the packages above them
    # are compiled again); pinning the rest is what keeps the cost down.
    assert set(differ) <= {"go.yaml.in/yaml/v3", "golang.org/x/crypto", "golang.org/x/text"}, differ
    assert helm["k8s.io/api"] == helm["k8s.io/client-go"] == apiserver["k8s.io/client-go"]


@pytest.fixture(scope="module")
def chart_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube.ApiServer]:
    """As tests/e2e/test_kube_deploy.py runs it: every default admission plugin (NamespaceLifecycle
    too), and OwnerReferencesPermissionEnforcement."""
    server = kube.start(
        tmp_path_factory.mktemp("kube-helm"),
        extra_args=[
            "--disable-admission-plugins=",
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
        ],
    )
    try:
        yield server
    finally:
        server.stop(remove_data=True)


@pytest.mark.k8s
@pytest.mark.parametrize(("release", "namespace", "sets"), RELEASES)
def test_the_rendered_chart_applies_and_its_account_may_do_exactly_what_the_adapter_needs(
    chart_apiserver: kube.ApiServer, release: str, namespace: str, sets: list[str]
) -> None:
    admin = Admin(chart_apiserver)
    chart_apiserver.create_namespace(namespace)  # helm install --create-namespace
    applied = []
    for obj, text in split(template(release, namespace, *sets)):
        code, got = admin.apply(obj, text)
        assert code in (200, 201), f"{obj['kind']} {obj['metadata']['name']}: {got}"
        applied.append((obj, got))
    kinds = {o["kind"] for o, _ in applied}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Secret"} <= kinds
    assert {"Job", "Deployment", "Service"} <= kinds
    for obj, _ in applied:  # applying again changes nothing
        _, second = admin.apply(obj)
        code, third = admin.apply(obj)
        assert (
            code == 200
            and third["metadata"]["resourceVersion"] == (second["metadata"]["resourceVersion"])
        ), f"{obj['kind']} {obj['metadata']['name']} changes on every apply"
    (account,) = [o for o, _ in applied if o["kind"] == "ServiceAccount"]
    user = f"system:serviceaccount:{namespace}:{account['metadata']['name']}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    deployment = next(s for o, s in applied if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    for where in ("", namespace, "some-team"):
        allowed = {
            (group, resource): {
                v for v in VERBS if _can(admin, user, groups, v, group, resource, where)
            }
            for group, resource in list(NEEDED) + OTHERS
        }
        assert {k: v for k, v in allowed.items() if v} == NEEDED, f"namespace {where or '-'}"


def _can(
    admin: Admin,
    user: str,
    groups: list[str],
    verb: str,
    group: str,
    resource: str,
    namespace: str,
) -> bool:
    res, _, sub = resource.partition("/")
    attrs = {"verb": verb, "group": group, "resource": res, "subresource": sub}
    if namespace:
        attrs["namespace"] = namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attrs},
    }
    code, got = admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert code == 201, got
    return bool(got["status"].get("allowed"))
