"""What the operator observed of a job's children, reduced to the facts the state machine uses.

Parsing raw API objects here keeps :mod:`.machine` free of dict spelunking.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from ..api.models import ROLES, Role
from ..manifests import labels
from ..manifests.pods import CONTAINER

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclass(frozen=True, slots=True)
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
    created_at: datetime | None = None
    image: str = ""
    """The trainer container's image as its status names it (``containerStatuses[].image``)."""
    image_id: str = ""
    """Its ``imageID``: the content address the node resolved (empty until the container has started)."""

    @property
    def active(self) -> bool:
        return self.phase in ("Pending", "Running", "Unknown") and not self.deleting


@dataclass(frozen=True, slots=True)
class BatchJobObs:
    name: str
    uid: str
    complete: bool = False
    failed: bool = False
    message: str = ""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class WorkloadObs:
    """The job's Kueue Workload, as far as the operator acts on it."""

    name: str
    uid: str
    resource_version: str = ""
    generation: int = 0
    quota_reserved: bool = False
    admitted: bool = False
    """Quota reserved and every admission check passed: the job may run."""
    finished: bool = False
    cluster_queue: str = ""
    """The ClusterQueue that admitted it (empty while not admitted)."""
    evicted_reason: str = ""
    """Reason of the Evicted condition while it is True (Preempted, ClusterQueueStopped...), else empty."""
    evicted_message: str = ""
    message: str = ""
    """The QuotaReserved condition's message: why it waits."""
    flavors: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per admitted pod set: (its name, the flavors assigned to its resources)."""
    counts: tuple[tuple[str, int], ...] = ()
    """Per admitted pod set: (its name, the pods admitted: fewer than asked for under partial admission)."""
    conditions: tuple[Mapping[str, Any], ...] = ()
    """The raw conditions (a status patch carries them whole)."""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class Flavor:
    """What an admitted ResourceFlavor adds to a pod: node labels and tolerations."""

    node_labels: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class InferenceServiceObs:
    """A KServe InferenceService, as far as the serving handoff acts on it."""

    name: str
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Its annotations (those of :mod:`~tfps_operator.manifests.inference_service` say which job wrote it)."""
    storage_uri: str = ""
    """``spec.predictor.model.storageUri``."""
    ready: str = ""
    """Its Ready condition's status (True, False, Unknown; empty while it has none)."""
    ready_message: str = ""
    url: str = ""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class ServingObs:
    """What a pass knows of the InferenceService a job names (``spec.serving``)."""

    installed: bool
    """KServe's InferenceService API (serving.kserve.io/v1beta1) is served."""
    isvc: InferenceServiceObs | None = None
    """The InferenceService of that name, if it exists."""
    unreadable: str = ""
    """Why it could not be read (the API server's words), when it could not."""


@dataclass(frozen=True, slots=True)
class Observed:
    pods: tuple[PodObs, ...] = ()
    """Trainer pods (any restart generation)."""
    export_pods: tuple[PodObs, ...] = ()
    export_job: BatchJobObs | None = None
    preflight_pods: tuple[PodObs, ...] = ()
    preflight_job: BatchJobObs | None = None
    existing: frozenset[str] = field(default_factory=frozenset)
    """``Kind/name`` of the other children that exist: Service, NetworkPolicy, PersistentVolumeClaim."""
    workload: WorkloadObs | None = None
    """The job's Kueue Workload (a queued job)."""
    flavors: Mapping[str, Flavor] = field(default_factory=dict)
    """The ResourceFlavors the Workload's admission names, by name (those the operator could read)."""
    priorities: Mapping[str, int] = field(default_factory=dict)
    """Values of the PriorityClasses the job names, by name (those that exist)."""
    serving: ServingObs | None = None
    """The InferenceService of ``spec.serving``, looked up for a Succeeded job that asks to be served (None:
    not looked up in this pass)."""

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
    statuses = status.get("containerStatuses") or []
    trainer = next((cs for cs in statuses if cs.get("name") == CONTAINER), statuses[0] if statuses else {})
    for cs in statuses:
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
        created_at=_time(meta.get("creationTimestamp")),
        image=trainer.get("image") or "",
        image_id=trainer.get("imageID") or "",
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


