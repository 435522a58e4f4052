"""The PVC a job asks for with ``spec.storage.volumeClaimTemplate`` (owned by the job)."""

from __future__ import annotations

from typing import Any

from ..api.models import PSTrainingJob
from . import labels, names


def storage_claim(job: PSTrainingJob) -> dict[str, Any] | None:
    """None when the job uses an existing claim or no claim at all."""
    t = job.spec.storage.volume_claim_template
    if t is None or job.spec.storage.claim_name:
        return None
    name = job.metadata.name
    spec: dict[str, Any] = {"accessModes": list(t.access_modes), "resources": {"requests": {"storage": t.size}}}
    if t.storage_class_name is not None:
        spec["storageClassName"] = t.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": labels.child_metadata(job, names.pvc_name(name), labels.base_labels(name, "storage")),
        "spec": spec,
    }
