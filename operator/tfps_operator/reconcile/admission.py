"""Admission that matches what the operator will do: before the first child of a new or restarted run
is created, the API server validates every one made from the user's templates (server-side dry-run, see
:attr:`~.plan.Plan.validate`). Which answers are refusals, how each child is named for the user, and
the verdict, are decided here; the I/O layer only sends the dry-runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..api.models import PSTrainingJobStatus
from ..manifests import labels
from .machine import invalid_spec
from .plan import Plan

REFUSAL_STATUSES = (400, 422)
"""BadRequest, Invalid: the object itself is wrong. 403 is a refusal only when an admission policy
(PodSecurity) judged the object; a 403 for an exceeded quota passes (the create retries it later)."""


def is_refusal(status: int, message: str) -> bool:
    return status in REFUSAL_STATUSES or (status == 403 and "violates PodSecurity" in message)


def where(manifest: Mapping[str, Any]) -> str:
    """The part of the job a child comes from, e.g. ``spec.replicas.worker.template (Pod/j-worker-0)``."""
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    role = (manifest["metadata"].get("labels") or {}).get(labels.REPLICA_TYPE)
    source = {"PersistentVolumeClaim": "spec.storage.volumeClaimTemplate", "Job": "spec.export"}.get(kind)
    if kind == "Pod" and role:
        source = f"spec.replicas.{role}.template"
    return f"{source} ({kind}/{name})" if source else f"{kind}/{name}"


def verdict(status: PSTrainingJobStatus, generation: int | None, refusals: Mapping[str, str], now: datetime) -> Plan:
    """The API server refused children of a new run (``{where(child): its message}``): Failed/InvalidSpec
    with its words. Pods of one replica type share a template: the first refusal of each is enough."""
    kept: dict[str, str] = {}
    for key in sorted(refusals):
        source = key.split(" (", 1)[0]
        if not any(k.split(" (", 1)[0] == source for k in kept) or not source.startswith("spec.replicas."):
            kept[key] = refusals[key]
    message = "the API server refuses the job's children (nothing was created): " + "; ".join(
        f"{k}: {v}" for k, v in kept.items()
    )
    return invalid_spec(status, generation, message, now)
