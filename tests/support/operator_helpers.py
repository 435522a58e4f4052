"""Jobs and observed pods for the operator's unit tests: real models, raw pod dicts as the API returns them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tfps_operator.api.models import PSTrainingJob, PSTrainingJobStatus
from tfps_operator.manifests import names
from tfps_operator.manifests.labels import EXPORT_COMPONENT, PREFLIGHT_COMPONENT, base_labels, pod_labels
from tfps_operator.reconcile.observed import Observed, observe
from tfps_operator.settings import BuildConfig

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
CFG = BuildConfig(default_image="tfps-trainer:test")
UID = "0b4f6c1e-0000-4000-8000-000000000001"


def make_job(
    name: str = "mnist",
    namespace: str = "team-a",
    *,
    ps: int = 2,
    workers: int = 3,
    evaluator: int = 0,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> PSTrainingJob:
    """A validated job. The export pre-flight is off unless ``export`` asks for it: the tests of training
    and export start from pods; the pre-flight has tests of its own."""
    spec["export"] = {"preflight": False, **spec.get("export", {})}
    body: dict[str, Any] = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name, "namespace": namespace, "uid": UID, "generation": 1},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100},
            "replicas": {"ps": {"replicas": ps}, "worker": {"replicas": workers}, "evaluator": {"replicas": evaluator}},
            **spec,
        },
    }
    return PSTrainingJob.model_validate(body)


def status(**fields: Any) -> PSTrainingJobStatus:
    return PSTrainingJobStatus.model_validate(fields)


def pod(
    job: PSTrainingJob,
    role: str,
    index: int,
    phase: str = "Running",
    *,
    restart: int = 0,
    exit_code: int | None = None,
    message: str = "",
    deleting: bool = False,
    scheduled: bool = True,
    uid: str | None = None,
    unschedulable: str = "",
    created: datetime | None = None,
) -> dict[str, Any]:
    """A trainer pod as the API server returns it (created at ``created``, default T0)."""
    name = names.pod_name(job.metadata.name, role, index)  # type: ignore[arg-type]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": job.metadata.namespace,
        "uid": uid or f"uid-{name}-{restart}",
        "labels": pod_labels(job.metadata.name, role, index, restart),
        "creationTimestamp": (created or T0).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }  # type: ignore[arg-type]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    conds = [
        {
            "type": "PodScheduled",
            "status": "True" if scheduled else "False",
            **({"reason": "Unschedulable", "message": unschedulable} if unschedulable else {}),
        }
    ]
    if phase == "Running":
        conds.append({"type": "Ready", "status": "True"})
    st: dict[str, Any] = {"phase": phase, "conditions": conds}
    if exit_code is not None:
        st["containerStatuses"] = [
            {
                "name": "trainer",
                "state": {
                    "terminated": {"exitCode": exit_code, "message": message, "finishedAt": "2026-01-01T12:00:00Z"}
                },
            }
        ]
    return {"metadata": meta, "spec": {"nodeName": "kwok-node-0"} if scheduled else {}, "status": st}


def all_pods(job: PSTrainingJob, phase: str = "Running", restart: int = 0, **overrides: str) -> list[dict[str, Any]]:
    """Every trainer pod of the job in ``phase``; ``overrides`` maps pod name suffix (``ps_0``) to a phase."""
    out = []
    r = job.spec.replicas
    for role, n in (
        ("chief", r.chief.replicas),
        ("ps", r.ps.replicas),
        ("worker", r.worker.replicas),
        ("evaluator", r.evaluator.replicas),
    ):
        for i in range(n):
            out.append(pod(job, role, i, overrides.get(f"{role}_{i}", phase), restart=restart))
    return out


def export_pod(
    job: PSTrainingJob,
    phase: str,
    message: str = "",
    exit_code: int | None = None,
    suffix: str = "abcde",
    preflight: bool = False,
) -> dict[str, Any]:
    st: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        st["containerStatuses"] = [
            {
                "name": "trainer",
                "state": {
                    "terminated": {"exitCode": exit_code, "message": message, "finishedAt": "2026-01-01T12:00:00Z"}
                },
            }
        ]
    job_name = (names.preflight_job_name if preflight else names.export_job_name)(job.metadata.name)
    component = PREFLIGHT_COMPONENT if preflight else EXPORT_COMPONENT
    return {
        "metadata": {
            "name": f"{job_name}-{suffix}",
            "uid": f"uid-exp-{suffix}",
            "labels": base_labels(job.metadata.name, component),
        },
        "status": st,
    }


def batch_job(
    job: PSTrainingJob, condition: str | None = None, message: str = "", preflight: bool = False
) -> dict[str, Any]:
    conds = (
        [
            {
                "type": condition,
                "status": "True",
                "reason": "BackoffLimitExceeded" if condition == "Failed" else "",
                "message": message,
            }
        ]
        if condition
        else []
    )
    name = (names.preflight_job_name if preflight else names.export_job_name)(job.metadata.name)
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "status": {"conditions": conds}}


def infra(job: PSTrainingJob) -> set[str]:
    n = job.metadata.name
    out = {f"Service/{names.service_name(n)}", f"NetworkPolicy/{names.network_policy_name(n)}"}
    if job.spec.storage.volume_claim_template:
        out.add(f"PersistentVolumeClaim/{names.pvc_name(n)}")
    return out


def observed(
    job: PSTrainingJob,
    pods: list[dict[str, Any]] = (),
    export_job: dict[str, Any] | None = None,
    existing: set[str] | None = None,
    preflight_job: dict[str, Any] | None = None,
) -> Observed:
    return observe(list(pods), export_job, infra(job) if existing is None else existing, preflight_job)


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)
