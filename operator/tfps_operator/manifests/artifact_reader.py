"""The short-lived pod through which ``tfps artifacts --download`` reads a job's exports: off its volume
(mounted read-only), or out of object storage (``spec.storage.uri``) with the chief's storage settings."""

from __future__ import annotations

import copy
from typing import Any

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from ..strategies import lead_of
from . import labels
from .jobsettings import job_root
from .pods import (
    STORAGE_VOLUME,
    TMP_VOLUME,
    container_security_context,
    mount_credentials,
    pod_security_context,
    storage_volume,
)

READER_LABEL = "tfps.dev/artifact-reader"
"""On reader pods: the job they read. Not ``tfps.dev/job-name``: the operator never counts them."""
READER_MANAGED_BY = "tfps-client"

CHIEF_FIELDS = (
    ("nodeSelector", "node_selector"),
    ("tolerations", "tolerations"),
    ("affinity", "affinity"),
    ("imagePullSecrets", "image_pull_secrets"),
)
"""Fields of the chief's template the reader pod takes: it must land where the claim can be mounted (a
tainted node pool, a zone the volume is bound to) and pull the same image."""


def reader_pod(
    job: PSTrainingJob, name: str, image: str, lifetime_seconds: int, cfg: BuildConfig | None = None
) -> dict[str, Any]:
    """A pod sleeping ``lifetime_seconds`` (its ``activeDeadlineSeconds`` too, so it ends even if the client
    that made it dies) that can read the job's exports: on a volume, it mounts the job's claim read-only at
    the job's mount path; with ``spec.storage.uri``, it gets what the chief reads the bucket with (see
    :func:`_object_storage_access`) and the client runs ``python -m tfps_trainer.export.stream`` in it. The
    job owns it (not as controller), so deleting the job deletes it as well. It is scheduled like the chief
    (:data:`CHIEF_FIELDS`)."""
    cfg = cfg or BuildConfig()
    container: dict[str, Any] = {
        "name": "reader",
        "image": image,
        "command": ["sleep", str(lifetime_seconds)],
        "securityContext": container_security_context(),
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [],
    }
    volumes: list[dict[str, Any]] = []
    if job.spec.storage.uri:
        _object_storage_access(job, volumes, container)
    else:
        volume = storage_volume(job)
        if volume is None or "persistentVolumeClaim" not in volume:
            raise ValueError("spec.storage: the job has no persistent volume (its files went with its pods)")
        volume["persistentVolumeClaim"]["readOnly"] = True
        volumes.append(volume)
        container["volumeMounts"].append(
            {"name": STORAGE_VOLUME, "mountPath": job.spec.storage.mount_path, "readOnly": True}
        )
    owner = {**labels.owner_reference(job), "controller": False, "blockOwnerDeletion": False}
    chief = job.spec.replicas.of(lead_of(job)[0]).template
    scheduling = {
        key: copy.deepcopy(value)
        for key, attr in CHIEF_FIELDS
        if chief and chief.spec and (value := getattr(chief.spec, attr))
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": lifetime_seconds,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(cfg),
        **scheduling,
        "volumes": volumes,
        "containers": [container],
    }
    if job.spec.storage.uri and chief and chief.spec:
        if chief.spec.service_account_name:  # workload identity: the chief's account reads the bucket
            spec["serviceAccountName"] = chief.spec.service_account_name
        spec["automountServiceAccountToken"] = chief.spec.automount_service_account_token
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": {
                READER_LABEL: job.metadata.name,
                "app.kubernetes.io/managed-by": READER_MANAGED_BY,
                "app.kubernetes.io/name": labels.APP,
            },
            "ownerReferences": [owner],
        },
        "spec": spec,
    }


def _object_storage_access(job: PSTrainingJob, volumes: list[dict[str, Any]], container: dict[str, Any]) -> None:
    """What the chief reads the bucket with: ``spec.storage.credentialsSecret`` as in the chief, and the
    env, volumes and mounts of the chief's template (a proxy, a CA bundle); plus a writable /tmp and
    memory for TensorFlow, which reads the objects."""
    container["env"] = [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}]
    container["resources"] = {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
    volumes.append({"name": TMP_VOLUME, "emptyDir": {}})
    container["volumeMounts"].append({"name": TMP_VOLUME, "mountPath": "/tmp"})
    mount_credentials(job, volumes, container)
    chief = job.spec.replicas.of(lead_of(job)[0]).template
    o = chief.spec if chief and chief.spec else None
    if o is not None:
        container["env"] += copy.deepcopy(o.env or [])
        volumes += copy.deepcopy(o.volumes or [])
        container["volumeMounts"] += copy.deepcopy(o.volume_mounts or [])


def exports_dir(job: PSTrainingJob) -> str:
    """``<mount>/<namespace>/<job>/exports`` inside the reader pod (``<uri>/<namespace>/<job>/exports`` with
    object storage)."""
    return f"{job_root(job.spec.storage.mount_path, job)}/exports"
