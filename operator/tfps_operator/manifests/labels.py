"""Labels, selectors and owner references shared by every child of a job."""

from __future__ import annotations

from typing import Any

from ..api.models import PSTrainingJob, Role

APP = "tfps"
MANAGED_BY = "tfps-operator"

JOB_NAME = "tfps.dev/job-name"
REPLICA_TYPE = "tfps.dev/replica-type"
REPLICA_INDEX = "tfps.dev/replica-index"
RESTART = "tfps.dev/restart"
"""On trainer pods: ``status.restarts`` when the pod was created. A pod from an earlier run of the
job (a lower value) is stale and is replaced, never counted as a new failure."""
COMPONENT = "app.kubernetes.io/component"
EXPORT_COMPONENT = "export"
PREFLIGHT_COMPONENT = "export-preflight"


def base_labels(job: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": APP,
        "app.kubernetes.io/instance": job,
        COMPONENT: component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": APP,
        JOB_NAME: job,
    }


def pod_labels(job: str, role: Role, index: int, restart: int) -> dict[str, str]:
    return {**base_labels(job, role), REPLICA_TYPE: role, REPLICA_INDEX: str(index), RESTART: str(restart)}


def job_selector(job: str) -> dict[str, str]:
    """Every pod of the job: trainer pods and export pods."""
    return {JOB_NAME: job, "app.kubernetes.io/managed-by": MANAGED_BY}


def role_selector(job: str, role: Role) -> dict[str, str]:
    """The pods of one replica type of the job (the scale subresource's selector for workers)."""
    return {JOB_NAME: job, REPLICA_TYPE: role}


def selector_string(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def owner_reference(job: PSTrainingJob) -> dict[str, Any]:
    """Controller reference to the job: garbage collection deletes the child with the job."""
    if not job.metadata.uid:
        raise ValueError("metadata.uid: the job has no uid (not read from the API server?)")
    return {
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_metadata(
    job: PSTrainingJob, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": job.metadata.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(job)],
    }
    if annotations:
        meta["annotations"] = annotations
    return meta
