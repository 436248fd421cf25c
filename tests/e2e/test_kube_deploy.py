"""deploy/ against a real kube-apiserver (tests/kube/apiserver.py): every object applies with
strict server-side validation, and the service account's RBAC is exactly what the Kubernetes
adapter (adapters/infrastructure/kube/) calls, no more, checked twice: SubjectAccessReviews over a
matrix of verbs and resources, and the adapter itself run with a token of that service account.

The server here runs with every default admission plugin, NamespaceLifecycle included (a
namespaced object needs its Namespace first), and OwnerReferencesPermissionEnforcement on top
(as OpenShift and other hardened clusters do): it makes creating a Workflow owned by a
CronWorkflow with blockOwnerDeletion need update on cronworkflows/finalizers. Pods never
run (no kubelet, scheduler or controllers): this is about the objects and the permissions.
"""

from __future__ import annotations

import copy
import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cronsource.adapters.bootstrap import bootstrap
from cronsource.adapters.infrastructure.kube import (
    CWF,
    GROUP,
    VERSION,
    WF,
    Backoff,
    KubeTarget,
    connect,
)
from cronsource.adapters.runtime.kube import KubeSync
from cronsource.adapters.runtime.kube.watch import LABEL_INSTANCE
from cronsource.domain.cronworkflow import workflow_name
from cronsource.domain.service import NotFound
from cronsource.projections.dispatch import Creation, PermanentSubmissionError
from tests.image_helpers import PODMAN_RUN, image  # noqa: F401 (the image fixture)
from tests.instants import T0
from tests.kube import apiserver as kube
from tests.kube import kustomize
from tests.probe_helpers import RunProcess, samples, total

pytestmark = pytest.mark.k8s

DEPLOY = kube.REPO / "deploy"
# The order of docs/operator-guide.md: CRDs (a cluster without Argo), the kustomization
# (`kubectl apply -k deploy/`: the Namespace first), and the Secret made from its template.
CRDS = sorted((DEPLOY / "crds").glob("*.yaml"))
SECRET_TEMPLATE = DEPLOY / "secret.template.yaml"
FIELD_MANAGER = "cronsource-deploy-test"
SA_NAMESPACE, SA_NAME = "cronsource", "cronsource"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{SA_NAMESPACE}"]

