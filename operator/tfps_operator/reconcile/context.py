"""One pass of the state machine: its inputs and the plan being built (:class:`Reconciliation`), and the
phase groups every part of it tests against."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..api.models import PSTrainingJob, PSTrainingJobStatus
from ..settings import BuildConfig
from . import conditions as C
from .observed import Observed, PodObs
from .plan import Delete, Event, Plan

TERMINAL = ("Succeeded", "Failed")
TRAINING = (None, "Pending", "Running", "Restarting", "Suspended")
SUSPENDABLE = (*TRAINING, "Exporting")
UNFINISHED = ("Pending", "Running", "Unknown")


class Reconciliation:
    """One call of :func:`reconcile`: its inputs (the job, the observed children, now, the build settings)
    and the plan being built, whose ``status`` every step edits in place."""

    def __init__(self, job: PSTrainingJob, status: PSTrainingJobStatus, obs: Observed, now: datetime, cfg: BuildConfig):
        self.job, self.obs, self.now, self.cfg = job, obs, now, cfg
        self.asked = job
        """The job as written; ``job`` becomes the job at its current run's size once that is decided."""
        self.generation = job.metadata.generation
        st = status.model_copy(deep=True)
        st.observed_generation = self.generation
        self.plan = Plan(status=st)

    @property
    def status(self) -> PSTrainingJobStatus:
        """The status this reconciliation writes (a copy of the job's, stamped with its generation)."""
        return self.plan.status

    def set_condition(self, type_: str, value: C.Status, reason: str, message: str = "") -> bool:
        return C.set_condition(self.status, type_, value, reason, message, self.now, self.generation)

    def clear(self, type_: str, reason: str, message: str = "") -> None:
        C.clear(self.status, type_, reason, message, self.now, self.generation)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(type_, reason, message))  # type: ignore[arg-type]

    def delete_pod(self, pod: PodObs, grace_seconds: int | None = None) -> None:
        action = Delete("Pod", pod.name, pod.uid, grace_seconds)
        if not pod.deleting and not any(
            isinstance(a, Delete) and a.key == action.key and a.uid == pod.uid for a in self.plan.actions
        ):
            self.plan.actions.append(action)


def last(pods: Any) -> PodObs | None:
    pods = list(pods)
    return max(pods, key=lambda p: (p.finished_at is not None, p.finished_at or 0, p.name)) if pods else None
