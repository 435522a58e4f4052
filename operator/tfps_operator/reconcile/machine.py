"""The PSTrainingJob state machine: (job, status, observed children, now) -> :class:`~.plan.Plan`.

Pure and level-based: it looks only at what exists now and at the status it wrote before, so running
it twice, or after an operator restart, gives the same answer and never a duplicate child.

Phases::

    Pending ──all pods running──► Running ──chief succeeded──► Exporting ──export ok──► Succeeded
       ▲  │                        │  ▲                             │                  (export off)
       │  └─ suspend ─► Suspended  │  │ worker failed: recreated    └─ export failed ─► Failed
       │                           ▼  │
       └────────────── Restarting (chief/PS failed or lost: all pods recreated, restarts+1)
    Failed: BackoffLimitExceeded, DeadlineExceeded, ReplicaFailed, InvalidSpec, ExportFailed,
            ExportPreflightFailed

With export and ``spec.export.preflight`` on, a new job first runs the pre-flight Job (fresh weights,
every requested conversion and verification) while Pending; its trainer pods are created once it has
reported (condition ExportPreflight), or not at all when a required format cannot be exported.

The phases live in their own modules: :mod:`.training` (Pending, Running, Restarting, Suspended),
:mod:`.export` (pre-flight and export), :mod:`.endings` (Succeeded, Failed, cleanup, TTL); this module
orders them and owns what spans them (admission by Kueue, the infrastructure children, validation of a new
run). :mod:`.context` holds one pass's inputs and its plan.

Every trainer pod carries ``tfps.dev/restart`` = ``status.restarts`` at its creation. After a
whole-job restart the older pods are *stale*: they are deleted and replaced, never counted again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..api import podsecurity
from ..api.models import PSTrainingJob, PSTrainingJobStatus
from ..manifests import labels
from ..manifests import workload as wlm
from ..manifests.export_job import export_job
from ..manifests.netpol import network_policy
from ..manifests.podgroup import pod_group
from ..manifests.pods import BuildError, desired_pods
from ..manifests.pvc import storage_claim
from ..manifests.service import headless_service
from ..settings import BuildConfig
from . import conditions as C
from . import kueue, resize, serving
from .context import SUSPENDABLE, TERMINAL, Reconciliation
from .endings import fail, finished
from .export import exporting, preflight, preflight_pending
from .observed import Observed
from .plan import Create, Delete, Event, PatchWorkload, Plan
from .training import deadline_passed, replica_statuses, suspend, training


def reconcile(job: PSTrainingJob, status: PSTrainingJobStatus, obs: Observed, now: datetime, cfg: BuildConfig) -> Plan:
    """Decide what to do for ``job`` given what exists. ``status`` is the job's current status.


    A failed pod recreated alone waits out its crash-loop back-off (:mod:`.crashloop`, recorded in
    ``status.recreations``); until then the failed pod is kept, logs and all.
    """
    r = Reconciliation(job, status, obs, now, cfg)
    if _status_older_than_children(status, obs):
        r.plan.requeue_after = STALE_STATUS_RETRY_SECONDS
        return r.plan
    _decide(r)
    serving.handoff(r)
    _finish_workload(r)
    replica_statuses(r)
    return r.plan


STALE_STATUS_RETRY_SECONDS = 1.0


def _status_older_than_children(status: PSTrainingJobStatus, obs: Observed) -> bool:
    """A live pod labelled with a later run than ``status.restarts`` means this status was read before
    our own restart was written (an operator restarted mid-restart, a lagging read): acting on it
    would delete the new run's pods as stale. Do nothing and look again."""
    if status.phase not in ("Pending", "Running", "Restarting"):
        return False
    return any(p.restart is not None and p.restart > status.restarts and not p.deleting for p in obs.pods)


