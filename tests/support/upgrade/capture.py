"""Capture the children an operator version builds, and the status it writes, for a few representative jobs
in the phases a running job can be in when the operator is upgraded (Pending, Running, Exporting).

Run it against the operator of another commit (a ``git worktree`` of it) to freeze what that version left
in a cluster::

    git worktree add --detach /tmp/tfps-old ab5f88f
    PYTHONPATH=/tmp/tfps-old/operator:/tmp/tfps-old/wire:/tmp/tfps-old/trainer_image \\
        .venv/bin/python tests/support/upgrade/capture.py ab5f88f > tests/support/upgrade/ab5f88f.json

It drives that version's own pure state machine (``reconcile.machine.reconcile``) the way its controller
does, pass after pass, and answers each pass as the API server would (the objects it created, with a uid,
then Running, then the chief Succeeded, then its export finished; a queued job's Workload waiting, then
admitted). It uses only what every version since ab5f88f has: the job model, ``reconcile``, ``observe``,
``workload_obs``, ``Flavor`` and ``BuildConfig``. The test that reads the file is
``tests/unit/operator/reconcile/test_upgrade_children.py``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from tfps_operator.api.models import PSTrainingJob, PSTrainingJobStatus
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import Flavor, observe, workload_obs
from tfps_operator.settings import BuildConfig

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
UID = "0b4f6c1e-0000-4000-8000-00000000a001"

SCENARIOS: dict[str, dict[str, Any]] = {
    "ps-eval-claim-export": {
        "cfg": {},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100, "checkpoint": {"everySteps": 10}},
            "replicas": {"ps": {"replicas": 2}, "worker": {"replicas": 3}, "evaluator": {"replicas": 1}},
            "storage": {"volumeClaimTemplate": {"size": "1Gi"}},
            "export": {"preflight": False},
        },
    },
    "gang-no-export": {
        "cfg": {"gang_scheduler_name": "scheduler-plugins-scheduler"},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100},
            "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 2}},
            "export": {"enabled": False},
        },
    },
    "second-run": {
        "cfg": {},
        "restart": True,
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100},
            "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 1}},
            "export": {"enabled": False},
        },
    },
    "on-hold": {
        "cfg": {},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100},
            "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 2}},
            "export": {"preflight": False},
            "runPolicy": {"suspend": True},
        },
    },
    "queued": {
        "cfg": {"kueue": True},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100},
            "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 2}},
            "storage": {"claimName": "data"},
            "export": {"enabled": False},
            "runPolicy": {"schedulingPolicy": {"queue": "lq"}},
        },
    },
}

FLAVOR = "default-flavor"
"""The ResourceFlavor Kueue assigns a queued job once it admits it (no node labels, no tolerations)."""


def workload_status(workload: dict[str, Any], admitted: bool) -> dict[str, Any]:
    """A Workload's status as Kueue writes it: waiting for quota, or admitted with every pod set on
    :data:`FLAVOR`."""
    if not admitted:
        return {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "LocalQueue lq doesn't exist",
                    "lastTransitionTime": "2026-01-01T12:00:01Z",
                }
            ]
        }
    ok = [
        {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": "2026-01-01T12:00:10Z"}
        for t, r, m in (
            ("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            ("Admitted", "Admitted", "The workload is admitted"),
        )
    ]
    assignments = [
        {"name": ps["name"], "count": ps["count"], "flavors": {"cpu": FLAVOR}} for ps in workload["spec"]["podSets"]
    ]
    return {"conditions": ok, "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}}


def job_body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name, "namespace": "team-a", "uid": UID, "generation": 1},
        "spec": spec,
    }


def as_stored(manifest: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` as the API server returns it: with a uid, a creation time and ``status``."""
    meta = {**manifest["metadata"], "uid": f"uid-{manifest['kind']}-{manifest['metadata']['name']}"}
    meta["creationTimestamp"] = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    out = {**manifest, "metadata": meta, "status": status}
    if manifest["kind"] == "Pod":
        out["spec"] = {**manifest["spec"], "nodeName": "kwok-node-0"}
    return out


def pod_status(phase: str, message: str = "") -> dict[str, Any]:
    conds = [{"type": "PodScheduled", "status": "True"}]
    if phase == "Running":
        conds.append({"type": "Ready", "status": "True"})
    st: dict[str, Any] = {"phase": phase, "conditions": conds}
    if phase in ("Succeeded", "Failed"):
        code = 0 if phase == "Succeeded" else 1
        terminated: dict[str, Any] = {"exitCode": code, "finishedAt": "2026-01-01T12:05:00Z"}
        if message:
            terminated["message"] = message
        st["containerStatuses"] = [{"name": "trainer", "state": {"terminated": terminated}}]
    return st


EXPORT_RESULT = (
    '{"ok":true,"step":100,"path":"exports/100","manifest":"exports/100/manifest.json",'
    '"artifacts":[],"failed":[],"truncated":false}'
)
"""The exporter's termination message for a finished export of step 100, as every version since ab5f88f
writes and reads it (one JSON line)."""


