"""Gang scheduling: when the job's pods may be created, the GangScheduled condition, and what it means for
why the job waits (its Reason).

With gang scheduling on, the job's PodGroup is created first and its trainer pods only once the
PodGroup exists: a pod that reaches the gang scheduler before its group is refused ("PodGroup not
found") and waits for a retry. The gang scheduler then binds none of the pods until ``minMember`` of
them fit at once; what it said about an unbound pod (its PodScheduled message) goes into the condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .waiting import UNSCHEDULABLE, Waiting

GANG_SCHEDULED = "GangScheduled"
"""True once minMember of the job's pods are bound; False (WaitingForGang) with the scheduler's words."""
WAITING_FOR_GANG = "WaitingForGang"


@dataclass(frozen=True)
class Verdict:
    status: Literal["True", "False"]
    reason: str
    message: str


def may_create_pods(gang: bool, pod_group_exists: bool) -> bool:
    return not gang or pod_group_exists


def condition(pod_group: str, min_member: int, bound: int, total: int, scheduler_says: str) -> Verdict:
    """``bound`` of the job's ``total`` live pods are bound to a node; ``scheduler_says``: the gang
    scheduler's message on an unbound pod (empty when it has said nothing yet)."""
    if bound >= min_member:
        return Verdict(
            "True", "GangScheduled", f"PodGroup {pod_group}: {bound} of {total} pods bound (minMember {min_member})"
        )
    detail = f": {scheduler_says}" if scheduler_says else ""
    return Verdict(
        "False",
        WAITING_FOR_GANG,
        f"PodGroup {pod_group}: {bound} of minMember {min_member} pods bound; none is bound until "
        f"{min_member} fit at once{detail}",
    )


def waiting(v: Verdict, pods: Waiting | None) -> Waiting | None:
    """Why the job waits with gang scheduling on: pods the scheduler cannot place while the group is not
    placeable (``v`` False) wait for the gang; a more precise word from a pod (a missing claim, an image
    that cannot be pulled) stays, and pods the scheduler has said nothing about yet wait for nothing."""
    if v.status == "False" and pods is not None and pods.reason == UNSCHEDULABLE:
        return Waiting(WAITING_FOR_GANG, v.message)
    return pods


def no_pod_group(pod_group: str) -> str:
    """Why no pod of a gang-scheduled job exists: its PodGroup does not (its create is refused or pending)."""
    return f"PodGroup {pod_group} does not exist yet: the job's pods are created once it does"