# What adapters/infrastructure/kube/ calls, as (API group, resource[/subresource]) -> verbs. The
# list and watch are cluster-wide when `run --kube` has no namespace (as in deploy/deployment.yaml).
# cronworkflows/finalizers: the Workflows it creates name their CronWorkflow as owner with
# blockOwnerDeletion (projections/dispatch.py).
NEEDED: dict[tuple[str, str], set[str]] = {
    ("argoproj.io", "cronworkflows"): {"get", "list", "watch", "patch"},
    ("argoproj.io", "cronworkflows/finalizers"): {"update"},
    ("argoproj.io", "workflows"): {"get", "list", "watch", "create", "patch", "delete"},
    # Calendars: ConfigMaps labelled cronsource.io/calendar (adapters/runtime/kube/watch.py).
    ("", "configmaps"): {"list", "watch"},
    # Kubernetes Events on the CronWorkflows (adapters/infrastructure/kube/events.py): a new
    # Event, or the count of one written before.
    ("", "events"): {"create", "patch"},
}
VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
# Resources it must not touch, beside every other verb on the ones above.
OTHERS = [
    ("argoproj.io", "cronworkflows/status"),
    ("argoproj.io", "workflows/finalizers"),
    ("argoproj.io", "workflowtemplates"),
    ("", "secrets"),
    ("", "pods"),
    ("", "pods/exec"),
    ("", "serviceaccounts"),
    ("", "serviceaccounts/token"),
    ("", "namespaces"),
    ("events.k8s.io", "events"),
    ("coordination.k8s.io", "leases"),
    ("apps", "deployments"),
    ("batch", "jobs"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
]

TICK = T0 + timedelta(minutes=1)


def kustomization_resources() -> list[Path]:
    resources = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    return [DEPLOY / r for r in resources]


def split(text: str) -> list[tuple[dict[str, Any], str]]:
    out = []
    for part in re.split(r"^---[ \t]*$", text, flags=re.MULTILINE):
        doc = yaml.safe_load(part)
        if doc:
            out.append((doc, part))
    return out


def documents() -> list[tuple[Path, dict[str, Any], str]]:
    """Every object of deploy/, in apply order: (file, object, its YAML text). The
    kustomization's objects come from kustomize's own rendering (tests/kube/kustomize.py),
    as `kubectl apply -k deploy/` sends them."""
    on_disk = sorted(DEPLOY.glob("*.yaml")) + CRDS
    covered = [*CRDS, DEPLOY / "kustomization.yaml", SECRET_TEMPLATE, *kustomization_resources()]
    assert sorted(covered) == sorted(on_disk), "a file in deploy/ is not applied here"
    docs = [(path, doc, text) for path in CRDS for doc, text in split(path.read_text())]
    rendered = kustomize.render(DEPLOY)
    docs += [(DEPLOY / "kustomization.yaml", doc, text) for doc, text in split(rendered)]
    docs += [(SECRET_TEMPLATE, doc, text) for doc, text in split(SECRET_TEMPLATE.read_text())]
    return docs


class Admin:
    """Plain HTTPS as the admin of the kubeconfig (system:masters)."""

    def __init__(self, server: kube.ApiServer) -> None:
        self.server = server
        self.ssl = server._ssl()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        token: str | None = None,
    ) -> tuple[int, Any]:
        data = None
        if body is not None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
        req = urllib.request.Request(self.server.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.server.token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ssl) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def resource_path(self, obj: dict[str, Any]) -> str:
        """The object's URL path, the resource name and scope found through discovery."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        _, found = self.call("GET", base)
        served = [r for r in found["resources"] if r["kind"] == kind and "/" not in r["name"]]
        assert len(served) == 1, f"{api_version} {kind} is not served: {found}"
        res = served[0]
        meta = obj["metadata"]
        if res["namespaced"]:
            assert meta.get("namespace"), f"{kind} {meta['name']} has no namespace"
            return f"{base}/namespaces/{meta['namespace']}/{res['name']}/{meta['name']}"
        assert not meta.get("namespace"), f"cluster-scoped {kind} {meta['name']} has a namespace"
        return f"{base}/{res['name']}/{meta['name']}"

    def apply(self, obj: dict[str, Any], text: str | None = None) -> tuple[int, Any]:
        """Server-side apply with strict field validation (unknown or duplicate fields fail),
        of ``text`` (the YAML as written: the server sees duplicate keys) or else ``obj``."""
        query = urllib.parse.urlencode(
            {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict", "force": "true"}
        )
        return self.call(
            "PATCH",
            f"{self.resource_path(obj)}?{query}",
            obj if text is None else text,
            "application/apply-patch+yaml",
        )

    def can(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        res, _, sub = resource.partition("/")
        attrs = {"verb": verb, "group": group, "resource": res, "subresource": sub}
        if namespace:
            attrs["namespace"] = namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": SA_USER, "groups": SA_GROUPS, "resourceAttributes": attrs},
        }
        code, got = self.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        assert code == 201, got
        return bool(got["status"].get("allowed"))


@pytest.fixture(scope="module")
def deploy_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube.ApiServer]:
    server = kube.start(
        tmp_path_factory.mktemp("kube-deploy"),
        extra_args=[
            "--disable-admission-plugins=",  # NamespaceLifecycle on, as in a cluster
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
        ],
    )
    try:
        yield server
    finally:
        server.stop(remove_data=True)


@pytest.fixture(scope="module")
def applied(deploy_apiserver: kube.ApiServer) -> list[tuple[Path, dict[str, Any], Any]]:
    """deploy/ applied once for the module: (file, object sent, object stored)."""
    admin = Admin(deploy_apiserver)
    out = []
    for path, obj, text in documents():
        code, got = admin.apply(obj, text)
        assert code in (200, 201), f"{path.name}: {obj['kind']} {obj['metadata']['name']}: {got}"
        out.append((path, obj, got))
    return out


def test_every_object_in_deploy_applies_with_strict_validation(
    deploy_apiserver: kube.ApiServer, applied: list[tuple[Path, dict[str, Any], Any]]
) -> None:
    kinds = {(obj["kind"], obj["metadata"]["name"]) for _, obj, _ in applied}
    assert {
        ("CustomResourceDefinition", "cronworkflows.argoproj.io"),
        ("CustomResourceDefinition", "workflows.argoproj.io"),
        ("Namespace", "cronsource"),
        ("ServiceAccount", "cronsource"),
        ("ClusterRole", "cronsource"),
        ("ClusterRoleBinding", "cronsource"),
        ("ConfigMap", "cronsource"),
        ("Job", "cronsource-migrate"),
        ("Deployment", "cronsource"),
        ("Service", "cronsource-metrics"),
        ("Secret", "cronsource-store"),
    } <= kinds
    admin = Admin(deploy_apiserver)
    for path, obj, stored in applied:
        assert stored["kind"] == obj["kind"]
        assert stored["metadata"]["name"] == obj["metadata"]["name"]
        # Applying again changes nothing. (Not always the second apply: for an object that
        # sets no field but its name, as the Namespace, the first one records no managed
        # fields and the second one writes the "before-first-apply" entry.)
        _, second = admin.apply(obj)
        code, third = admin.apply(obj)
        assert code == 200, f"{path.name}: {third}"
        assert third["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"], (
            f"{path.name}: {obj['kind']} {obj['metadata']['name']} changes on every apply"
        )
    deployment = next(s for _, o, s in applied if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == SA_NAME


def test_the_checks_mean_something_a_misspelt_field_a_duplicate_or_no_namespace_fails(
    deploy_apiserver: kube.ApiServer, applied: list[tuple[Path, dict[str, Any], Any]]
) -> None:
    admin = Admin(deploy_apiserver)
    deployment = next(o for _, o, _ in applied if o["kind"] == "Deployment")
    obj = copy.deepcopy(deployment)
    obj["spec"]["replica"] = 3
    code, got = admin.apply(obj)  # (the server answers 500 "field not declared in schema")
    assert code >= 400 and ".spec.replica: field not declared" in got["message"], got
    text = yaml.safe_dump(deployment).replace("replicas: 2\n", "replicas: 2\n  replicas: 3\n")
    code, got = admin.apply(deployment, text)
    assert code == 400 and 'key "replicas" already set' in got["message"], got
    obj = copy.deepcopy(deployment)
    obj["metadata"]["namespace"] = "no-such-namespace"
    code, got = admin.apply(obj)
    assert code == 404 and 'namespaces "no-such-namespace" not found' in got["message"], got


def test_service_account_may_do_exactly_what_the_adapter_needs(
    deploy_apiserver: kube.ApiServer, applied: list[tuple[Path, dict[str, Any], Any]]
) -> None:
    admin = Admin(deploy_apiserver)
    resources = list(NEEDED) + OTHERS
    for namespace in ("", SA_NAMESPACE, "some-team"):
        allowed = {
            (group, resource): {v for v in VERBS if admin.can(v, group, resource, namespace)}
            for group, resource in resources
        }
        allowed = {k: v for k, v in allowed.items() if v}
        assert allowed == NEEDED, f"namespace {namespace or '(cluster)'}"


def test_service_account_may_not_impersonate_escalate_or_bind(
    deploy_apiserver: kube.ApiServer, applied: list[tuple[Path, dict[str, Any], Any]]
) -> None:
    admin = Admin(deploy_apiserver)
    for verb, group, resource in [
        ("impersonate", "", "users"),
        ("impersonate", "", "serviceaccounts"),
        ("escalate", "rbac.authorization.k8s.io", "clusterroles"),
        ("bind", "rbac.authorization.k8s.io", "clusterroles"),
        ("*", "*", "*"),
    ]:
        assert not admin.can(verb, group, resource, ""), (verb, group, resource)


def service_account_client(server: kube.ApiServer) -> client.ApiClient:
    """A client authenticated as the pod of deploy/deployment.yaml would be: a token of the
    service account from the TokenRequest API (the admin asks for it)."""
    code, got = Admin(server).call(
        "POST",
        f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{SA_NAME}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert code == 201, got
    token = got["status"]["token"]
    with server.api_client() as admin_client:
        cfg = copy.copy(admin_client.configuration)
    cfg.api_key = {"authorization": f"Bearer {token}"}
    cfg.api_key_prefix = {}
    cfg.refresh_api_key_hook = None
    cfg.cert_file = cfg.key_file = None
    sa = client.ApiClient(cfg)
    review = client.AuthenticationV1Api(sa).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    assert review.status.user_info.username == SA_USER
    return sa


def service_account_kubeconfig(server: kube.ApiServer, token: str, where: Path) -> Path:
    """The admin kubeconfig with the service account's token as its only user: what the
    adapter loads (adapters.kube.connect), as a pod would mount it."""
    cfg = yaml.safe_load(server.kubeconfig.read_text())
    for user in cfg.get("users") or []:
        user["user"] = {"token": token}
    path = where / "sa-kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_adapter_runs_as_the_service_account(
    deploy_apiserver: kube.ApiServer,
    applied: list[tuple[Path, dict[str, Any], Any]],
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    """`run --kube` as deployed: cluster-wide watches of the objects labelled for the
    deploy's instance id only (an unlabelled one is Argo's and is left alone: deploy/ is safe
    beside Argo's controller), a Workflow created and owned, status written, the Workflow
    terminated and deleted, all with the service account's token."""
    ns = kube_namespace
    stored = {(o["kind"], o["metadata"]["name"]): s for _, o, s in applied}
    instance = stored[("ConfigMap", "cronsource")]["data"]["CRONSOURCE_INSTANCE_ID"]
    assert instance, "deploy/ must not take the objects Argo's controller takes by default"
    sa_client = service_account_client(deploy_apiserver)
    token = sa_client.configuration.api_key["authorization"].removeprefix("Bearer ")
    sa_client.close()
    sa = connect(str(service_account_kubeconfig(deploy_apiserver, token, tmp_path)))
    engine = bootstrap("memory:", target=KubeTarget(sa, Backoff(sleep=lambda s: None)))
    # no namespace: cluster-wide, as deploy/ runs it
    sync = KubeSync(engine, sa, instance_id=instance)
    with deploy_apiserver.api_client() as admin_client:
        admin = client.CustomObjectsApi(admin_client)
        sync.start(watch_seconds=1)
        try:

            def poll_until(check: Any, at: datetime, timeout: float = 20.0) -> None:
                deadline = time.monotonic() + timeout
                while not check():
                    assert time.monotonic() < deadline, "timed out"
                    sync.poll(at)
                    time.sleep(0.05)

            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "CronWorkflow",
                "metadata": {"name": "argos"},
                "spec": {
                    "schedules": ["* * * * *"],
                    "workflowSpec": {
                        "entrypoint": "main",
                        "templates": [{"name": "main", "container": {"image": "busybox"}}],
                    },
                },
            }
            admin.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body)
            body["metadata"] = {"name": "job", "labels": {LABEL_INSTANCE: instance}}
            uid = admin.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, body)["metadata"][
                "uid"
            ]

            def admitted() -> bool:
                try:
                    engine.service.find(ns, "job", uid)
                    return True
                except NotFound:
                    return False

            poll_until(admitted, T0)
            # The unlabelled one is for Argo's controller: the watch never even lists it.
            with pytest.raises(NotFound):
                engine.service.find(ns, "argos")
            cron_id = engine.service.find(ns, "job", uid).id
            engine.service.tick([cron_id], TICK)
            engine.projector.catch_up(TICK)  # KubeTarget.create, as the service account
            sync.poll(TICK)  # the status, patched as the service account
            name = workflow_name("job", TICK)
            wf = admin.get_namespaced_custom_object(GROUP, VERSION, ns, WF, name)
            (owner,) = wf["metadata"]["ownerReferences"]
            assert owner["uid"] == uid and owner["blockOwnerDeletion"] is True
            got = admin.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "job")
            assert [a["name"] for a in got["status"]["active"]] == [name]

            target = KubeTarget(sa)
            target.terminate(ns, name, TICK)
            wf = admin.get_namespaced_custom_object(GROUP, VERSION, ns, WF, name)
            assert wf["spec"]["shutdown"] == "Terminate"
            target.delete(ns, name, TICK)
            left = admin.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
            assert left == []
        finally:
            sync.stop()
            sa.close()
            engine.close()