def export_pod(job: dict[str, Any]) -> dict[str, Any]:
    """The pod the Job controller made for the export Job ``job`` (as created), finished with
    :data:`EXPORT_RESULT`."""
    template, job_name = job["spec"]["template"], job["metadata"]["name"]
    labels = {**template["metadata"]["labels"], "batch.kubernetes.io/job-name": job_name, "job-name": job_name}
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": f"uid-Job-{job_name}"}
    meta = {
        "name": f"{job_name}-x7k2p",
        "namespace": job["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
    }
    return as_stored({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}, {})


def capture(name: str, scenario: dict[str, Any]) -> dict[str, Any]:
    body = job_body(name, scenario["spec"])
    job = PSTrainingJob.model_validate(body)
    cfg = BuildConfig(default_image="tfps-trainer:test", **scenario["cfg"])
    objects: dict[str, dict[str, Any]] = {}  # Kind/name -> manifest as created
    status = PSTrainingJobStatus()
    phases: dict[str, Any] = {}

    admitted = False  # whether Kueue has admitted the job's Workload (a queued job)
    exported = False  # whether the export Job has finished

    def in_cluster(pod_phase: dict[str, str]) -> list[dict[str, Any]]:
        """Every child created so far as stored; pods in ``pod_phase`` by name, ``*`` for the rest."""

        def status_of(m: dict[str, Any]) -> dict[str, Any]:
            if m["kind"] == "Pod":
                return pod_status(pod_phase.get(m["metadata"]["name"], pod_phase["*"]))
            if m["kind"] == "Job" and exported:
                return {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
            return workload_status(m, admitted) if m["kind"] == "Workload" else {}

        stored = [as_stored(m, status_of(m)) for m in objects.values()]
        if exported:
            pod = export_pod(objects[f"Job/{name}-export"])
            stored.append({**pod, "status": pod_status("Succeeded", EXPORT_RESULT)})
        return stored

    def apply(pod_phase: dict[str, str], now: datetime) -> PSTrainingJobStatus:
        stored = in_cluster(pod_phase)
        pods = [o for o in stored if o["kind"] == "Pod"]
        jobs = {o["metadata"]["name"]: o for o in stored if o["kind"] == "Job"}
        workload = next((workload_obs(o) for o in stored if o["kind"] == "Workload"), None)
        existing = [k for k, m in objects.items() if m["kind"] not in ("Pod", "Job", "Workload")]
        obs = observe(
            pods, jobs.get(f"{name}-export"), existing, jobs.get(f"{name}-preflight"), workload, {FLAVOR: Flavor()}
        )
        plan = reconcile(job, status, obs, now, cfg)
        for c in plan.creates():
            objects[f"{c.manifest['kind']}/{c.manifest['metadata']['name']}"] = c.manifest
        for d in plan.deletes():  # the pods training no longer needs, once the chief has succeeded
            objects.pop(f"{d.kind}/{d.name}", None)
        return plan.status

    def record(phase: str, pod_phase: dict[str, str]) -> None:
        phases[phase] = {
            "status": status.model_dump(mode="json", by_alias=True, exclude_none=True),
            "objects": in_cluster(pod_phase),
        }

    if job.spec.run_policy.suspend:
        status = apply({"*": "Pending"}, T0)
        status = apply({"*": "Pending"}, T0 + timedelta(seconds=1))
        assert status.phase == "Suspended", status.phase
        record("Suspended", {"*": "Pending"})
        return {"job": body, "cfg": scenario["cfg"], "phases": phases}
    if cfg.kueue:  # the Workload first; the pods once Kueue admits it
        status = apply({"*": "Pending"}, T0)
        status = apply({"*": "Pending"}, T0 + timedelta(seconds=1))
        assert (status.phase, status.reason) == ("Suspended", "WaitingForAdmission"), (status.phase, status.reason)
        record("Queued", {"*": "Pending"})
        admitted = True
    status = apply({"*": "Pending"}, T0)  # creates the infrastructure and the pods
    status = apply({"*": "Pending"}, T0 + timedelta(seconds=1))
    record("Pending", {"*": "Pending"})
    status = apply({"*": "Running"}, T0 + timedelta(seconds=30))
    assert status.phase == "Running", status.phase
    record("Running", {"*": "Running"})
    if scenario.get("restart"):  # a parameter server fails: the whole job restarts, a new run of every pod
        ps_failed = {"*": "Running", f"{name}-ps-0": "Failed"}
        status = apply(ps_failed, T0 + timedelta(seconds=60))
        status = apply({"*": "Pending"}, T0 + timedelta(seconds=61))  # the old run's pods are gone
        status = apply({"*": "Running"}, T0 + timedelta(seconds=90))
        assert (status.phase, status.restarts) == ("Running", 1), (status.phase, status.restarts)
        record("Restarted", {"*": "Running"})
    if job.spec.export.enabled:
        chief_done = {"*": "Running", f"{name}-chief-0": "Succeeded"}
        status = apply(chief_done, T0 + timedelta(seconds=300))
        status = apply(chief_done, T0 + timedelta(seconds=301))
        assert status.phase == "Exporting", status.phase
        record("Exporting", chief_done)
        exported = True
        status = apply(chief_done, T0 + timedelta(seconds=600))
        status = apply(chief_done, T0 + timedelta(seconds=601))
        assert status.phase == "Succeeded", (status.phase, status.reason)
        record("Succeeded", chief_done)
    return {"job": body, "cfg": scenario["cfg"], "phases": phases}


def main() -> None:
    commit = sys.argv[1] if len(sys.argv) > 1 else "unknown"
    out = {"commit": commit, "scenarios": {n: capture(n, s) for n, s in SCENARIOS.items()}}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
