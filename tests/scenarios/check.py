#!/usr/bin/env python3
"""Run `cronsource simulate` on scenario files and compare the result with their expectations.

Usage: check.py [--cli "cronsource"] [--store URL] SCENARIO.yaml...

Each scenario NAME.yaml has a sibling NAME.expect.yaml. Expectation keys (all optional):
  scheduled:   {cron: [RFC3339, ...]}  scheduledTime of every Workflow created for it (sorted)
  remaining:   {cron: [workflow names]}  exact set of Workflows not deleted at the end
  created_at:  {workflow: RFC3339}       when that Workflow was created
  status:      {cron: {field: value}}    subset of the final status (`activeCount`: len(active))
  events_include: [{field: value}]       each must match some event (subset match)
  kube_events_include: [{field: value}]  each must match some Kubernetes Event (subset match;
                                         runs simulate with --kube-events)
  min_rejected_writes: N
  max_rejected_writes: N                 (a decision on a stale copy costs a rejected write)
  exit_code:   N                         expected exit status (then nothing else is checked)
Always checked: no two Workflows for one (cronWorkflow, scheduledTime); scheduled and catch-up
Workflows are named <cron>-<unix seconds of scheduledTime>; one ScheduleFired event per Workflow,
and one Workflow per ScheduleFired event unless a SubmissionFailed or RunNotStarted says why not.
Prints one line per scenario and a last line 'N passed, M failed'. Exit 0 only if all pass.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from datetime import datetime

import yaml


def ts(s: str) -> int:
    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp())


def short(cron: str) -> str:
    return cron.split("/")[-1]


def check(result: dict, exp: dict) -> list[str]:
    errs: list[str] = []
    wfs = result.get("workflows", [])
    keys = Counter(
        (w["cronWorkflow"], w["scheduledTime"])
        for w in wfs
        if w.get("trigger", "schedule") in ("schedule", "catchup")
    )
    dups = [k for k, n in keys.items() if n > 1]
    if dups:
        errs.append(f"duplicate workflows for ticks: {dups[:5]}")
    for w in wfs:
        if w.get("trigger", "schedule") in ("schedule", "catchup"):
            want = f"{short(w['cronWorkflow'])}-{ts(w['scheduledTime'])}"
            if w["name"] != want:
                errs.append(f"workflow {w['name']} should be named {want}")
    events = result.get("events", [])
    fired = Counter(e.get("workflow") for e in events if e.get("type") == "ScheduleFired")
    made = {w["name"] for w in wfs}
    explained = {
        e.get("workflow") for e in events if e.get("type") in ("SubmissionFailed", "RunNotStarted")
    }
    odd = [n for n in made | set(fired) if fired[n] != 1 or (n not in made and n not in explained)]
    if odd:
        errs.append(
            f"{sum(fired.values())} ScheduleFired events but {len(wfs)} workflows: {odd[:5]}"
        )
    for cron, times in (exp.get("scheduled") or {}).items():
        got = sorted((w["scheduledTime"] for w in wfs if short(w["cronWorkflow"]) == cron), key=ts)
        if got != times:
            errs.append(f"{cron}: scheduled {got} != expected {times}")
    for cron, names in (exp.get("remaining") or {}).items():
        got = sorted(
            w["name"] for w in wfs if short(w["cronWorkflow"]) == cron and not w.get("deletedAt")
        )
        if got != sorted(names):
            errs.append(f"{cron}: remaining {got} != expected {sorted(names)}")
    for name, at in (exp.get("created_at") or {}).items():
        got = [w.get("createdAt") for w in wfs if w["name"] == name]
        if got != [at]:
            errs.append(f"{name}: createdAt {got} != {at}")
    statuses = {short(c["name"]): c.get("status", {}) for c in result.get("cronWorkflows", [])}
    for cron, fields in (exp.get("status") or {}).items():
        st = statuses.get(cron)
        if st is None:
            errs.append(f"{cron}: no status in output")
            continue
        for k, v in fields.items():
            got = len(st.get("active") or []) if k == "activeCount" else st.get(k)
            if got != v:
                errs.append(f"{cron}: status.{k} = {got!r}, expected {v!r}")
    for want in exp.get("events_include") or []:
        if not any(all(e.get(k) == v for k, v in want.items()) for e in result.get("events", [])):
            errs.append(f"no event matching {want}")
    for want in exp.get("kube_events_include") or []:
        if not any(
            all(e.get(k) == v for k, v in want.items()) for e in result.get("kubeEvents", [])
        ):
            errs.append(f"no Kubernetes Event matching {want}")
    if (
        "min_rejected_writes" in exp
        and result.get("rejectedWrites", 0) < exp["min_rejected_writes"]
    ):
        errs.append(f"rejectedWrites {result.get('rejectedWrites')} < {exp['min_rejected_writes']}")
    if (
        "max_rejected_writes" in exp
        and result.get("rejectedWrites", 0) > exp["max_rejected_writes"]
    ):
        errs.append(f"rejectedWrites {result.get('rejectedWrites')} > {exp['max_rejected_writes']}")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.environ.get("CRONSOURCE_CLI", "cronsource"))
    ap.add_argument("--store", default=None)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("scenarios", nargs="+")
    a = ap.parse_args()
    passed = failed = 0
    for path in [p for p in a.scenarios if not p.endswith(".expect.yaml")]:
        exp_path = path[: -len(".yaml")] + ".expect.yaml"
        exp = yaml.safe_load(open(exp_path)) if os.path.exists(exp_path) else {}
        cmd = (
            shlex.split(a.cli)
            + (["--store", a.store] if a.store else [])
            + ["simulate", path, "-o", "json"]
            + (["--kube-events"] if "kube_events_include" in exp else [])
        )
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            print(f"FAIL {path}: no answer in {a.timeout} s")
            failed += 1
            continue
        if "exit_code" in exp:
            errs = (
                []
                if p.returncode == exp["exit_code"]
                else [
                    f"exit {p.returncode}, expected {exp['exit_code']}: {p.stderr.strip()[-300:]}"
                ]
            )
        elif p.returncode != 0:
            errs = [f"exit {p.returncode}: {p.stderr.strip()[-300:]}"]
        else:
            try:
                errs = check(json.loads(p.stdout), exp)
            except (ValueError, KeyError, TypeError) as e:
                errs = [f"unreadable output: {e!r}: {p.stdout[:200]!r}"]
        if errs:
            failed += 1
            print(f"FAIL {path}: " + "; ".join(errs))
        else:
            passed += 1
            print(f"ok   {path}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
