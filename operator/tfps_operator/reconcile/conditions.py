"""Condition types of a PSTrainingJob and the one helper that sets them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ..api.models import Condition, PSTrainingJobStatus

CREATED = "Created"
"""All children exist. False with reason CreateFailed and the API server's message when one cannot be created."""
SCHEDULED = "Scheduled"
RUNNING = "Running"
RESTARTING = "Restarting"
SUSPENDED = "Suspended"
EXPORTING = "Exporting"
EXPORT_PREFLIGHT = "ExportPreflight"
"""True: every requested format converted and verified on fresh weights before training. False with
reason FormatsWillFail (optional formats only; the job goes on) or PreflightDidNotRun."""
EXPORT_COMPLETE = "ExportComplete"
"""After the export: True when every requested format was published, False (FormatsFailed) naming those
that were not."""
SERVING = "Serving"
"""With spec.serving: True once the InferenceService serves this job's verified export; False naming why not
(KServeNotInstalled, ExportNotVerified, NotExported, NameTaken, Superseded, Applying, InferenceServiceUnreadable)."""
SUCCEEDED = "Succeeded"
FAILED = "Failed"

Status = Literal["True", "False", "Unknown"]


def get(status: PSTrainingJobStatus, type_: str) -> Condition | None:
    return next((c for c in status.conditions if c.type == type_), None)


def is_true(status: PSTrainingJobStatus, type_: str) -> bool:
    c = get(status, type_)
    return c is not None and c.status == "True"


def set_condition(
    status: PSTrainingJobStatus,
    type_: str,
    value: Status,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> bool:
    """Set (in place) one condition; ``lastTransitionTime`` moves only when the status flips.
    Returns True when the status value changed."""
    old = get(status, type_)
    flipped = old is None or old.status != value
    kept = old.last_transition_time if old is not None and not flipped else None
    new = Condition(
        type=type_,
        status=value,
        reason=reason,
        message=message,
        last_transition_time=now if kept is None else kept,
        observed_generation=generation,
    )
    status.conditions = [new if c.type == type_ else c for c in status.conditions] if old else [*status.conditions, new]
    return flipped


def clear(
    status: PSTrainingJobStatus, type_: str, reason: str, message: str, now: datetime, generation: int | None
) -> bool:
    """Set a condition to False, but only if it exists (no clutter of never-true conditions)."""
    if get(status, type_) is None:
        return False
    return set_condition(status, type_, "False", reason, message, now, generation)
