"""An operator upgrade (and its rollback) must leave a running job's children alone.

The operator never patches a pod: it keeps a child it finds, or deletes it and builds another. Which one it
does is decided by a few fields of what an older version built, never by comparing specs (docs/install.md,
"Upgrading"). ``tests/support/upgrade/ab5f88f.json`` holds the children and the status of representative jobs
as the operator of commit ab5f88f built and wrote them (``tests/support/upgrade/capture.py``, run from a worktree
of that commit), in the phases a job can be in when the operator is replaced (Pending, Running, Exporting,
Suspended). These tests hand them to the working tree's state machine and builders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.upgrade.capture import FLAVOR, SCENARIOS, T0, capture
from tfps_operator.api.models import PSTrainingJob
from tfps_operator.api.validate import validate_job
from tfps_operator.controller import parse_status
from tfps_operator.kube.client import controller_uid
from tfps_operator.manifests import names
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import Flavor, observe, workload_obs
from tfps_operator.reconcile.plan import Create, Delete, DeletePods
from tfps_operator.reconcile.writes import status_write
from tfps_operator.settings import BuildConfig

FIXTURE = Path(__file__).resolve().parents[3] / "support" / "upgrade" / "ab5f88f.json"
OLDER = json.loads(FIXTURE.read_text())["scenarios"]

IDENTITY_LABELS = (
    "app.kubernetes.io/managed-by",
    "tfps.dev/job-name",
    "app.kubernetes.io/component",
    "tfps.dev/replica-type",
    "tfps.dev/replica-index",
    "tfps.dev/restart",
)
"""The labels by which the operator finds a job's children and tells which run, role and index a pod is
(with the child's name and its controller owner reference). Their keys and values are a contract between
operator versions: docs/install.md, "Upgrading"."""

WHERE = (
    "A new operator must adopt the children an older one built, and an older one (after a rollback) those the new "
    "one built: what decides it is listed in docs/install.md, 'Upgrading' (names, the labels {labels}, the "
    "controller owner reference, status.restarts). If this change is intended, it needs a migration for running "
    "jobs and a note in that section, not a new fixture."
)


def cases() -> list[tuple[str, str]]:
    return [(s, p) for s, scenario in OLDER.items() for p in scenario["phases"]]


def identity(obj: dict[str, Any]) -> dict[str, Any]:
    """What decides whether the operator keeps ``obj``: its kind and name, the identity labels and who controls it."""
    meta = obj["metadata"]
    lbl = meta.get("labels") or {}
    owners = [
        {"kind": o.get("kind"), "name": o.get("name"), "controller": o.get("controller")}
        for o in meta.get("ownerReferences") or []
    ]
    return {
        "key": f"{obj['kind']}/{meta['name']}",
        "labels": {k: lbl[k] for k in IDENTITY_LABELS if k in lbl},
        "owners": owners,
    }


def as_found(job: PSTrainingJob, objects: list[dict[str, Any]]) -> Any:
    """The children as the working tree's controller would read them: pods and Jobs by the job's labels
    (its informers' selector), the other children by name, counted when the job controls them."""
    name = job.metadata.name
    mine = [
        o
        for o in objects
        if (o["metadata"].get("labels") or {}).get("tfps.dev/job-name") == name
        and (o["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "tfps-operator"
    ]
    pods = [o for o in mine if o["kind"] == "Pod"]
    jobs = {o["metadata"]["name"]: o for o in mine if o["kind"] == "Job"}
    existing = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in mine
        if o["kind"] not in ("Pod", "Job", "Workload") and controller_uid(o) == job.metadata.uid
    ]
    workload = next((workload_obs(o) for o in objects if o["kind"] == "Workload"), None)
    return observe(
        pods,
        jobs.get(names.export_job_name(name)),
        existing,
        jobs.get(names.preflight_job_name(name)),
        workload,
        {FLAVOR: Flavor()},
    )


@pytest.mark.parametrize(("scenario", "phase"), cases())
def test_a_new_operator_keeps_every_child_an_older_one_built(scenario: str, phase: str) -> None:
    older = OLDER[scenario]
    state = older["phases"][phase]
    job = PSTrainingJob.model_validate(older["job"])
    cfg = BuildConfig(default_image="tfps-trainer:test", **older["cfg"])
    current = parse_status(state["status"])

    plan = reconcile(job, current, as_found(job, state["objects"]), T0.replace(minute=10), cfg)

    deleted = [f"{a.kind}/{a.name}" for a in plan.actions if isinstance(a, Delete)]
    deleted += [f"Pod/{d.name}" for a in plan.actions if isinstance(a, DeletePods) for d in a.pods]
    built = {f"{o['kind']}/{o['metadata']['name']}" for o in state["objects"]}
    replaced = [a.key for a in plan.actions if isinstance(a, Create) and a.key in built]
    replaced += [a.key for a in plan.actions if isinstance(a, Create) and a.manifest["kind"] in ("Pod", "Job")]
    assert not deleted and not replaced, (
        f"{scenario} ({phase}): the working tree's operator would delete {deleted} and create {replaced} "
        f"in a job the operator of ab5f88f built. " + WHERE.format(labels=", ".join(IDENTITY_LABELS))
    )
    assert plan.status.phase == state["status"]["phase"]
    assert plan.status.restarts == state["status"].get("restarts", 0)


@pytest.mark.parametrize(("scenario", "phase"), cases())
def test_a_new_operator_keeps_every_status_field_an_older_one_wrote(scenario: str, phase: str) -> None:
    older = OLDER[scenario]
    written = older["phases"][phase]["status"]
    read = parse_status(written)
    assert read.to_wire() | written == read.to_wire(), f"fields of the stored status lost on reading: {written}"

    job = PSTrainingJob.model_validate(older["job"])
    cfg = BuildConfig(default_image="tfps-trainer:test", **older["cfg"])
    plan = reconcile(job, read, as_found(job, older["phases"][phase]["objects"]), T0.replace(minute=10), cfg)
    patch = status_write(read, plan.status) or {}
    dropped = sorted(k for k, v in patch.items() if v is None and k in written)
    assert not dropped, f"{scenario} ({phase}): the first status write of a new operator would remove {dropped}"
    kept = {c["type"] for c in plan.status.to_wire().get("conditions", [])}
    assert {c["type"] for c in written.get("conditions", [])} <= kept


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_children_are_built_with_the_identity_an_older_operator_gave_them(scenario: str) -> None:
    """The rollback side: an older operator keeps what the working tree builds only if the names, identity
    labels and owner of every child it knows are the same (children of a kind it never built, it ignores)."""
    now = capture(scenario, SCENARIOS[scenario])
    for phase, state in OLDER[scenario]["phases"].items():
        built = {identity(o)["key"]: identity(o) for o in now["phases"][phase]["objects"]}
        for old in map(identity, state["objects"]):
            assert built.get(old["key"]) == old, (
                f"{scenario} ({phase}): the operator of ab5f88f built {old}, the working tree builds "
                f"{built.get(old['key'])}. " + WHERE.format(labels=", ".join(IDENTITY_LABELS))
            )


@pytest.mark.parametrize("scenario", sorted(OLDER))
def test_every_captured_job_is_one_the_api_server_admits(scenario: str) -> None:
    """The jobs are real ones: today's schema and CEL rules accept them (the cluster tier replays them)."""
    validate_job(OLDER[scenario]["job"])
