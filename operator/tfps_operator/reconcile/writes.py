"""What a pass writes to the job's status, and which changes are written at once.

The I/O layer (:mod:`tfps_operator.kube.executor`) sends what these functions return; the spacing of
the writes that may wait is in :mod:`.pacing`.
"""

from __future__ import annotations

from typing import Any

from ..api.models import PSTrainingJobStatus
from .conditions import SCHEDULED
from .plan import Plan

OWNED_STATUS_FIELDS = (
    "phase",
    "conditions",
    "observedGeneration",
    "replicaStatuses",
    "restarts",
    "startTime",
    "completionTime",
    "export",
    "workers",
    "dataWorkers",
    "checkpoint",
    "preemptions",
    "recreations",
    "reason",
    "clusterSize",
    "workerSelector",
    "workersLeftOut",
    "resize",
    "resizes",
    "serving",
)
"""The status fields the reconciler writes; ``progress`` belongs to the progress monitor. ``checkpoint``
is written by both: the monitor while the chief runs, the reconciler from the chief's success summary
(its writes are conditional on resourceVersion; the monitor stops once the job leaves Running)."""

SIGNIFICANT_STATUS_FIELDS = (
    "phase",
    "restarts",
    "observedGeneration",
    "startTime",
    "completionTime",
    "export",
    "checkpoint",
    "preemptions",
    "recreations",
    "reason",
    "clusterSize",
    "workersLeftOut",
    "resize",
    "resizes",
    "serving",
)
"""A change in any of these is written at once (see :func:`minor_status_change` for the rest)."""


def status_patch(status: PSTrainingJobStatus) -> dict[str, Any]:
    """The owned fields of ``status`` in wire form; absent ones as null so a merge patch removes them."""
    wire = status.to_wire()
    fields = [f for f in OWNED_STATUS_FIELDS if f in wire or _has_alias(f)]
    return {f: wire.get(f) for f in fields}


def status_write(current: PSTrainingJobStatus, new: PSTrainingJobStatus) -> dict[str, Any] | None:
    """The status patch that takes the job from ``current`` to ``new``; None when the owned fields
    are unchanged (then nothing is written)."""
    patch = status_patch(new)
    return None if patch == status_patch(current) else patch


def minor_status_change(old: PSTrainingJobStatus, new: PSTrainingJobStatus) -> bool:
    """True when ``new`` differs from ``old`` only in progress on the way to Running: counts
    (``replicaStatuses``, ``workers``, ``dataWorkers``), a condition's wording, or ``Scheduled`` turning
    True. Such a change can wait a moment and be written with the next one. Phases, restarts, problems
    (a condition turning False or changing reason) and everything else are written at once."""
    a, b = status_patch(old), status_patch(new)
    if a == b or any(a.get(k) != b.get(k) for k in SIGNIFICANT_STATUS_FIELDS):
        return False

    def shape(conds: Any) -> dict[Any, tuple[Any, ...]]:
        return {c.get("type"): (c.get("status"), c.get("reason")) for c in conds or []}

    before, after = shape(a.get("conditions")), shape(b.get("conditions"))
    if before.get(SCHEDULED) != after.get(SCHEDULED) and (after.get(SCHEDULED) or ("",))[0] == "True":
        before.pop(SCHEDULED, None)
        after.pop(SCHEDULED, None)
    return before == after


def progress_only(current: PSTrainingJobStatus, plan: Plan) -> bool:
    """True when ``plan`` does nothing but a minor status change: no child to change, no Event. Its
    write may be deferred (:func:`.pacing.progress_wait`)."""
    return not plan.actions and not plan.events and minor_status_change(current, plan.status)


def _has_alias(wire_name: str) -> bool:
    return any(fld.alias == wire_name for fld in PSTrainingJobStatus.model_fields.values())