def workload_obs(wl: Mapping[str, Any]) -> WorkloadObs:
    meta, status = wl.get("metadata", {}), wl.get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or []}

    def true(type_: str) -> bool:
        return (conds.get(type_) or {}).get("status") == "True"

    evicted = conds.get("Evicted") if true("Evicted") else None
    admission = status.get("admission") or {}
    assignments = admission.get("podSetAssignments") or []
    return WorkloadObs(
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        resource_version=meta.get("resourceVersion", ""),
        generation=int(meta.get("generation") or 0),
        quota_reserved=true("QuotaReserved") and bool(status.get("admission")),
        admitted=true("Admitted") and bool(status.get("admission")),
        finished=true("Finished"),
        cluster_queue=admission.get("clusterQueue") or "",
        evicted_reason=(evicted or {}).get("reason") or "",
        evicted_message=(evicted or {}).get("message") or "",
        message=(conds.get("QuotaReserved") or {}).get("message") or "",
        flavors=tuple((a.get("name", ""), tuple(sorted(set((a.get("flavors") or {}).values())))) for a in assignments),
        counts=tuple((a.get("name", ""), int(a["count"])) for a in assignments if isinstance(a.get("count"), int)),
        conditions=tuple(status.get("conditions") or ()),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def inference_service_obs(isvc: Mapping[str, Any]) -> InferenceServiceObs:
    meta, spec, status = isvc.get("metadata") or {}, isvc.get("spec") or {}, isvc.get("status") or {}
    ready: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    model = (spec.get("predictor") or {}).get("model") or {}
    return InferenceServiceObs(
        name=meta.get("name", ""),
        resource_version=meta.get("resourceVersion", ""),
        annotations=dict(meta.get("annotations") or {}),
        storage_uri=model.get("storageUri") or "",
        ready=ready.get("status") or "",
        ready_message=(ready.get("message") or ready.get("reason") or "")[:300],
        url=status.get("url") or "",
        deleting=bool(meta.get("deletionTimestamp")),
    )


def flavor(rf: Mapping[str, Any]) -> Flavor:
    spec = rf.get("spec") or {}
    return Flavor(node_labels=dict(spec.get("nodeLabels") or {}), tolerations=tuple(spec.get("tolerations") or ()))


def _batch_job(raw: Mapping[str, Any] | BatchJobObs | None) -> BatchJobObs | None:
    return raw if raw is None or isinstance(raw, BatchJobObs) else batch_job_obs(raw)


def observe(
    pods: Iterable[Mapping[str, Any] | PodObs],
    export_job: Mapping[str, Any] | BatchJobObs | None,
    existing: Iterable[str],
    preflight_job: Mapping[str, Any] | BatchJobObs | None = None,
    workload: WorkloadObs | None = None,
    flavors: Mapping[str, Flavor] | None = None,
    priorities: Mapping[str, int] | None = None,
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
        workload=workload,
        flavors=flavors or {},
        priorities=priorities or {},
    )


def with_created(obs: Observed, manifests: Iterable[Mapping[str, Any]]) -> Observed:
    """``obs`` with ``manifests`` added as the API server reports children right after their creation:
    pods Pending and unscheduled, Jobs without a condition, a Workload not yet admitted."""
    pods, export_pods, preflight_pods = list(obs.pods), list(obs.export_pods), list(obs.preflight_pods)
    export_job, preflight_job, workload = obs.export_job, obs.preflight_job, obs.workload
    existing = set(obs.existing)
    for m in manifests:
        kind, meta = m.get("kind"), m.get("metadata") or {}
        component = (meta.get("labels") or {}).get(labels.COMPONENT)
        new = {**m, "status": {}}
        if kind == "Pod":
            {labels.EXPORT_COMPONENT: export_pods, labels.PREFLIGHT_COMPONENT: preflight_pods}.get(
                component or "", pods
            ).append(pod_obs(new))
        elif kind == "Job" and component == labels.PREFLIGHT_COMPONENT:
            preflight_job = batch_job_obs(new)
        elif kind == "Job":
            export_job = batch_job_obs(new)
        elif kind == "Workload":
            workload = workload_obs(new)
        else:
            existing.add(f"{kind}/{meta.get('name', '')}")
    return replace(
        obs,
        pods=tuple(pods),
        export_pods=tuple(export_pods),
        preflight_pods=tuple(preflight_pods),
        export_job=export_job,
        preflight_job=preflight_job,
        workload=workload,
        existing=frozenset(existing),
    )