def test_without_the_finalizers_rule_an_owned_workflow_is_refused(
    deploy_apiserver: kube.ApiServer,
    applied: list[tuple[Path, dict[str, Any], Any]],
    kube_namespace: str,
) -> None:
    """Why the ClusterRole has update on cronworkflows/finalizers: a server enforcing owner
    reference permissions refuses the adapter's Workflows without it."""
    admin = Admin(deploy_apiserver)
    role = next(o for _, o, _ in applied if o["kind"] == "ClusterRole")
    narrow = copy.deepcopy(role)
    narrow["metadata"] = {"name": "cronsource-without-finalizers"}
    narrow["rules"] = [
        r for r in narrow["rules"] if "cronworkflows/finalizers" not in r["resources"]
    ]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "without-finalizers", "namespace": kube_namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cronsource-without-finalizers",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "narrow", "namespace": kube_namespace}],
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount"}
    account["metadata"] = {"name": "narrow", "namespace": kube_namespace}
    for obj in (narrow, binding, account):
        code, got = admin.apply(obj)
        assert code in (200, 201), got
    code, cwf = admin.call(
        "POST",
        f"/apis/{GROUP}/{VERSION}/namespaces/{kube_namespace}/{CWF}",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "CronWorkflow",
            "metadata": {"name": "c"},
            "spec": {"schedules": ["* * * * *"], "workflowSpec": {}},
        },
    )
    assert code == 201, cwf
    code, got = admin.call(
        "POST",
        f"/api/v1/namespaces/{kube_namespace}/serviceaccounts/narrow/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert code == 201, got
    token = got["status"]["token"]
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "name": "c",
        "uid": cwf["metadata"]["uid"],
        "controller": True,
    }
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{kube_namespace}/{WF}"

    def create(name: str, **ref: Any) -> tuple[int, Any]:
        meta = {"name": name, "ownerReferences": [{**owner, **ref}]}
        wf = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow", "metadata": meta, "spec": {}}
        return admin.call("POST", path, wf, token=token)

    code, got = create("plain")
    assert code == 201, got
    code, got = create("blocking", blockOwnerDeletion=True)
    assert code == 403 and "blockOwnerDeletion" in got["message"], got


