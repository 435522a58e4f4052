"""What the operator observed of a job's children, reduced to the facts the state machine uses.

Parsing raw API objects here keeps :mod:`.machine` free of dict spelunking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..api.models import ROLES, Role
from ..manifests import labels

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclass(frozen=True)
class PodObs:
    name: str
    uid: str
    phase: PodPhase
    role: Role | None = None
    index: int | None = None
    restart: int | None = None
    """The job's restart count when the pod was created (label tfps.dev/restart)."""
    deleting: bool = False
    scheduled: bool = False
    unschedulable_message: str = ""
    ready: bool = False
    exit_code: int | None = None
    message: str = ""
    """The container's termination message (or the pod's status message)."""
    finished_at: datetime | None = None
    component: str | None = None
    """The ``tfps.dev/component`` label: a trainer role, or the export Job's pods."""
    ip: str = ""
    """``status.podIP`` (the progress monitor dials the chief there)."""
    waiting_reason: str = ""
    """The container's waiting reason (``ImagePullBackOff``...), while it has not started."""
    waiting_message: str = ""

    @property
    def active(self) -> bool:
        return self.phase in ("Pending", "Running", "Unknown") and not self.deleting


@dataclass(frozen=True)
class BatchJobObs:
    name: str
    uid: str
    complete: bool = False
    failed: bool = False
    message: str = ""
    deleting: bool = False


@dataclass(frozen=True)
class Observed:
    pods: tuple[PodObs, ...] = ()
    """Trainer pods (any restart generation)."""
    export_pods: tuple[PodObs, ...] = ()
    export_job: BatchJobObs | None = None
    preflight_pods: tuple[PodObs, ...] = ()
    preflight_job: BatchJobObs | None = None
    existing: frozenset[str] = field(default_factory=frozenset)
    """``Kind/name`` of the other children that exist: Service, NetworkPolicy, PersistentVolumeClaim."""

    def pod(self, name: str) -> PodObs | None:
        return next((p for p in self.pods if p.name == name), None)


def _time(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None


def _int(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _role(raw: str | None) -> Role | None:
    return next((r for r in ROLES if r == raw), None)


def pod_obs(pod: Mapping[str, Any]) -> PodObs:
    meta, status = pod.get("metadata", {}), pod.get("status") or {}
    lbl = meta.get("labels") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    sched = conds.get("PodScheduled") or {}
    ready = conds.get("Ready") or {}
    exit_code, message, finished = None, status.get("message") or "", None
    waiting: dict[str, Any] = {}
    for cs in status.get("containerStatuses") or []:
        waiting = waiting or (cs.get("state") or {}).get("waiting") or {}
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if term:
            exit_code = term.get("exitCode")
            message = term.get("message") or term.get("reason") or message
            finished = _time(term.get("finishedAt"))
            break
    return PodObs(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        phase=status.get("phase") or "Pending",
        role=_role(lbl.get(labels.REPLICA_TYPE)),
        index=_int(lbl.get(labels.REPLICA_INDEX)),
        restart=_int(lbl.get(labels.RESTART)),
        deleting=bool(meta.get("deletionTimestamp")),
        scheduled=sched.get("status") == "True" or bool((pod.get("spec") or {}).get("nodeName")),
        unschedulable_message=(sched.get("message") or "") if sched.get("status") == "False" else "",
        ready=ready.get("status") == "True",
        exit_code=exit_code,
        message=message.strip(),
        finished_at=finished,
        component=lbl.get(labels.COMPONENT),
        ip=status.get("podIP") or "",
        waiting_reason=waiting.get("reason") or "",
        waiting_message=(waiting.get("message") or "")[:500],
    )


def batch_job_obs(job: Mapping[str, Any]) -> BatchJobObs:
    meta, status = job.get("metadata", {}), job.get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
    failed = conds.get("Failed") or {}
    return BatchJobObs(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        complete="Complete" in conds,
        failed=bool(failed),
        message=" ".join(filter(None, (failed.get("reason"), failed.get("message")))),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def _batch_job(raw: Mapping[str, Any] | BatchJobObs | None) -> BatchJobObs | None:
    return raw if raw is None or isinstance(raw, BatchJobObs) else batch_job_obs(raw)


def observe(
    pods: Iterable[Mapping[str, Any] | PodObs],
    export_job: Mapping[str, Any] | BatchJobObs | None,
    existing: Iterable[str],
    preflight_job: Mapping[str, Any] | BatchJobObs | None = None,
) -> Observed:
    """Split the job's pods (selected by ``tfps.dev/job-name``) into trainer, export and pre-flight pods.

    Takes raw API objects or their already reduced observations (what the operator's watch indexes hold).
    """
    by_component: dict[str, list[PodObs]] = {labels.EXPORT_COMPONENT: [], labels.PREFLIGHT_COMPONENT: []}
    trainer: list[PodObs] = []
    for raw in pods:
        obs = raw if isinstance(raw, PodObs) else pod_obs(raw)
        by_component.get(obs.component or "", trainer).append(obs)
    return Observed(
        pods=tuple(trainer),
        export_pods=tuple(by_component[labels.EXPORT_COMPONENT]),
        export_job=_batch_job(export_job),
        preflight_pods=tuple(by_component[labels.PREFLIGHT_COMPONENT]),
        preflight_job=_batch_job(preflight_job),
        existing=frozenset(existing),
    )
