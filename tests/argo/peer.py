"""Argo Workflows v4.0.5, built from its Go module, as the reference the differential tests
compare cronsource with (see ``oracle/main.go`` and ``scripts/build-argo.sh``).

``CRONSOURCE_ARGO_ORACLE`` and ``CRONSOURCE_ARGO_CONTROLLER`` name the binaries (scripts/test.sh
exports them); without them the build script is run, which builds once per machine and reuses
its cache after. A binary that cannot be built fails the test that needs it, never skips it.
Argo's source tree (examples, e2e tests, docs) is read from the Go module cache, where the
build put it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from tests.kube.apiserver import ApiServer

from tests.buildscript import built_paths

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-argo.sh"
ORACLE_MODULE = Path(__file__).resolve().parent / "oracle"
ARGO_MODULE = "github.com/argoproj/argo-workflows/v4"
ARGO_VERSION = "v4.0.5"
ENV_ORACLE = "CRONSOURCE_ARGO_ORACLE"
ENV_CONTROLLER = "CRONSOURCE_ARGO_CONTROLLER"
ENV_BENCHCLIENT = "CRONSOURCE_ARGO_BENCHCLIENT"
BUILD_TIMEOUT = 3600.0  # cold: module download and two large Go builds on 2 cores
CALL_TIMEOUT = 300.0
GRACE = 5.0  # Argo's controller keeps running after SIGTERM: SIGKILL after this


class ArgoPeerError(RuntimeError):
    """Argo's binaries or source could not be built, found or run."""


@cache
def _built() -> tuple[Path, Path, Path]:
    """(oracle, workflow-controller, benchclient): the script prints the benchclient first, so
    that its last two lines stay the oracle and the controller."""
    client, oracle_path, controller_path = built_paths(
        BUILD_SCRIPT, 3, BUILD_TIMEOUT, ArgoPeerError
    )
    return oracle_path, controller_path, client


def _binary(env: str, index: int) -> Path:
    explicit = os.environ.get(env)
    path = Path(explicit) if explicit else _built()[index]
    if not os.access(path, os.X_OK):
        raise ArgoPeerError(f"{env}={path} is not an executable file")
    return path


def oracle() -> Path:
    """The oracle binary (tests/argo/oracle)."""
    return _binary(ENV_ORACLE, 0)


def controller() -> Path:
    """Argo's workflow-controller binary."""
    return _binary(ENV_CONTROLLER, 1)


def bench_client() -> Path:
    """The plain client-go creator of bench.argo's `limit` side (tests/argo/oracle/benchclient)."""
    return _binary(ENV_BENCHCLIENT, 2)


@cache
def source_tree() -> Path:
    """Argo's module source, as `go mod download` left it (read only)."""
    try:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{ARGO_MODULE}@{ARGO_VERSION}"],
            cwd=ORACLE_MODULE,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
            check=False,
            env={**os.environ, "GOTOOLCHAIN": "local"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ArgoPeerError(f"cannot locate Argo's module source: {exc}") from exc
    if proc.returncode != 0:
        raise ArgoPeerError(f"go mod download {ARGO_MODULE}@{ARGO_VERSION}: {proc.stderr[-1000:]}")
    tree = Path(json.loads(proc.stdout)["Dir"])
    if not (tree / "workflow" / "cron" / "operator.go").is_file():
        raise ArgoPeerError(f"{tree} does not look like Argo's source tree")
    return tree


def _run(args: Sequence[str], stdin: str) -> str:
    try:
        proc = subprocess.run(
            [str(oracle()), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ArgoPeerError(f"oracle {args[0]} gave no answer in {CALL_TIMEOUT:.0f} s") from exc
    if proc.returncode != 0:
        raise ArgoPeerError(f"oracle {args[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def lint(files: Sequence[Path]) -> dict[Path, dict[str, Any]]:
    """Argo's `cron lint --strict` verdict on each file: {"ok", "linted", "errors", "output"}."""
    out = _run(["lint", *map(str, files)], "")
    verdicts = [json.loads(line) for line in out.splitlines() if line]
    if len(verdicts) != len(files):
        raise ArgoPeerError(f"oracle lint answered {len(verdicts)} of {len(files)} files")
    return {Path(v["file"]): v for v in verdicts}


def evaluate(cases: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Argo's answer for each case ({"kind": "when"|"stop", "expression", "cronWorkflow",
    "now"?}): {"result": bool} or {"error": message}, in order, from one oracle process."""
    cases = list(cases)
    lines = "".join(json.dumps({**c, "id": i}) + "\n" for i, c in enumerate(cases))
    answers = [json.loads(line) for line in _run(["expr"], lines).splitlines() if line]
    if [a["id"] for a in answers] != list(range(len(cases))):
        raise ArgoPeerError(f"oracle expr answered {len(answers)} of {len(cases)} cases")
    return answers


def cron_get(cron_workflow: Mapping[str, Any]) -> dict[str, Any]:
    """Decode a CronWorkflow with Argo's Go types (unknown fields are an error) and return
    {"get": what `argo cron get` prints, "status": the status as Argo's types hold it}."""
    answer: dict[str, Any] = json.loads(_run(["status"], json.dumps(cron_workflow)))
    return answer


def argo_crds() -> list[dict[str, Any]]:
    """Argo's own CRDs (manifests/base/crds/minimal of its module), for a server that stands
    in for a cluster running Argo."""
    crd_dir = source_tree() / "manifests" / "base" / "crds" / "minimal"
    crds = []
    for path in sorted(crd_dir.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        crds += [d for d in yaml.safe_load_all(path.read_text()) if d]
    if len(crds) < 8:
        raise ArgoPeerError(f"Argo's CRDs not found in {crd_dir}")
    return crds


def start_argo(
    server: ApiServer, ns: str, log: Path, extra_args: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """Argo's workflow-controller, namespaced to `ns` of `server`, its output in `log`;
    `extra_args` go to the controller (e.g. `--qps 500`)."""
    from kubernetes import client

    api = server.api_client()
    core = client.CoreV1Api(api)
    # Argo reads its configuration here; metrics and telemetry off, so that no port is bound
    # on a shared machine (the healthz port 6060 is fixed in Argo and only logs if taken).
    core.create_namespaced_config_map(
        ns,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="workflow-controller-configmap"),
            data={"metricsConfig": "enabled: false\n", "telemetryConfig": "enabled: false\n"},
        ),
    )
    core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))
    )
    api.close()
    out = log.open("w")
    proc = subprocess.Popen(
        [
            str(controller()),
            "--kubeconfig",
            str(server.kubeconfig),
            "-n",
            ns,
            "--namespaced",
            "--managed-namespace",
            ns,
            *extra_args,
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "LEADER_ELECTION_DISABLE": "true"},
    )
    out.close()
    return proc


def stop(proc: subprocess.Popen[str], grace: float = GRACE) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
