"""One reconcile pass of another operator version over jobs the working tree built: the rollback side of an
upgrade. Run with that version's sources first on ``PYTHONPATH`` (``tests/unit/operator/reconcile/
test_rollback_children.py`` extracts ab5f88f's); it reads a JSON list of cases on stdin, each
``{"job", "cfg", "status", "objects"}`` as the API server would return them under that version's CRD, and
prints, for each, what that version's state machine would do: the children it would delete or create, and the
phase, reason and restarts of the status it would write.

It uses only what every version since ab5f88f has (``controller.parse_status``/``parse_job``, ``observe``,
``workload_obs``, ``Flavor``, ``reconcile``, ``BuildConfig``), and finds a job's children as its controller
does: pods and Jobs by the job's labels, the other children by name when the job controls them.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

from tfps_operator.controller import parse_job, parse_status
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import Flavor, observe, workload_obs
from tfps_operator.settings import BuildConfig

NOW = datetime(2026, 1, 1, 12, 10, tzinfo=UTC)


def mine(job: dict[str, Any], obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return labels.get("tfps.dev/job-name") == job["metadata"]["name"] and (
        labels.get("app.kubernetes.io/managed-by") == "tfps-operator"
    )


def controlled(job: dict[str, Any], obj: dict[str, Any]) -> bool:
    owners = obj["metadata"].get("ownerReferences") or []
    return any(o.get("controller") and o.get("uid") == job["metadata"]["uid"] for o in owners)


def one_pass(case: dict[str, Any]) -> dict[str, Any]:
    body, objects = case["job"], [o for o in case["objects"] if mine(case["job"], o)]
    job, status = parse_job(body), parse_status(case["status"])
    name = body["metadata"]["name"]
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    existing = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in objects
        if o["kind"] not in ("Pod", "Job", "Workload") and controlled(body, o)
    ]
    workload = next((workload_obs(o) for o in objects if o["kind"] == "Workload"), None)
    obs = observe(
        [o for o in objects if o["kind"] == "Pod"],
        jobs.get(f"{name}-export"),
        existing,
        jobs.get(f"{name}-preflight"),
        workload,
        {f: Flavor() for f in case.get("flavors", [])},
    )
    plan = reconcile(job, status, obs, NOW, BuildConfig(default_image="tfps-trainer:test", **case["cfg"]))
    deleted, created = [], []
    for action in plan.actions:
        kind = type(action).__name__
        if kind == "Delete":
            deleted.append(f"{action.kind}/{action.name}")
        elif kind == "DeletePods":
            deleted += [f"Pod/{p.name}" for p in action.pods]
        elif kind == "Create":
            created.append(action.key)
    return {
        "read_phase": status.phase,
        "deleted": deleted,
        "created": created,
        "phase": plan.status.phase,
        "reason": plan.status.reason,
        "restarts": plan.status.restarts,
    }


def main() -> None:
    json.dump([one_pass(case) for case in json.load(sys.stdin)], sys.stdout)


if __name__ == "__main__":
    main()
