"""The short-lived pod through which ``tfps artifacts --download`` reads a job's exports off its volume."""

from __future__ import annotations

import copy
from typing import Any

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from . import labels
from .jobsettings import job_root
from .pods import STORAGE_VOLUME, container_security_context, pod_security_context, storage_volume

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
    """A pod mounting the job's claim read-only at the job's mount path and sleeping ``lifetime_seconds``
    (its ``activeDeadlineSeconds`` too, so it ends even if the client that made it dies). The job owns
    it (not as controller), so deleting the job deletes it as well. It is scheduled like the chief
    (:data:`CHIEF_FIELDS`)."""
    cfg = cfg or BuildConfig()
    volume = storage_volume(job)
    if volume is None:
        raise ValueError(
            f"spec.storage.uri: the job's files are in object storage under {job_root('', job)}; "
            "read them there (gcloud storage ls), not through a reader pod"
        )
    if "persistentVolumeClaim" not in volume:
        raise ValueError("spec.storage: the job has no persistent volume (its files went with its pods)")
    volume["persistentVolumeClaim"]["readOnly"] = True
    owner = {**labels.owner_reference(job), "controller": False, "blockOwnerDeletion": False}
    chief = job.spec.replicas.chief.template
    scheduling = {
        key: copy.deepcopy(value)
        for key, attr in CHIEF_FIELDS
        if chief and chief.spec and (value := getattr(chief.spec, attr))
    }
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
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": lifetime_seconds,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": pod_security_context(cfg),
            **scheduling,
            "volumes": [volume],
            "containers": [
                {
                    "name": "reader",
                    "image": image,
                    "command": ["sleep", str(lifetime_seconds)],
                    "securityContext": container_security_context(),
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
                    "volumeMounts": [
                        {"name": STORAGE_VOLUME, "mountPath": job.spec.storage.mount_path, "readOnly": True}
                    ],
                }
            ],
        },
    }


def exports_dir(job: PSTrainingJob) -> str:
    """``<mount>/<namespace>/<job>/exports`` inside the reader pod."""
    return f"{job_root(job.spec.storage.mount_path, job)}/exports"
