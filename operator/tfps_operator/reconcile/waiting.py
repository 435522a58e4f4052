"""Why a job waits, in one word and one line: the rule behind condition ``Waiting``, the Event and the
``Reason`` printer column, for every stage that holds a job back before it trains: the export pre-flight
pod, the gang scheduler's PodGroup and the training pods themselves (Kueue's admission says why in the
Suspended condition, :mod:`.kueue`).

:func:`why` is pure: (pods) -> :class:`Waiting` or None. A pod the scheduler cannot place says why in its
``PodScheduled`` condition (a claim that does not exist is ``ClaimNotFound``; an unbound claim
``UnboundClaim``: no storage provisioner, a missing StorageClass); a placed pod whose container cannot
start says why in its waiting state (an image that cannot be pulled, a missing Secret or ConfigMap).
:func:`report` writes the verdict the same way for every stage: the condition, ``status.reason``, and one
Event each time the reason changes (not one per pass).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from . import conditions as C
from .context import Reconciliation
from .observed import PodObs

WAITING = "Waiting"
CLAIM_NOT_FOUND = "ClaimNotFound"
UNBOUND_CLAIM = "UnboundClaim"
UNSCHEDULABLE = "Unschedulable"
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
    """The first thing holding the pods back: unschedulable pods first (a missing claim before an unbound
    one before anything else), then containers that cannot start."""
    pods = [p for p in pods if not p.deleting]
    unplaced = [p for p in pods if not p.scheduled and p.unschedulable_message]
    if unplaced:
        for reason in (CLAIM_NOT_FOUND, UNBOUND_CLAIM, UNSCHEDULABLE):
            held = [p for p in unplaced if _scheduler_reason(p.unschedulable_message) == reason]
            if held:
                return Waiting(reason, f"{_names(held)} not scheduled: {held[0].unschedulable_message}")
    stuck = [p for p in pods if p.waiting_reason in CONTAINER_REASONS]
    if stuck:
        first = stuck[0]
        detail = f": {first.waiting_message}" if first.waiting_message else ""
        return Waiting(first.waiting_reason, f"{_names(stuck)} cannot start: {first.waiting_reason}{detail}")
    return None


def _scheduler_reason(message: str) -> str:
    """The scheduler's ``PodScheduled`` message in one word: ``persistentvolumeclaim "data" not found`` is
    ClaimNotFound, ``unbound immediate PersistentVolumeClaims`` UnboundClaim, anything else Unschedulable."""
    lower = message.lower()
    if 'persistentvolumeclaim "' in lower and "not found" in lower:
        return CLAIM_NOT_FOUND
    if "unbound" in lower and "persistentvolumeclaim" in lower:
        return UNBOUND_CLAIM
    return UNSCHEDULABLE


def report(r: Reconciliation, w: Waiting | None, cleared: str = "PodsStarted") -> None:
    """Condition Waiting and ``status.reason`` from ``w``, and an Event when the reason changes; ``w`` None
    clears a Waiting condition that was True (reason ``cleared``) and the reason it set."""
    old = C.get(r.status, WAITING)
    if w is None:
        if old is not None and old.status == "True":
            r.clear(WAITING, cleared, "")
            if r.status.reason == old.reason:
                r.status.reason = None
        return
    if old is None or old.status != "True" or old.reason != w.reason:
        r.event("Warning", w.reason, w.message)
    r.set_condition(WAITING, "True", w.reason, w.message)
    r.status.reason = w.reason


def _names(pods: list[PodObs]) -> str:
    named = ", ".join(p.name for p in pods[:MAX_NAMED])
    return named + (f" and {len(pods) - MAX_NAMED} more" if len(pods) > MAX_NAMED else "")
