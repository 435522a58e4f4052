"""What the operator knows of a job's children without asking the API server.

A pass reads nothing from the API server: the operator's informers (:mod:`.informer`) keep the
operator's own children (pods, export Jobs, Services, NetworkPolicies, PVCs, PodGroups, selected on
the server by label, reduced to small observations) by job. Every informer lists before any worker
starts, so a restarted operator sees every child before its first decision.

A watch echoes the operator's own writes a moment later. Until it does, :class:`RecentWrites` holds
them: an object just created counts as existing, an object just deleted counts as going. Without
that, a pass right after a create would create again (a 409 and a GET) and a pass right after a delete
would delete again. An entry ends when the watch reports the object (any event about it: from then
on the index is the truth) or after :data:`RECENT_TTL_SECONDS`, whichever comes first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from ..reconcile.observed import BatchJobObs, PodObs, WorkloadObs, batch_job_obs, pod_obs, workload_obs
from .client import controller_uid

RECENT_TTL_SECONDS = 30.0
"""How long an unechoed write is trusted over the index (a watch that lost an event re-lists sooner)."""

JobKey = tuple[str, str]
"""(namespace, PSTrainingJob name): the key of every index."""

T = TypeVar("T")


class ByJob(Protocol[T]):
    """Records by job: an :class:`~.informer.Informer`, or a dict in tests."""

    def get(self, key: JobKey, default: Iterable[T], /) -> Iterable[T]: ...


@dataclass(frozen=True, slots=True)
class ChildRef:
    """A Service, NetworkPolicy, PVC or PodGroup as the index holds it: its ``Kind/name`` and its controller's uid."""

    key: str
    uid: str
    owner: str | None


def child_ref(kind: str, body: Mapping[str, Any]) -> ChildRef:
    meta = body.get("metadata") or {}
    return ChildRef(key=f"{kind}/{meta.get('name', '')}", uid=meta.get("uid", ""), owner=controller_uid(body))


@dataclass(frozen=True, slots=True)
class Views:
    """The operator's informers, keyed by :data:`JobKey` (or dicts in tests)."""

    pods: ByJob[PodObs]
    export_jobs: ByJob[BatchJobObs]
    children: tuple[ByJob[ChildRef], ...] = ()
    """One index per kind: Services, NetworkPolicies, PersistentVolumeClaims, and PodGroups when the
    operator gang-schedules."""
    workloads: ByJob[WorkloadObs] | None = None
    """Kueue Workloads, when the operator integrates with Kueue."""

    def job_pods(self, key: JobKey) -> list[PodObs]:
        return list(self.pods.get(key, ()))

    def chief(self, key: JobKey, pod_name: str) -> PodObs | None:
        return next((p for p in self.pods.get(key, ()) if p.name == pod_name), None)

    def job_export_jobs(self, key: JobKey) -> list[BatchJobObs]:
        return list(self.export_jobs.get(key, ()))

    def job_workloads(self, key: JobKey) -> list[WorkloadObs]:
        return list(self.workloads.get(key, ())) if self.workloads is not None else []

    def job_children(self, key: JobKey) -> list[ChildRef]:
        return [ref for index in self.children for ref in index.get(key, ())]


ChildRecord = tuple[str, PodObs | BatchJobObs | ChildRef | WorkloadObs]
"""``Kind/name`` and the small record of a child, as the informers keep it."""


def child_record(obj: Mapping[str, Any]) -> ChildRecord:
    """The record of a child from the API server's answer (the answer itself need not be kept)."""
    kind, name = obj.get("kind"), (obj.get("metadata") or {}).get("name", "")
    seen: PodObs | BatchJobObs | ChildRef | WorkloadObs
    if kind == "Pod":
        seen = pod_obs(obj)
    elif kind == "Job":
        seen = batch_job_obs(obj)
    elif kind == "Workload":
        seen = workload_obs(obj)
    else:
        seen = child_ref(str(kind), obj)
    return f"{kind}/{name}", seen


@dataclass
class RecentWrites:
    """One job's creates and deletes that its watches have not echoed yet (see the module docstring)."""

    created: dict[str, tuple[float, PodObs | BatchJobObs | ChildRef | WorkloadObs]] = field(default_factory=dict)
    """``Kind/name`` -> (when, what the create returned)."""
    deleted: dict[str, float] = field(default_factory=dict)
    """uid -> when we deleted it."""

    def record_create(self, obj: Mapping[str, Any] | ChildRecord, now: float | None = None) -> None:
        """A child we created: the API server's answer, or its record (:func:`child_record`)."""
        key, seen = obj if isinstance(obj, tuple) else child_record(obj)
        self.created[key] = (time.monotonic() if now is None else now, seen)

    def record_delete(self, uid: str | None, now: float | None = None) -> None:
        if uid:
            self.deleted[uid] = time.monotonic() if now is None else now

    def seen(self, key: str, uid: str | None) -> None:
        """The watch reported ``key`` (``Kind/name``) with ``uid``: the index now knows it."""
        self.created.pop(key, None)
        if uid:
            self.deleted.pop(uid, None)

    def expire(self, now: float | None = None) -> None:
        cutoff = (time.monotonic() if now is None else now) - RECENT_TTL_SECONDS
        self.created = {k: v for k, v in self.created.items() if v[0] >= cutoff}
        self.deleted = {k: t for k, t in self.deleted.items() if t >= cutoff}

    def _going(self, uid: str) -> bool:
        return uid in self.deleted

    def pods(self, indexed: Iterable[PodObs]) -> list[PodObs]:
        out: dict[str, PodObs] = {}
        for pod in indexed:
            out[pod.name] = replace(pod, deleting=True) if self._going(pod.uid) and not pod.deleting else pod
        for key, (_, obs) in self.created.items():
            if not (key.startswith("Pod/") and isinstance(obs, PodObs)):
                continue
            old = out.get(obs.name)
            # A name can only be created once its previous holder is gone: an older incarnation in
            # the index is stale.
            if old is None or (old.uid != obs.uid and old.deleting):
                out[obs.name] = obs
        return list(out.values())

    def export_job(self, indexed: Iterable[BatchJobObs], name: str) -> BatchJobObs | None:
        found = next((j for j in indexed if j.name == name), None)
        if found is not None and self._going(found.uid) and not found.deleting:
            found = replace(found, deleting=True)
        created = self.created.get(f"Job/{name}")
        if (
            created is not None
            and isinstance(created[1], BatchJobObs)
            and (found is None or (found.uid != created[1].uid and found.deleting))
        ):
            return created[1]
        return found

    def workload(self, indexed: Iterable[WorkloadObs], name: str) -> WorkloadObs | None:
        """The job's Workload: the index's, else the one just created."""
        found = next((w for w in indexed if w.name == name), None)
        if found is not None and self._going(found.uid) and not found.deleting:
            found = replace(found, deleting=True)
        created = self.created.get(f"Workload/{name}")
        if found is None and created is not None and isinstance(created[1], WorkloadObs):
            return created[1]
        return found

    def existing(self, indexed: Iterable[ChildRef], owner: str | None) -> set[str]:
        """``Kind/name`` of the job's Services, NetworkPolicies, PVCs and PodGroup that this job controls."""
        out = {c.key for c in indexed if c.owner == owner and not self._going(c.uid)}
        out |= {k for k, (_, obs) in self.created.items() if isinstance(obs, ChildRef) and obs.owner == owner}
        return out
