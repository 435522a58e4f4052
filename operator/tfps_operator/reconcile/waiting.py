"""Why a job's pods wait, in one word and one line: the rule behind condition ``Waiting``, the Event and
the ``Reason`` printer column.

Pure: (the run's pods) -> :class:`Waiting` or None. A pod the scheduler cannot place says why in its
``PodScheduled`` condition (an unbound claim is named ``UnboundClaim``: no storage provisioner, a
missing StorageClass); a placed pod whose container cannot start says why in its waiting state (an
image that cannot be pulled, a missing Secret or ConfigMap).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .observed import PodObs

WAITING = "Waiting"
CONTAINER_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
    "CreateContainerConfigError",
    "CreateContainerError",
)
"""Container waiting reasons that do not pass on their own (ContainerCreating, PodInitializing do)."""
MAX_NAMED = 3


@dataclass(frozen=True)
class Waiting:
    reason: str
    message: str


def why(pods: Iterable[PodObs]) -> Waiting | None:
    """The first thing holding the pods back: unschedulable pods first, then containers that cannot start."""
    pods = [p for p in pods if not p.deleting]
    unplaced = [p for p in pods if not p.scheduled and p.unschedulable_message]
    if unplaced:
        unbound = [
            p
            for p in unplaced
            if "unbound" in p.unschedulable_message and "PersistentVolumeClaim" in p.unschedulable_message
        ]
        reason = "UnboundClaim" if unbound else "Unschedulable"
        first = (unbound or unplaced)[0]
        return Waiting(reason, f"{_names(unbound or unplaced)} not scheduled: {first.unschedulable_message}")
    stuck = [p for p in pods if p.waiting_reason in CONTAINER_REASONS]
    if stuck:
        first = stuck[0]
        detail = f": {first.waiting_message}" if first.waiting_message else ""
        return Waiting(first.waiting_reason, f"{_names(stuck)} cannot start: {first.waiting_reason}{detail}")
    return None


def _names(pods: list[PodObs]) -> str:
    named = ", ".join(p.name for p in pods[:MAX_NAMED])
    return named + (f" and {len(pods) - MAX_NAMED} more" if len(pods) > MAX_NAMED else "")
