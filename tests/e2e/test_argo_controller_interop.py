"""Argo v4.0.5's real workflow-controller beside `cronsource run --kube`, on the test
kube-apiserver with Argo's own CRDs (manifests/base/crds/minimal of its module), exactly as
docs/operator-guide.md ("Kubernetes, beside Argo") tells an operator to run them:

* Argo's controller fires the CronWorkflows without the instance-id label and ignores those
  labelled `workflows.argoproj.io/controller-instanceid: cronsource`; cronsource run with
  `--instance-id cronsource` does the reverse;
* moving a CronWorkflow over by the documented step (add the label between two ticks) neither
  loses nor doubles a tick;
* a Workflow cronsource creates is taken by Argo's workflow controller (it sets the phase and
  creates the Pod, which stays Pending: the server has no kubelet);
* what cronsource writes to `.status` decodes with Argo's Go types (strictly) and shows the
  fields `argo cron get` shows;
* twenty CronWorkflows move to cronsource mid-run (`cronsource adopt`) and back (`cronsource
  release`), with a `stopStrategy` on failures and `Forbid` with a run active across each
  move: no tick is lost or doubled, the counts carry over both ways (issue 21 items 7
  and 8), and cronsource writes no status after the release. Argo's controller can lose a
  count by itself under load (tests/argo/history.py): the end lets Argo's status miss only
  the runs the record of every version of the objects proves it dropped, and reports them.

Who created each Workflow is read from the API server itself: the field manager that set its
owner reference (`metadata.managedFields`), cronsource's or Argo's workflow-controller.

Argo's cron controller fires standard schedules on whole minutes with the real clock (no fake
is possible in another process), so the first test lasts about two minutes; the second uses
`@every 10s` and lasts about three.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cronsource.adapters.infrastructure.kube import CWF, GROUP, VERSION, WF
from cronsource.adapters.infrastructure.kube.port import FIELD_MANAGER
from tests.argo import peer
from tests.argo.history import StatusHistory
from tests.kube import apiserver

pytestmark = pytest.mark.k8s

LABEL_INSTANCE = "workflows.argoproj.io/controller-instanceid"
LABEL_CRON = "workflows.argoproj.io/cron-workflow"
LABEL_WORKFLOW = "workflows.argoproj.io/workflow"


@pytest.fixture(scope="module")
def argo_apiserver(tmp_path_factory: Any) -> Iterator[apiserver.ApiServer]:
    """A server of our own with Argo's CRDs (not cronsource's deploy/crds)."""
    server = apiserver.start(tmp_path_factory.mktemp("argo-apiserver"), crds=peer.argo_crds())
    try:
        yield server
    finally:
        server.stop(remove_data=True)


def _tail(path: Path) -> str:
    return _text(path)[-3000:]


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _start_cronsource(server: apiserver.ApiServer, store: str, log: Path) -> subprocess.Popen[str]:
    out = log.open("w")
    proc = subprocess.Popen(
        [
            _cronsource_exe(),
            "--store",
            store,
            "run",
            "--kube",
            "--kubeconfig",
            str(server.kubeconfig),
            "--instance-id",
            "cronsource",
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out.close()
    return proc


def _cron(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedules": ["* * * * *"],
            "concurrencyPolicy": "Allow",
            "workflowSpec": {
                "entrypoint": "main",
                # a command, so that Argo's emissary executor need not ask a registry
                "templates": [
                    {"name": "main", "container": {"image": "busybox", "command": ["true"]}}
                ],
            },
        },
    }


#: The field managers of the two writers, as the API server records them in
#: `metadata.managedFields`: cronsource's (adapters/kube/port.py) and Argo's workflow-controller
#: binary (client-go names the manager after the binary).
CRONSOURCE, ARGO = FIELD_MANAGER, "workflow-controller"


def creator(wf: dict[str, Any]) -> str:
    """Who created a Workflow, as the API server recorded it: the field manager that set its
    `ownerReferences`. Only the creator sets them (neither controller changes them later;
    Argo's workflow-controller updates the status and labels of every Workflow it runs,
    whoever created it), so this names the creator directly, not by elimination."""
    managers = [
        m["manager"]
        for m in wf["metadata"].get("managedFields") or []
        if "f:ownerReferences" in ((m.get("fieldsV1") or {}).get("f:metadata") or {})
    ]
    assert len(managers) == 1, f"{wf['metadata']['name']}: owner references set by {managers}"
    return str(managers[0])


def _history(store: str, ns: str) -> list[dict[str, Any]]:
    """cronsource's audit log of the namespace (every event of every CronWorkflow)."""
    proc = subprocess.run(
        [_cronsource_exe(), "--store", store, "-n", ns, "history", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    events: list[dict[str, Any]] = json.loads(proc.stdout)
    return events


def _cronsource_exe() -> str:
    return str(Path(sys.executable).parent / "cronsource")


def _until(
    check: Callable[[], bool], what: object, deadline: float, alive: Callable[[], None]
) -> None:
    """Wait for `check`; `what` (or what it returns, if callable) names it on a timeout."""
    while not check():
        alive()
        assert time.time() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        time.sleep(0.5)


def _minute_after(t: float) -> float:
    return (int(t) // 60 + 1) * 60.0


def test_argo_and_cronsource_share_a_cluster_as_the_operator_guide_says(
    argo_apiserver: apiserver.ApiServer, tmp_path: Path
) -> None:
    server = argo_apiserver
    ns = f"t-{os.urandom(5).hex()}"
    server.create_namespace(ns)
    kube = server.api_client()
    api = client.CustomObjectsApi(kube)
    core = client.CoreV1Api(kube)
    argo_log, cs_log = tmp_path / "argo.log", tmp_path / "cronsource.log"
    argo = peer.start_argo(server, ns, argo_log)
    store = f"sqlite:///{tmp_path / 'cronsource.db'}"
    cronsource = _start_cronsource(server, store, cs_log)

    def alive() -> None:
        assert argo.poll() is None, f"Argo's controller exited:\n{_tail(argo_log)}"
        assert cronsource.poll() is None, f"cronsource exited:\n{_tail(cs_log)}"

    def workflows() -> dict[str, dict[str, Any]]:
        items = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)["items"]
        return {w["metadata"]["name"]: w for w in items}

    def names(cron: str, minute: float) -> str:
        return f"{cron}-{int(minute)}"

    try:
        # Create the objects at least 20 s before a minute, so that both controllers see them
        # in time and that minute is the first tick of each.
        if _minute_after(time.time()) - time.time() < 20:
            time.sleep(_minute_after(time.time()) - time.time() + 0.5)
        m1 = _minute_after(time.time())
        m2 = m1 + 60
        for name, labels in (
            ("argo-own", {}),
            ("cs-own", {LABEL_INSTANCE: "cronsource"}),
            ("moved", {}),
        ):
            api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, _cron(name, labels))

        first = [names(c, m1) for c in ("argo-own", "cs-own", "moved")]
        _until(lambda: set(first) <= set(workflows()), f"{first}", m1 + 40, alive)
        # Between two ticks, the documented step: label it for cronsource.
        assert time.time() < m2 - 10, "the first tick came too late to move between ticks"
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            CWF,
            "moved",
            {"metadata": {"labels": {LABEL_INSTANCE: "cronsource"}}},
        )
        second = [names(c, m2) for c in ("argo-own", "cs-own", "moved")]
        _until(lambda: set(second) <= set(workflows()), f"{second}", m2 + 40, alive)
        time.sleep(3)  # anything doubled or late would show now
        wfs = workflows()

        made = {n: creator(w) for n, w in wfs.items()}
        assert made == {
            names("argo-own", m1): ARGO,
            names("argo-own", m2): ARGO,
            names("cs-own", m1): CRONSOURCE,
            names("cs-own", m2): CRONSOURCE,
            names("moved", m1): ARGO,
            names("moved", m2): CRONSOURCE,
        }, f"who created which Workflow:\n{made}\nArgo's log:\n{_tail(argo_log)}"
        # cronsource decided exactly the ticks of the Workflows it created: none of Argo's
        # ticks was also decided by cronsource (and taken as done on AlreadyExists).
        fired = {e["workflow"] for e in _history(store, ns) if e["type"] == "ScheduleFired"}
        assert fired == {n for n, c in made.items() if c == CRONSOURCE}

        for n, w in wfs.items():  # both controllers label a child with its CronWorkflow
            assert w["metadata"]["labels"][LABEL_CRON] == n.rsplit("-", 1)[0], n

        # Argo's workflow controller takes cronsource's Workflow: a phase and a Pod.
        taken = names("cs-own", m1)

        seen: dict[str, Any] = {}

        def running() -> bool:
            seen["status"] = workflows()[taken].get("status") or {}
            seen["pods"] = [
                p.metadata.name
                for p in core.list_namespaced_pod(
                    ns, label_selector=f"{LABEL_WORKFLOW}={taken}"
                ).items
            ]
            return seen["status"].get("phase") in ("Pending", "Running") and len(seen["pods"]) == 1

        _until(running, lambda: f"Argo running {taken} (seen {seen})", time.time() + 30, alive)
        pod = core.list_namespaced_pod(ns, label_selector=f"{LABEL_WORKFLOW}={taken}").items[0]
        assert pod.status.phase == "Pending"  # no kubelet

        # What cronsource wrote to .status reads in Argo's types and in `argo cron get`.
        cron = api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "cs-own")
        decoded = peer.cron_get(cron)
        last = datetime.fromtimestamp(m2, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert decoded["status"]["lastScheduledTime"] == last
        active = {ref["name"] for ref in decoded["status"].get("active") or []}
        assert taken in active or names("cs-own", m2) in active
        shown = dict(
            (line.split(":", 1)[0].strip(), line.split(":", 1)[1].strip())
            for line in decoded["get"].splitlines()
            if ":" in line
        )
        assert shown["Name"] == "cs-own" and shown["Namespace"] == ns
        assert shown["Schedules"] == "* * * * *"
        assert "LastScheduledTime" in shown
        assert names("cs-own", m2) in shown["Active Workflows"]
        # The status Argo itself wrote decodes too (the oracle is not lenient with ours only).
        peer.cron_get(api.get_namespaced_custom_object(GROUP, VERSION, ns, CWF, "argo-own"))
    finally:
        peer.stop(argo)
        peer.stop(cronsource, grace=20)
        kube.close()


# ---------------------------------------------------------------------- twenty, there and back

PERIOD = 10  # seconds: `@every 10s`
#: The kinds of the twenty, by name prefix: 14 that succeed, 3 whose stop strategy is met
#: while cronsource runs them, one whose stop strategy is met after the move back, and 2 with
#: Forbid whose runs outlast two periods, so that one is active across each move.
KINDS = {"ok": 14, "stop": 3, "stopback": 1, "forbid": 2}
#: `cronworkflow.failed >= N`. cronsource takes them over once Argo's status counts a failure
#: (Argo's controller counts a run up to 10 s after it ends: two have failed by then, a third
#: is running) and hands them back four periods or so later: N = 5 is met while cronsource
#: runs them, 10 only after the move back (where Argo's lag may run one more).
STOP_AT, STOPBACK_AT = 5, 10
#: Seconds a Forbid run lasts (it fails on its activeDeadlineSeconds): long enough to be
#: active across the move, which waits until Argo's status counts a run of each of the others.
FORBID_RUN = 40
#: Seconds the other runs last. Longer than the 10 s between two reconciliations of Argo's
#: controller (syncAll): a run that ends sooner is sometimes never counted by Argo itself.
#: syncAll works from lists its informers gave at its start, which may not have a fire made a
#: moment after; it then writes `active` without the new run, and a run that has ended by
#: the next syncAll is never added back, so never counted (seen with 2 s runs, with Argo
#: alone after the move back). A run still going at the next syncAll is added back; on a
#: loaded machine the next syncAll can come too late even for these (it starts 10 s after
#: the previous one ended), so the end of the test lets Argo's status miss exactly the runs
#: the record of the objects proves Argo's own controller dropped (tests/argo/history.py).
RUN = 12


def _every(name: str, group: str) -> dict[str, Any]:
    """A CronWorkflow of one of the kinds above. Argo's workflow controller runs the children
    without a Pod (a suspend template): one that succeeds after RUN seconds, one that fails on
    its deadline after RUN seconds, and the long Forbid run."""
    kind = name.rsplit("-", 1)[0]
    spec: dict[str, Any] = {
        "schedules": [f"@every {PERIOD}s"],
        "concurrencyPolicy": "Forbid" if kind == "forbid" else "Allow",
        "successfulJobsHistoryLimit": 100,
        "failedJobsHistoryLimit": 100,
    }
    if kind == "ok":
        template: dict[str, Any] = {"name": "main", "suspend": {"duration": str(RUN)}}
        workflow: dict[str, Any] = {}
    else:
        template = {"name": "main", "suspend": {}}
        workflow = {"activeDeadlineSeconds": FORBID_RUN if kind == "forbid" else RUN}
    if kind in ("stop", "stopback"):
        threshold = STOP_AT if kind == "stop" else STOPBACK_AT
        spec["stopStrategy"] = {"expression": f"cronworkflow.failed >= {threshold}"}
    spec["workflowSpec"] = {"entrypoint": "main", "templates": [template], **workflow}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "CronWorkflow",
        "metadata": {"name": name, "labels": {"test-group": group}},
        "spec": spec,
    }