def _decide(r: Reconciliation) -> None:
    job, now, cfg = r.job, r.now, r.cfg
    if r.status.phase in TERMINAL:
        finished(r)
        return
    refused = podsecurity.refusals(job.spec, relaxed=cfg.relaxes(job.metadata.namespace))
    if refused:
        fail(r, "InvalidSpec", podsecurity.message(refused))
        return
    try:
        asked = desired_pods(job, cfg, r.status.restarts)
        infra = [
            m
            for m in (storage_claim(job), headless_service(job, cfg), network_policy(job, cfg), pod_group(job, cfg))
            if m
        ]
        export_manifest = export_job(job, cfg) if job.spec.export.enabled else None
    except BuildError as exc:
        fail(r, "InvalidSpec", str(exc))
        return
    if r.status.phase is None:
        r.status.phase = "Pending"
        r.event("Normal", "Accepted", "creating the training cluster")
    if r.status.phase in SUSPENDABLE and job.spec.run_policy.suspend:
        suspend(r, "JobSuspended", "runPolicy.suspend is true")
        _queue(r, asked, wanted=False)
        return
    g = _queue(r, asked, wanted=True)
    if not g.admitted:
        suspend(r, g.reason, g.message)
        return
    if r.status.phase == "Suspended":
        r.status.phase = "Pending"
        r.status.start_time = None
        r.status.reason = None
        why = g.message or "runPolicy.suspend is false"
        r.set_condition(C.SUSPENDED, "False", "JobResumed", why)
        r.event("Normal", "JobResumed", f"{why}: creating the pods")
    if r.status.start_time is None:
        r.status.start_time = now
    if deadline_passed(r):
        return
    _ensure(r, infra)
    if r.status.phase == "Exporting":
        exporting(r, export_manifest)
        return
    pods, spare = _run_pods(r, asked, g.workers)
    pods = {n: _placed(m, g) for n, m in pods.items()}
    spare = {n: _placed(m, g) for n, m in spare.items()}
    if not preflight_pending(r) or preflight(r):
        training(r, pods, export_manifest, spare)
        resize.settle(r)
    _validate_new_run(r, [*infra, *pods.values(), *([export_manifest] if export_manifest else [])])


def _run_pods(
    r: Reconciliation, asked: dict[str, dict[str, Any]], admitted_workers: int | None
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The current run's pods at its size (after this pass's resize decision: :mod:`.resize`), and the
    standby workers created beside it before it grows. From here on ``r.job`` is the job at the run's size."""
    job, epoch = r.job, r.status.restarts
    size = resize.run_size(r, admitted_workers)  # may restart the job: a new epoch
    grown = resize.goal(job, admitted_workers)
    as_asked = size == resize.spec_size(job)
    if not as_asked:
        r.job = resize.in_effect(job, size)
    pods = asked if as_asked and epoch == r.status.restarts else desired_pods(r.job, r.cfg, r.status.restarts)
    spare_at = resize.standby(r, size, admitted_workers)
    if not spare_at:
        return pods, {}
    bigger = desired_pods(resize.in_effect(job, grown), r.cfg, r.status.restarts)
    spare = {n: m for n, m in bigger.items() if _is_worker(m, spare_at)}
    return pods, spare


def _is_worker(manifest: dict[str, Any], indices: range) -> bool:
    lbl = manifest["metadata"]["labels"]
    return lbl[labels.REPLICA_TYPE] == "worker" and int(lbl[labels.REPLICA_INDEX]) in indices


def _queue(r: Reconciliation, pods: dict[str, dict[str, Any]], wanted: bool) -> kueue.Gate:
    """A queued job's Workload: created while the job wants to run (``wanted`` False: the user suspended
    it, and the Workload is deleted so that it holds no quota); Kueue's verdict; an evicted Workload's
    admission given back once the pods are gone. Without a queue (or Kueue integration): admitted."""
    job, obs = r.job, r.obs
    if not wlm.queued(job, r.cfg):
        return kueue.Gate(True, kueue.ADMITTED, "")
    wl = obs.workload
    if not wanted:
        if wl is not None and not wl.deleting:
            r.plan.actions.append(Delete("Workload", wl.name, wl.uid))
        return kueue.Gate(False, "JobSuspended", "")
    name, queue = wlm.workload_name(job.metadata.name), wlm.queue_name(job) or ""
    if wl is None:
        pc = wlm.priority_class(job)
        if pc is not None and pc not in obs.priorities:
            return kueue.Gate(False, kueue.WAITING, f"PriorityClass {pc} (schedulingPolicy.priorityClass) not found")
        r.plan.actions.append(Create(wlm.workload(job, pods, obs.priorities.get(pc) if pc else None)))
    g = kueue.gate(name, queue, wl, obs.flavors)
    if kueue.may_release(wl, obs):
        assert wl is not None
        patch = wlm.release_patch(wl.conditions, wl.evicted_reason, g.message, r.now, wl.generation)
        r.plan.actions.append(PatchWorkload(wl.name, wl.resource_version, patch))
    return g


