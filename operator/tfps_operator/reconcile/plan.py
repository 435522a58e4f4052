"""What one pass decided (the new status, the child changes, the Events, when to look again), and what
carrying it out found (:class:`Outcome`, read by the next pass).

The I/O layer (:mod:`tfps_operator.kube.executor`) writes the status first (conditionally on the job's
resourceVersion), then performs the actions, then posts the Events. Writing the status first makes
every counted transition (a restart, a finish) durable before its side effects, so a crash in between
is repaired by the next pass instead of being counted twice. The one exception is a brand-new job
(:attr:`Plan.children_first`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..api.models import PSTrainingJobStatus


@dataclass(frozen=True)
class Create:
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.manifest['kind']}/{self.manifest['metadata']['name']}"


@dataclass(frozen=True)
class Delete:
    kind: Literal["Pod", "Job", "Workload"]
    name: str
    uid: str | None = None
    """Precondition: delete only this incarnation (a same-name replacement is left alone)."""
    grace_seconds: int | None = None
    """A pod's grace period for this deletion; None: its own ``terminationGracePeriodSeconds``."""

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class DeletePods:
    """Delete several of the job's pods in one request (a delete-collection by label and field
    selector) where no same-name replacement can appear: the job has finished. ``pods`` are the
    single deletes it stands for, as observed; the selectors match exactly those pods."""

    label_selector: str
    field_selector: str | None
    pods: tuple[Delete, ...]


@dataclass(frozen=True)
class DeleteOwner:
    """Delete the PSTrainingJob itself (ttlSecondsAfterFinished); children go by garbage collection."""

    uid: str | None


@dataclass(frozen=True)
class PatchWorkload:
    """Merge-patch the status of the job's Kueue Workload, only if it is still at ``resource_version``
    (Kueue writes the same status: a patch on a newer one is dropped, the next pass decides again)."""

    name: str
    resource_version: str
    patch: dict[str, Any]

    @property
    def key(self) -> str:
        return f"Workload/{self.name}"


@dataclass(frozen=True)
class ApplyInferenceService:
    """Create the InferenceService (``resource_version`` None: a 409 is not an error, the next pass sees
    it), or merge-patch it if it is still at ``resource_version`` (a 409 leaves it to the next pass)."""

    manifest: dict[str, Any]
    resource_version: str | None = None

    @property
    def key(self) -> str:
        return f"InferenceService/{self.manifest['metadata']['name']}"


@dataclass(frozen=True)
class ReadJob:
    """Read the job itself: its status write was refused for a stale resourceVersion and the watch has
    not delivered a newer body yet. A plan with this action has no other."""


Action = Create | Delete | DeletePods | DeleteOwner | PatchWorkload | ApplyInferenceService | ReadJob


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class Plan:
    status: PSTrainingJobStatus
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    """Seconds until the job must be looked at again without any event (deadline, TTL)."""
    job_restarted: bool = False
    replaced: list[str] = field(default_factory=list)
    """Failed pods deleted to be recreated alone (the caller's crash-loop backoff counts them)."""
    recreated: list[str] = field(default_factory=list)
    """Roles of pods recreated after a failure or loss (for the pod-restart metric)."""
    validate: list[dict[str, Any]] = field(default_factory=list)
    """Children of a new or restarted run to validate by a server-side dry-run before any of this plan's
    creates: those made from the user's templates, one pod of each replica type (the others share its
    template), the claim and the Jobs; not the Service and NetworkPolicy, which the operator builds
    alone (:data:`~.machine.OPERATOR_BUILT`). A refusal fails the job instead
    (:func:`~.admission.verdict`), so nothing of a run the API server would not admit is created."""
    children_first: bool = False
    """Create the children before writing the status, which already reports them; the status and
    Events are left out when a create fails (a brand-new job: nothing counted yet needs to be durable
    first, and one status write is saved)."""
    progress_only: bool = False
    """The status write only moves counts or wording (it was spaced out, :func:`.pacing.progress_wait`)."""
    backoff: bool = False
    """The next pass waits the queue's per-job back-off (creates were refused: reported now, retried then)."""
    export_outcomes: list[tuple[str, str]] = field(default_factory=list)
    """(format, passed|failed) of each artifact whose outcome this status records first (for the metric)."""

    def creates(self) -> list[Create]:
        return [a for a in self.actions if isinstance(a, Create)]

    def deletes(self) -> list[Delete]:
        """Every single delete, including those a :class:`DeletePods` stands for."""
        out: list[Delete] = []
        for a in self.actions:
            if isinstance(a, Delete):
                out.append(a)
            elif isinstance(a, DeletePods):
                out.extend(a.pods)
        return out

    def requeue(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


@dataclass(frozen=True)
class Outcome:
    """What carrying out a plan found that the next pass must know."""

    status_written: bool = False
    conflict: bool = False
    """The status write was refused: the job changed since the body the pass read."""
    gone: bool = False
    """The job was not found."""
    create_failures: Mapping[str, str] = field(default_factory=dict)
    """``Kind/name`` -> the API server's message, for each create it refused."""
