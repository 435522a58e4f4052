"""The stall rule: a Running job that wrote no new checkpoint for longer than its bound is Stalled.

Pure: (status, bound, now) -> :class:`Verdict`. The clock starts at the latest of the last
checkpoint's time (as reported by the chief, copied into ``status.checkpoint.time`` by the progress
monitor) and the moment the job last became Running (so a restart or resume gets a full bound before
it is judged, and an old checkpoint from before a restart does not count against the new run).

The bound is ``spec.runPolicy.stallSeconds``, else the operator's default; ``None`` or 0 switches the
rule off. The condition's message is stable while the job stays stalled (it names the last step and
when it was written, not a growing age), so re-evaluating it never rewrites the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..api.models import PSTrainingJobStatus

STALLED = "Stalled"
REASON = "NoNewCheckpoint"
RESUMED = "CheckpointWritten"


@dataclass(frozen=True)
class Verdict:
    stalled: bool
    message: str = ""
    recheck_after: float | None = None
    """Seconds until the job turns stalled if nothing happens (None: no deadline to watch)."""


def bound_seconds(spec_seconds: int | None, default_seconds: float | None) -> float | None:
    """The job's own bound wins; an absent or non-positive result means no stall detection."""
    bound = spec_seconds if spec_seconds is not None else default_seconds
    return float(bound) if bound and bound > 0 else None


def running_since(status: PSTrainingJobStatus) -> datetime | None:
    """When the job last became Running: the Running condition's transition, else the start time."""
    cond = next((c for c in status.conditions if c.type == "Running" and c.status == "True"), None)
    if cond is not None and cond.last_transition_time is not None:
        return cond.last_transition_time
    return status.start_time


def evaluate(status: PSTrainingJobStatus, bound: float | None, now: datetime) -> Verdict | None:
    """Judge a job; None when the rule does not apply (not Running, rule off, no clock to start from)."""
    if status.phase != "Running" or bound is None:
        return None
    since = running_since(status)
    ck = status.checkpoint
    ck_time = ck.time if ck is not None else None
    reference: datetime | None
    if ck_time is not None and (since is None or ck_time > since):
        reference = ck_time
    else:
        reference = since
    if reference is None:
        return None
    deadline = reference + timedelta(seconds=bound)
    if now < deadline:
        return Verdict(False, recheck_after=(deadline - now).total_seconds())
    return Verdict(True, _message(status, bound, since))


def _message(status: PSTrainingJobStatus, bound: float, since: datetime | None) -> str:
    ck = status.checkpoint
    limit = f"{bound:g}s"
    if ck is not None and ck.step is not None and ck.time is not None and (since is None or ck.time > since):
        return f"no new checkpoint for more than {limit}: the last is step {ck.step}, written {ck.time.isoformat()}"
    if ck is not None and ck.step is not None:
        return (
            f"no new checkpoint for more than {limit} since the job became Running at "
            f"{since.isoformat() if since else 'an unknown time'} (the last checkpoint is step {ck.step})"
        )
    return f"no checkpoint for more than {limit} since the job became Running at {since.isoformat() if since else '?'}"