def _tick(wf: dict[str, Any]) -> int:
    """A child's scheduled time, in unix seconds (its name's suffix)."""
    return int(wf["metadata"]["name"].rsplit("-", 1)[1])


def _finished(wf: dict[str, Any]) -> str | None:
    phase = (wf.get("status") or {}).get("phase")
    return phase if phase in ("Succeeded", "Failed", "Error") else None


def _seconds(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())


def _move(verb: str, server: apiserver.ApiServer, ns: str, group: str, *extra: str) -> Any:
    """`cronsource adopt|release -l test-group=GROUP`: {name: unix seconds of its move}."""
    proc = subprocess.run(
        [
            _cronsource_exe(),
            *extra,
            verb,
            "-l",
            f"test-group={group}",
            "-n",
            ns,
            "--kubeconfig",
            str(server.kubeconfig),
            "--timeout",
            "60s",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{verb}: {proc.stdout}{proc.stderr}"
    moves = json.loads(proc.stdout)
    assert all(m["moved"] for m in moves), moves
    return {m["name"]: _seconds(m["at"]) for m in moves}


@pytest.mark.timeout(900)
def test_twenty_move_to_cronsource_mid_run_and_back_without_losing_a_tick_or_a_count(
    argo_apiserver: apiserver.ApiServer, tmp_path: Path
) -> None:
    server = argo_apiserver
    ns = f"t-{os.urandom(5).hex()}"
    group = ns
    server.create_namespace(ns)
    kube = server.api_client()
    api = client.CustomObjectsApi(kube)
    argo_log, cs_log = tmp_path / "argo.log", tmp_path / "cronsource.log"
    # Every version of every object, from before the first: which counts Argo's own controller
    # lost (tests/argo/history.py), and that cronsource wrote nothing after the release.
    record = StatusHistory(server.api_client(), ns)  # its own client, closed by stop()
    record.start()
    argo = peer.start_argo(server, ns, argo_log)
    store = f"sqlite:///{tmp_path / 'cronsource.db'}"
    cronsource = _start_cronsource(server, store, cs_log)
    names = [f"{kind}-{i}" for kind, n in KINDS.items() for i in range(n)]

    def alive() -> None:
        assert argo.poll() is None, f"Argo's controller exited:\n{_tail(argo_log)}"
        assert cronsource.poll() is None, f"cronsource exited:\n{_tail(cs_log)}"

    def workflows() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = api.list_namespaced_custom_object(GROUP, VERSION, ns, WF)[
            "items"
        ]
        return items

    def of(name: str, wfs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            (w for w in wfs if w["metadata"]["labels"].get(LABEL_CRON) == name), key=_tick
        )

    def crons() -> dict[str, dict[str, Any]]:
        items = api.list_namespaced_custom_object(GROUP, VERSION, ns, CWF)["items"]
        return {c["metadata"]["name"]: c for c in items}

    def timeline() -> str:
        """Every Workflow with its creator, for a failure's message."""
        return "\n".join(
            f"{w['metadata']['name']:24} {creator(w):20} {w['metadata']['creationTimestamp']}"
            f" {(w.get('status') or {}).get('phase')} {(w.get('status') or {}).get('finishedAt')}"
            for w in sorted(workflows(), key=lambda w: w["metadata"]["name"])
        )

    def wait(check: Callable[[], bool], what: str, seconds: float) -> None:
        _until(check, lambda: f"{what}\n{timeline()}", time.time() + seconds, alive)

    def counts(wfs: list[dict[str, Any]]) -> tuple[int, int]:
        phases = [_finished(w) for w in wfs]
        return phases.count("Succeeded"), sum(p in ("Failed", "Error") for p in phases)

    def counted(cron: dict[str, Any]) -> tuple[int, int]:
        status = cron.get("status") or {}
        return int(status.get("succeeded") or 0), int(status.get("failed") or 0)

    def shown(cron: dict[str, Any]) -> tuple[int, int]:
        status = peer.cron_get(cron)["status"]  # as Argo's own types read it
        return int(status.get("succeeded") or 0), int(status.get("failed") or 0)

    def argo_lost(
        name: str, wfs: list[dict[str, Any]], before_adoption: bool = False
    ) -> list[dict[str, Any]]:
        """The runs of `name` whose count Argo's own controller lost while it had the object,
        as the record proves it: a write of Argo's took each off `active` while it still ran,
        and nothing listed it again (tests/argo/history.py), so Argo never counted it.
        `before_adoption`: only those that had ended before cronsource took the object (one
        still going then is cronsource's to count)."""
        if before_adoption:
            dropped = record.lost_before_adoption(name)
        else:
            dropped = record.dropped_by_argo(name)
        return [w for w in of(name, wfs) if w["metadata"]["name"] in dropped]

    def uncounted(
        idle: bool = True, seen: dict[str, dict[str, Any]] | None = None, ours: bool = False
    ) -> dict[str, str]:
        """The CronWorkflows whose status does not count every run that ended (or, `idle`,
        names a run as active): what it shows against what ran. A run Argo's controller lost
        by itself (`argo_lost`) may be missing from the count, no other; `ours` (cronsource's
        status) only one Argo lost before cronsource took the object. `seen`, when given, gets
        the objects the answer was made from."""
        wfs, objs = workflows(), crons()
        if seen is not None:
            seen.clear()
            seen.update(objs)
        out = {}
        for n, c in objs.items():
            active = [a.get("name") for a in (c.get("status") or {}).get("active") or []]
            ran = counts(of(n, wfs))
            lost = counts(argo_lost(n, wfs, before_adoption=ours))
            shows = counted(c)
            fits = all(r - x <= s <= r for r, x, s in zip(ran, lost, shows, strict=True))
            if not fits or (idle and active):
                out[n] = f"shows {shows} active {active}, ran {ran}, Argo lost {lost}"
        return out

    try:
        for name in names:
            api.create_namespaced_custom_object(GROUP, VERSION, ns, CWF, _every(name, group))

        # 1. Argo runs all twenty until its status counts a run of each, and each Forbid run
        #    is active: then everything moves to cronsource.
        def argo_counted() -> bool:
            wfs, objs = workflows(), crons()
            forbid = [of(n, wfs) for n in names if n.startswith("forbid-")]
            return all(
                sum(counted(objs[n])) >= 1 for n in names if not n.startswith("forbid-")
            ) and all(f and not _finished(f[-1]) for f in forbid)

        wait(argo_counted, "Argo's first runs, counted", 90)
        adopted = _move("adopt", server, ns, group)

        # 2. cronsource runs them: the stop strategies are met on the counts Argo began, the
        #    Forbid runs Argo started hold cronsource's ticks, and cronsource starts the next.
        def cronsource_done() -> bool:
            wfs, now, objs = workflows(), time.time(), crons()
            stopped = all(
                (objs[n].get("status") or {}).get("phase") == "Stopped"
                for n in names
                if n.startswith("stop-")
            )
            forbid = all(
                any(_tick(w) > adopted[n] and not _finished(w) for w in of(n, wfs))
                for n in names
                if n.startswith("forbid-")
            )
            return stopped and forbid and now > max(adopted.values()) + 3 * PERIOD

        wait(cronsource_done, "cronsource's stops and Forbid runs", 120)

        # Every count cronsource shows is every run's, Argo's before the move included (and
        # a run Argo had written out of its status while it still ran).
        _until(
            lambda: not uncounted(idle=False, ours=True),
            lambda: f"cronsource's counts to include Argo's: {uncounted(idle=False, ours=True)}",
            time.time() + 3 * PERIOD,
            alive,
        )
        before_release = {n: counted(c) for n, c in crons().items()}
        released = _move("release", server, ns, group, "--store", store)
        handed = crons()

        # 3. Argo runs them again, from the status cronsource left: the stop strategy met
        #    after the move back counts cronsource's failures, Forbid waits for cronsource's run.
        def argo_done() -> bool:
            wfs, now, objs = workflows(), time.time(), crons()
            stopback = all(
                (objs[n].get("status") or {}).get("phase") == "Stopped"
                for n in names
                if n.startswith("stopback-")
            )
            forbid = all(
                any(_tick(w) > released[n] and creator(w) == ARGO for w in of(n, wfs))
                for n in names
                if n.startswith("forbid-")
            )
            return stopback and forbid and now > max(released.values()) + 3 * PERIOD

        wait(argo_done, "Argo's stop and Forbid run after the move back", 120)
        # The end: suspend all, let every run end and Argo count it.
        for name in names:
            api.patch_namespaced_custom_object(
                GROUP, VERSION, ns, CWF, name, {"spec": {"suspend": True}}
            )
        wait(
            lambda: all(_finished(w) for w in workflows()),
            "every run to end",
            FORBID_RUN + 3 * PERIOD,
        )
        # The objects are taken as they were when they settled: a CronWorkflow Argo stopped
        # goes on flipping between two statuses (tests/argo/history.py, Argo's job of a
        # completed object), so a later read may catch the stale one.
        final: dict[str, dict[str, Any]] = {}
        _until(
            lambda: not uncounted(seen=final),
            lambda: f"Argo's counts to settle: {uncounted()}\n{_tail(argo_log)}",
            time.time() + 4 * PERIOD,
            alive,
        )
        wfs = workflows()
        history = _history(store, ns)
    finally:
        peer.stop(argo)
        peer.stop(cronsource, grace=20)
        record.stop()
        kube.close()

    # Who created each Workflow, by the API server's record: Argo before the move and after
    # the move back, cronsource in between. No tick lies within a second of a move.
    report: dict[str, Any] = {
        "workflows": len(wfs),
        "creators": {},
        "carried": {},
        "handover_gaps": [],
        "argo_lost": {},
        # Runs Argo's status had written out while they ran, adopted as active all the same
        # (adapters/runtime/kube/watch.py), as cronsource's log names them.
        "adopted_unlisted": [
            line.split("adopted run ")[1].split()[0]
            for line in _text(cs_log).splitlines()
            if "does not list it" in line
        ],
    }
    assert not record.gaps, record.gaps
    # cronsource let go at the release: no status written after it (one would overwrite what
    # Argo's controller counted since).
    for name in names:
        assert not record.cronsource_writes_after_release(name), (name, timeline())
    for name in names:
        for w in of(name, wfs):
            t, made = _tick(w), creator(w)
            expected = ARGO if t < adopted[name] or t > released[name] else CRONSOURCE
            assert min(abs(t - adopted[name]), abs(t - released[name])) >= 1, (name, t)
            assert made == expected, (
                f"{w['metadata']['name']} made by {made}, expected {expected}"
                f" (adopted at {adopted[name]}, released at {released[name]})\n{timeline()}"
            )
            report["creators"][made] = report["creators"].get(made, 0) + 1
    # cronsource decided exactly the ticks of the Workflows it created: none twice, none of
    # Argo's (a tick decided by both would be a fire whose Workflow Argo created).
    fired = [e["workflow"] for e in history if e["type"] == "ScheduleFired"]
    assert sorted(fired) == sorted(
        w["metadata"]["name"] for w in wfs if creator(w) == CRONSOURCE
    ), timeline()

    for name in names:
        runs = of(name, wfs)
        ticks = [_tick(w) for w in runs]
        if name.startswith("forbid-"):
            # Forbid across both moves: no run started before the one before it ended.
            for prev, nxt in zip(runs, runs[1:], strict=False):
                started = _seconds(nxt["metadata"]["creationTimestamp"])
                assert started >= _seconds(prev["status"]["finishedAt"]), (name, timeline())
            held = [
                e
                for e in history
                if e["cronWorkflow"] == f"{ns}/{name}" and e.get("reason") == "ConcurrencyForbid"
            ]
            assert held, f"{name}: cronsource never held a tick for Argo's run"
            assert any(
                _tick(w) < adopted[name] < _seconds(w["status"]["finishedAt"]) for w in runs
            ), f"{name}: no Argo run active across the adoption"
            assert any(
                _tick(w) < released[name] < _seconds(w["status"]["finishedAt"])
                and creator(w) == CRONSOURCE
                for w in runs
            ), f"{name}: none across the release"
            continue
        # Neither lost nor doubled. Never two runs in one period. cronsource runs every tick
        # of its period, which goes on from Argo's last run. Argo's controller counts
        # `@every` from whenever it last registered the schedule: at each fire and at each
        # update of the object it sees (its own count of a run that ended, say), so its runs
        # come one to two periods apart, and cronsource's first comes one period after Argo's
        # last (two when Argo had registered the schedule again since, and the move came after
        # the tick that gave up: Argo's own next run would have come between the two). After
        # the move back Argo registers the schedule at the move and again when it counts
        # cronsource's last run, so its first run comes less than three periods after
        # cronsource's last.
        owner = {_tick(w): creator(w) for w in runs}
        steps = list(zip(ticks, ticks[1:], strict=False))
        for a, b in steps:
            gap, step = b - a, (owner[a], owner[b])
            assert gap >= PERIOD, (name, a, b, "two runs in one period", timeline())
            if step == (CRONSOURCE, ARGO):
                assert gap < 3 * PERIOD, (name, a, b, step, timeline())
            elif step in ((ARGO, ARGO), (ARGO, CRONSOURCE)):
                assert gap <= 2 * PERIOD, (name, a, b, step, timeline())
                if step == (ARGO, CRONSOURCE):
                    report["handover_gaps"].append(gap)
            else:  # cronsource's own: every tick
                assert gap == PERIOD, (name, a, b, step, timeline())
        assert (ARGO, CRONSOURCE) in {(owner[a], owner[b]) for a, b in steps}

    for name in names:
        runs = of(name, wfs)
        # Argo ran every one before the move: each took Argo's status over, once.
        (taken,) = [
            e
            for e in history
            if e["cronWorkflow"] == f"{ns}/{name}" and e["type"] == "StatusAdopted"
        ]
        assert not taken.get("unreadable"), taken
        if not name.startswith("forbid-"):  # Argo's counts came through the status
            assert taken.get("succeeded", 0) + taken.get("failed", 0) >= 1, taken
        failed_argo_before = counts([w for w in runs if _tick(w) < adopted[name]])[1]
        failed_ours = counts([w for w in runs if adopted[name] < _tick(w) < released[name]])[1]
        if name.startswith("stop-"):
            # Met on cronsource's watch, on Argo's failures plus its own (its own alone would
            # not have met it), and nothing fired after. A run that started before the stop
            # may end after it (runs outlast a period).
            (stop,) = [
                e for e in history if e["cronWorkflow"] == f"{ns}/{name}" and e["type"] == "Stopped"
            ]
            assert 0 < failed_argo_before and 0 < failed_ours < STOP_AT, (name, timeline())
            assert all(_tick(w) <= _seconds(stop["at"]) for w in runs), (name, timeline())
        if name.startswith("stopback-"):
            # Not met when handed back, nor by Argo's own runs after: met on the failures of
            # the runs started before the release (counted in the status handed back, or
            # active in it and counted by Argo when they ended) and Argo's own.
            at_release = before_release[name][1]
            failed_before = counts([w for w in runs if _tick(w) < released[name]])[1]
            failed_after = counts([w for w in runs if _tick(w) > released[name]])[1]
            assert at_release < STOPBACK_AT and failed_after < STOPBACK_AT, (name, timeline())
            assert at_release <= failed_before, (name, timeline())
            assert failed_before + failed_after >= STOPBACK_AT, (name, timeline())
        # The counts went both ways: what Argo shows at the end is every run's, but for a run
        # Argo's own controller lost (tests/argo/history.py), which is reported.
        lost = argo_lost(name, wfs)
        ran, shows = counts(runs), shown(final[name])
        fits = all(r - x <= s <= r for r, x, s in zip(ran, counts(lost), shows, strict=True))
        assert fits, (name, shows, ran, [w["metadata"]["name"] for w in lost], timeline())
        if shows != ran:
            report["argo_lost"][name] = [w["metadata"]["name"] for w in lost]
        assert final[name]["status"]["phase"] == (
            "Stopped" if name.startswith(("stop-", "stopback-")) else "Active"
        )
        # [succeeded, failed] at each step, for the report.
        report["carried"][name] = {
            "argo_status_taken": [taken.get("succeeded", 0), taken.get("failed", 0)],
            "argo_active_taken": len(taken.get("active") or []),
            "argo_runs_ended": list(counts([w for w in runs if _tick(w) < adopted[name]])),
            "status_handed_back": list(before_release[name]),
            "argo_status_at_end": list(shown(final[name])),
            "runs_ended_at_end": list(counts(runs)),
        }
    # The status cronsource left on each object reads in Argo's types, each active run named
    # with its Workflow's uid, as Argo's controller matches them.
    uids = {w["metadata"]["name"]: w["metadata"]["uid"] for w in wfs}
    for name, cron in handed.items():
        status = peer.cron_get(cron)["status"]
        for ref in status.get("active") or []:
            assert ref.get("uid") == uids[ref["name"]], (name, ref)
    print("coexistence:", json.dumps(report, sort_keys=True))
    if report["argo_lost"]:
        # Not silent: the summary of the run names every count Argo's controller lost.
        warnings.warn(f"Argo's own controller lost counts: {report['argo_lost']}", stacklevel=1)