def test_a_workflow_for_a_namespace_that_does_not_exist_is_refused_for_good(
    deploy_apiserver: kube.ApiServer, applied: list[tuple[Path, dict[str, Any], Any]]
) -> None:
    """With NamespaceLifecycle on (as in a real cluster), creating in a missing namespace is a
    404. It must come back as a permanent refusal (SubmissionFailed), not as a transient error
    that the dispatcher would retry forever, holding up every Workflow after it."""
    k = connect(str(deploy_apiserver.kubeconfig))
    try:
        target = KubeTarget(k, Backoff(sleep=lambda s: None))
        wf = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Workflow",
            "metadata": {"name": "orphan-1", "namespace": "no-such-namespace"},
            "spec": {
                "entrypoint": "main",
                "templates": [{"name": "main", "container": {"image": "busybox"}}],
            },
        }
        (error,) = target.create_many([Creation(wf, "cron-id")], T0)
        assert isinstance(error, PermanentSubmissionError), error
        assert "404" in str(error)
    finally:
        k.close()


def _substitute(arg: str, env: dict[str, str]) -> str:
    """$(VAR) as the kubelet expands it in args (an unknown one stays as written)."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


@pytest.mark.image
@pytest.mark.postgres
@pytest.mark.timeout(1800)
def test_the_deployed_pod_spec_runs_in_the_image_and_answers_its_probes(
    deploy_apiserver: kube.ApiServer,
    applied: list[tuple[Path, dict[str, Any], Any]],
    image: str,  # noqa: F811
    pg_url: str,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    """The Deployment and Job as the API server stored them (the kustomization's image, args,
    env, securityContext, probes), run with podman in the image that build-image.sh made:
    migrate, then `run --kube` as the service account against this API server and the
    throwaway PostgreSQL (host network: 127.0.0.1 reaches both), then each probe of the pod
    spec is asked on its port, and a CronWorkflow gets its Workflow."""
    stored = {(o["kind"], o["metadata"]["name"]): s for _, o, s in applied}
    pod = stored[("Deployment", "cronsource")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (job_container,) = stored[("Job", "cronsource-migrate")]["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["image"] == image and job_container["image"] == image
    config = stored[("ConfigMap", "cronsource")]["data"]
    assert [e["configMapRef"]["name"] for e in container["envFrom"]] == ["cronsource"]
    security = {**pod["securityContext"], **container["securityContext"]}
    assert security["runAsNonRoot"] is True and security["readOnlyRootFilesystem"] is True
    podman = [
        *PODMAN_RUN,
        "--network",
        "host",
        "--user",
        f"{security['runAsUser']}:{security['runAsGroup']}",
        "--cap-drop",
        ",".join(security["capabilities"]["drop"]),
        "--security-opt",
        "no-new-privileges",
        "--read-only",
    ]
    for mount in container["volumeMounts"]:
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert "emptyDir" in volume, volume
        podman += ["--tmpfs", mount["mountPath"]]
    # The Secret's key `url` is this test's database (the template's placeholder is not a store).
    done = subprocess.run(
        [*podman, "-e", f"CRONSOURCE_STORE={pg_url}", image, *job_container["args"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

    sa = service_account_client(deploy_apiserver)
    token = sa.configuration.api_key["authorization"].removeprefix("Bearer ")
    sa.close()
    kubeconfig = service_account_kubeconfig(deploy_apiserver, token, tmp_path)
    kubeconfig.chmod(0o644)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert config["CRONSOURCE_HTTP_PORT"] == str(ports["metrics"])
    # The Service a ServiceMonitor selects: it reaches these pods on that named port.
    service = stored[("Service", "cronsource-metrics")]
    labels = stored[("Deployment", "cronsource")]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert [(p["name"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("metrics", "metrics")
    ]
    assert service["metadata"]["labels"]["app.kubernetes.io/name"] == "cronsource"
    # The same port on the host network could be taken by something else: move it, by the
    # same variable the ConfigMap sets.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**config, "CRONSOURCE_HTTP_PORT": str(port), "CRONSOURCE_STORE": pg_url}
    env["KUBECONFIG"] = "/etc/cronsource/kubeconfig"
    args = [_substitute(a, env) for a in container["args"]]
    flags = [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
    run = RunProcess(
        [*podman, *flags, "-v", f"{kubeconfig}:/etc/cronsource/kubeconfig:ro", image, *args],
        port=port,
    )
    try:
        run.wait_for_probes(timeout=120)
        for kind in ("livenessProbe", "readinessProbe"):
            probe = container[kind]["httpGet"]
            assert probe["port"] == "metrics"
            code, _, body = run.get(probe["path"])
            assert code == 200, (kind, body)
        code, _, text = run.get("/metrics")
        assert code == 200, text
        assert total(samples(text), "cronsource_local_shards_owned") >= 1
        with deploy_apiserver.api_client() as admin_client:
            api = client.CustomObjectsApi(admin_client)
            api.create_namespaced_custom_object(
                GROUP,
                VERSION,
                kube_namespace,
                CWF,
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "CronWorkflow",
                    "metadata": {
                        "name": "every2",
                        "labels": {LABEL_INSTANCE: config["CRONSOURCE_INSTANCE_ID"]},
                    },
                    "spec": {
                        "schedules": ["@every 2s"],
                        "workflowSpec": {
                            "entrypoint": "main",
                            "templates": [{"name": "main", "container": {"image": "busybox"}}],
                        },
                    },
                },
            )
            deadline = time.monotonic() + 60
            while not api.list_namespaced_custom_object(GROUP, VERSION, kube_namespace, WF)[
                "items"
            ]:
                assert time.monotonic() < deadline, run.stderr[-3000:]
                time.sleep(0.5)
    finally:
        code = run.stop(timeout=60)
    assert code == 0, run.stderr[-3000:]