def _placed(pod: dict[str, Any], g: kueue.Gate) -> dict[str, Any]:
    """``pod`` on the flavor Kueue admitted its replica type's pod set to."""
    f = g.placement.get(pod["metadata"]["labels"][labels.REPLICA_TYPE])
    return wlm.place(pod, f.node_labels, f.tolerations) if f is not None else pod


def _finish_workload(r: Reconciliation) -> None:
    """A finished job's Workload is marked Finished: Kueue releases its quota."""
    wl = r.obs.workload
    if r.status.phase in TERMINAL and kueue.must_finish(wl):
        assert wl is not None
        cond = C.get(r.status, C.SUCCEEDED if r.status.phase == "Succeeded" else C.FAILED)
        message = cond.message if cond is not None and cond.message else f"the job {r.status.phase.lower()}"
        patch = wlm.finished_patch(wl.conditions, r.status.phase == "Succeeded", message, r.now, wl.generation)
        r.plan.actions.append(PatchWorkload(wl.name, wl.resource_version, patch))


OPERATOR_BUILT = frozenset({"Service", "NetworkPolicy"})
"""Children built by the operator alone (the job's name, ports and labels, schema-checked selectors):
nothing of the user's in them for an admission check to refuse, so they are not dry-run. A cluster
policy that refuses every Service or NetworkPolicy is met at the create: CreateFailed with the
server's words, retried with back-off, like any refused create of a running job's child."""


def _validate_new_run(r: Reconciliation, children: list[dict[str, Any]]) -> None:
    """A run none of whose pods exist yet, about to create children: have the API server validate the
    ones made from the user's templates first, one pod of each replica type (see :attr:`Plan.validate`)."""
    if r.status.phase in TERMINAL or not r.plan.creates():
        return
    if any(p.restart == r.status.restarts and not p.deleting for p in r.obs.pods):
        return
    seen = {c.key for c in r.plan.creates()}
    candidates = [c.manifest for c in r.plan.creates()] + [
        m for m in children if f"{m['kind']}/{m['metadata']['name']}" not in seen
    ]
    # The pods of one replica type come from one template and differ only in name, index and TF_CONFIG:
    # what the API server would refuse in one it refuses in all, so one of each is asked about.
    roles: set[str] = set()
    for m in candidates:
        if m["kind"] in OPERATOR_BUILT:
            continue
        role = (m["metadata"].get("labels") or {}).get(labels.REPLICA_TYPE) if m["kind"] == "Pod" else None
        if role is None or role not in roles:
            r.plan.validate.append(m)
            roles.add(role or "")


def invalid_spec(status: PSTrainingJobStatus, generation: int | None, message: str, now: datetime) -> Plan:
    """The job's spec cannot be understood at all (it failed validation): Failed/InvalidSpec."""
    st = status.model_copy(deep=True)
    st.observed_generation = generation
    plan = Plan(status=st)
    if st.phase in TERMINAL:
        return plan
    st.phase = "Failed"
    st.completion_time = now
    st.reason = "InvalidSpec"
    C.set_condition(st, C.FAILED, "True", "InvalidSpec", message, now, generation)
    C.clear(st, C.RUNNING, "InvalidSpec", "", now, generation)
    plan.events.append(Event("Warning", "InvalidSpec", message))
    return plan


def creation_failed(
    status: PSTrainingJobStatus, generation: int | None, failures: dict[str, str], now: datetime
) -> tuple[bool, Event | None]:
    """The API server refused to create children (``{"Pod/NAME": "its message"}``): condition
    Created=False/CreateFailed with the server's words. Returns (status changed, Event to post once)."""
    message = "; ".join(f"{key}: {msg}" for key, msg in sorted(failures.items()))
    old = C.get(status, C.CREATED)
    if old is not None and old.status == "False" and old.message == message:
        return False, None
    C.set_condition(status, C.CREATED, "False", "CreateFailed", message, now, generation)
    return True, Event("Warning", "CreateFailed", message)


def _ensure(r: Reconciliation, infra: list[dict[str, Any]]) -> None:
    """Service, NetworkPolicy, PVC and (gang scheduling) PodGroup: created when missing, before any pod."""
    for manifest in infra:
        if f"{manifest['kind']}/{manifest['metadata']['name']}" not in r.obs.existing:
            r.plan.actions.append(Create(manifest))
