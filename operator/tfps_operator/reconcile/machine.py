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

Every trainer pod carries ``tfps.dev/restart`` = ``status.restarts`` at its creation. After a
whole-job restart the older pods are *stale*: they are deleted and replaced, never counted again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tfps_trainer.export.result import ExportFailed, PreflightReport

from ..api import podsecurity
from ..api.models import (
    Artifact,
    CheckpointStatus,
    ExportStatus,
    FailedArtifact,
    PSTrainingJob,
    PSTrainingJobStatus,
    ReplicaStatus,
    Role,
    replica_counts,
)
from ..manifests import labels, names
from ..manifests import workload as wlm
from ..manifests.export_job import export_job
from ..manifests.netpol import network_policy
from ..manifests.podgroup import KIND as KIND_PODGROUP
from ..manifests.podgroup import gang_enabled, min_member, pod_group, pod_group_name
from ..manifests.pods import BuildError, desired_pods
from ..manifests.pvc import storage_claim
from ..manifests.service import headless_service
from ..settings import BuildConfig
from . import conditions as C
from . import crashloop, gang, kueue, messages, stall, waiting
from .failure_policy import Decision, on_failure
from .observed import Observed, PodObs
from .plan import Create, Delete, DeleteOwner, DeletePods, Event, PatchWorkload, Plan

TERMINAL = ("Succeeded", "Failed")
TRAINING = (None, "Pending", "Running", "Restarting", "Suspended")
SUSPENDABLE = (*TRAINING, "Exporting")


class _Reconciliation:
    """One call of :func:`reconcile`: its inputs (the job, the observed children, now, the build settings)
    and the plan being built, whose ``status`` every step edits in place."""

    def __init__(self, job: PSTrainingJob, status: PSTrainingJobStatus, obs: Observed, now: datetime, cfg: BuildConfig):
        self.job, self.obs, self.now, self.cfg = job, obs, now, cfg
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

    def delete_pod(self, pod: PodObs) -> None:
        action = Delete("Pod", pod.name, pod.uid)
        if not pod.deleting and action not in self.plan.actions:
            self.plan.actions.append(action)


def reconcile(job: PSTrainingJob, status: PSTrainingJobStatus, obs: Observed, now: datetime, cfg: BuildConfig) -> Plan:
    """Decide what to do for ``job`` given what exists. ``status`` is the job's current status.

    A failed pod recreated alone waits out its crash-loop back-off (:mod:`.crashloop`, recorded in
    ``status.recreations``); until then the failed pod is kept, logs and all.
    """
    r = _Reconciliation(job, status, obs, now, cfg)
    if _status_older_than_children(status, obs):
        r.plan.requeue_after = STALE_STATUS_RETRY_SECONDS
        return r.plan
    _decide(r)
    _finish_workload(r)
    _replica_statuses(r)
    return r.plan


STALE_STATUS_RETRY_SECONDS = 1.0


def _status_older_than_children(status: PSTrainingJobStatus, obs: Observed) -> bool:
    """A live pod labelled with a later run than ``status.restarts`` means this status was read before
    our own restart was written (an operator restarted mid-restart, a lagging read): acting on it
    would delete the new run's pods as stale. Do nothing and look again."""
    if status.phase not in ("Pending", "Running", "Restarting"):
        return False
    return any(p.restart is not None and p.restart > status.restarts and not p.deleting for p in obs.pods)


def _decide(r: _Reconciliation) -> None:
    job, now, cfg = r.job, r.now, r.cfg
    if r.status.phase in TERMINAL:
        _finished(r)
        return
    refused = podsecurity.refusals(job.spec, relaxed=cfg.relaxes(job.metadata.namespace))
    if refused:
        _fail(r, "InvalidSpec", podsecurity.message(refused))
        return
    try:
        pods = desired_pods(job, cfg, r.status.restarts)
        infra = [
            m
            for m in (storage_claim(job), headless_service(job, cfg), network_policy(job, cfg), pod_group(job, cfg))
            if m
        ]
        export_manifest = export_job(job, cfg) if job.spec.export.enabled else None
    except BuildError as exc:
        _fail(r, "InvalidSpec", str(exc))
        return
    if r.status.phase is None:
        r.status.phase = "Pending"
        r.event("Normal", "Accepted", "creating the training cluster")
    if r.status.phase in SUSPENDABLE and job.spec.run_policy.suspend:
        _suspend(r, "JobSuspended", "runPolicy.suspend is true")
        _queue(r, pods, wanted=False)
        return
    g = _queue(r, pods, wanted=True)
    if not g.admitted:
        _suspend(r, g.reason, g.message)
        return
    pods = {n: _placed(m, g) for n, m in pods.items()}
    if r.status.phase == "Suspended":
        r.status.phase = "Pending"
        r.status.start_time = None
        r.status.reason = None
        why = g.message or "runPolicy.suspend is false"
        r.set_condition(C.SUSPENDED, "False", "JobResumed", why)
        r.event("Normal", "JobResumed", f"{why}: creating the pods")
    if r.status.start_time is None:
        r.status.start_time = now
    if _deadline_passed(r):
        return
    _ensure(r, infra)
    if r.status.phase == "Exporting":
        _exporting(r, export_manifest)
        return
    if not _preflight_pending(r) or _preflight(r):
        _training(r, pods, export_manifest)
    _validate_new_run(r, [*infra, *pods.values(), *([export_manifest] if export_manifest else [])])


def _queue(r: _Reconciliation, pods: dict[str, dict[str, Any]], wanted: bool) -> kueue.Gate:
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


def _finish_workload(r: _Reconciliation) -> None:
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


def _validate_new_run(r: _Reconciliation, children: list[dict[str, Any]]) -> None:
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


# --- phases ---------------------------------------------------------------------------------------


def _ensure(r: _Reconciliation, infra: list[dict[str, Any]]) -> None:
    """Service, NetworkPolicy, PVC and (gang scheduling) PodGroup: created when missing, before any pod."""
    for manifest in infra:
        if f"{manifest['kind']}/{manifest['metadata']['name']}" not in r.obs.existing:
            r.plan.actions.append(Create(manifest))


def _training(r: _Reconciliation, desired: dict[str, dict[str, Any]], export_manifest: dict[str, Any] | None) -> None:
    job, st, obs = r.job, r.status, r.obs
    epoch = st.restarts
    current = {p.name: p for p in obs.pods if p.restart == epoch and p.name in desired}
    for pod in obs.pods:  # from an earlier run of the job, or no longer in the spec
        if pod.name not in current:
            r.delete_pod(pod)

    chief = current.get(names.pod_name(job.metadata.name, "chief", 0))
    if chief is not None and chief.phase == "Succeeded" and not chief.deleting:
        _final_checkpoint(r, chief)
        _training_done(r, export_manifest)
        return

    decisions: list[tuple[PodObs | None, str, Decision]] = []
    for pod in current.values():
        if pod.deleting or pod.role is None:
            continue
        unexpected_exit = pod.phase == "Succeeded" and pod.role in ("ps", "worker")  # servers never exit on their own
        if pod.phase == "Failed" or unexpected_exit:
            decisions.append((pod, pod.role, _failure_decision(r, pod.role, pod.exit_code, detail=pod.message)))
    if st.phase == "Running":  # every pod existed: a missing chief or PS is a lost one
        for name, manifest in desired.items():
            role = manifest["metadata"]["labels"]["tfps.dev/replica-type"]
            if name not in current and role in ("chief", "ps") and obs.pod(name) is None:
                decisions.append((None, role, _failure_decision(r, role, None, vanished=name)))

    fatal = next((d for _, _, d in decisions if d.action == "fail_job"), None)
    if fatal:
        _fail(r, fatal.reason, fatal.message)
        return
    restart = next((d for _, _, d in decisions if d.action == "restart_job"), None)
    if restart:
        _restart_job(r, restart, current)
        return
    for failed, _, d in decisions:  # recreate_pod: delete now (or after its backoff), create once the name is free
        assert failed is not None
        pod = failed
        entry = st.recreations.get(pod.name)
        not_before = crashloop.not_before(entry, r.now)
        if not_before is not None:
            r.plan.requeue((not_before - r.now).total_seconds())
            continue
        r.event("Warning", d.reason, f"{pod.name}: {d.message}")
        r.delete_pod(pod)
        st.recreations = {**st.recreations, pod.name: crashloop.record(entry, r.now)}
        r.plan.replaced.append(pod.name)

    replacing = {pod.name for pod, _, _ in decisions if pod is not None}
    group_ready = gang.may_create_pods(gang_enabled(r.cfg), f"{KIND_PODGROUP}/{pod_group_name(job)}" in obs.existing)
    for name, manifest in desired.items():
        if name in current or obs.pod(name) is not None or not group_ready:
            continue  # exists, its previous incarnation is still going away, or its PodGroup is not there yet
        r.plan.actions.append(Create(manifest))
        if st.phase == "Running":
            role = manifest["metadata"]["labels"]["tfps.dev/replica-type"]
            r.plan.recreated.append(role)
            r.event("Normal", "ReplicaRecreated", f"{name} recreated with the same name")

    _training_phase(r, desired, current, replacing)


def _failure_decision(
    r: _Reconciliation, role: Role, exit_code: int | None, vanished: str | None = None, detail: str = ""
) -> Decision:
    spec = getattr(r.job.spec.replicas, role)
    d = on_failure(
        role,
        spec.restart_policy,
        exit_code,
        r.status.restarts - r.status.preemptions,
        r.job.spec.run_policy.backoff_limit,
        _recreated(r, role),
        spec.recreate_limit,
        detail[-2000:],
    )
    if vanished:
        d = Decision(d.action, d.reason, d.message.replace(f"{role} vanished", f"{vanished} disappeared"), d.counted)
    return d


def _recreated(r: _Reconciliation, role: str) -> int:
    """Recreations of ``role``'s pods so far (from ``status.recreations``)."""
    prefix = f"{r.job.metadata.name}-{role}-"
    return sum(rec.total for name, rec in r.status.recreations.items() if name.startswith(prefix))


def _training_phase(
    r: _Reconciliation, desired: dict[str, dict[str, Any]], current: dict[str, PodObs], replacing: set[str]
) -> None:
    st = r.status
    live = [p for p in current.values() if not p.deleting and p.name not in replacing]
    all_there = len(live) == len(desired)
    # An evaluator that finished its last evaluation is done, not missing.
    running = all_there and all(
        p.phase == "Running" or (p.phase == "Succeeded" and p.role == "evaluator") for p in live
    )
    unscheduled = [p for p in live if not p.scheduled]
    if live and not unscheduled:
        r.set_condition(C.SCHEDULED, "True", "AllPodsScheduled", "")
    elif unscheduled:
        detail = "; ".join(
            f"{p.name}: {p.unschedulable_message}" if p.unschedulable_message else p.name for p in unscheduled[:5]
        )
        r.set_condition(
            C.SCHEDULED,
            "False",
            "Unschedulable" if any(p.unschedulable_message for p in unscheduled) else "Scheduling",
            f"{len(unscheduled)} pod(s) not scheduled: {detail}",
        )
    if gang_enabled(r.cfg) and live:
        says = next((p.unschedulable_message for p in unscheduled if p.unschedulable_message), "")
        v = gang.condition(pod_group_name(r.job), min_member(r.job), len(live) - len(unscheduled), len(desired), says)
        r.set_condition(gang.GANG_SCHEDULED, v.status, v.reason, v.message)
    _waiting(r, live)
    if all_there and not C.is_true(st, C.CREATED):
        r.set_condition(C.CREATED, "True", "ChildrenCreated", f"{len(desired)} pods, Service and NetworkPolicy created")

    if running and st.phase != "Running":
        st.phase = "Running"
        r.set_condition(C.RUNNING, "True", "AllReplicasRunning", f"{len(desired)} pods running")
        r.clear(C.RESTARTING, "AllReplicasRunning", "")
        r.event("Normal", "Running", f"all {len(desired)} pods are running")
    elif st.phase not in ("Running", "Restarting"):
        st.phase = "Pending"
    _stalled(r, current)


def _waiting(r: _Reconciliation, live: list[PodObs]) -> None:
    """Condition Waiting (rule in :mod:`.waiting`), ``status.reason``, and an Event when the reason changes."""
    w = waiting.why(live)
    old = C.get(r.status, waiting.WAITING)
    if w is None:
        if old is not None and old.status == "True":
            r.clear(waiting.WAITING, "PodsStarted", "")
            r.status.reason = None
        return
    if old is None or old.status != "True" or old.reason != w.reason:
        r.event("Warning", w.reason, w.message)
    r.set_condition(waiting.WAITING, "True", w.reason, w.message)
    r.status.reason = w.reason


def _stalled(r: _Reconciliation, current: dict[str, PodObs]) -> None:
    """The Stalled condition (rule in :mod:`.stall`), an Event when it turns True, a wake-up at the deadline;
    ``runPolicy.stallPolicy`` Restart or Fail acts on it."""
    bound = stall.bound_seconds(r.job.spec.run_policy.stall_seconds, r.cfg.stall_seconds)
    verdict = stall.evaluate(r.status, bound, r.now)
    if verdict is None:
        r.clear(stall.STALLED, "NotRunning" if r.status.phase != "Running" else "StallCheckOff", "")
    elif verdict.stalled:
        if r.set_condition(stall.STALLED, "True", stall.REASON, verdict.message):
            r.event("Warning", stall.STALLED, verdict.message)
        policy = r.job.spec.run_policy.stall_policy
        backoff = r.job.spec.run_policy.backoff_limit
        if policy == "Fail":
            _fail(r, stall.STALLED, f"{verdict.message} (stallPolicy Fail)")
        elif policy == "Restart" and r.status.restarts - r.status.preemptions >= backoff:
            _fail(
                r,
                "BackoffLimitExceeded",
                f"{verdict.message}; stallPolicy Restart, but backoffLimit {backoff} is used up",
            )
        elif policy == "Restart":
            _restart_job(
                r,
                Decision(
                    "restart_job",
                    "StallRestart",
                    f"{verdict.message}; stallPolicy Restart: restarting the job from the latest checkpoint",
                ),
                current,
            )
    else:
        if C.is_true(r.status, stall.STALLED):
            r.event("Normal", stall.RESUMED, "a new checkpoint was written: no longer stalled")
        r.clear(stall.STALLED, stall.RESUMED, "")
        if verdict.recheck_after is not None:
            r.plan.requeue(verdict.recheck_after)


def _replica_statuses(r: _Reconciliation) -> None:
    """Counts of the current run's pods as they will be after this plan: pods being deleted (now or
    by this plan) no longer count, so a finished job shows what is really left."""
    counts = replica_counts(r.job)
    going = {a.name for a in r.plan.deletes() if a.kind == "Pod"}
    pods = [p for p in r.obs.pods if p.restart == r.status.restarts and p.name not in going and not p.deleting]
    out: dict[str, ReplicaStatus] = {}
    for role, n in counts.items():
        if n == 0:
            continue
        mine = [p for p in pods if p.role == role]
        out[role] = ReplicaStatus(
            active=sum(p.active for p in mine),
            ready=sum(p.phase == "Running" and p.ready for p in mine),
            succeeded=sum(p.phase == "Succeeded" for p in mine),
            failed=sum(p.phase == "Failed" for p in mine),
            recreated=_recreated(r, role),
        )
    r.status.replica_statuses = out  # type: ignore[assignment]
    running_workers = sum(p.role == "worker" and p.phase == "Running" for p in pods)
    r.status.workers = f"{running_workers}/{counts['worker']}"  # the Workers printer column, e.g. "2/3"


def _restart_job(r: _Reconciliation, d: Decision, current: dict[str, PodObs]) -> None:
    st = r.status
    st.restarts += 1
    if not d.counted:
        st.preemptions += 1
    st.phase = "Restarting"
    r.plan.job_restarted = True
    r.set_condition(C.RESTARTING, "True", d.reason, d.message)
    r.clear(C.RUNNING, d.reason, d.message)
    r.event("Warning", d.reason, d.message)
    for pod in current.values():  # now stale (restart label < restarts): replaced once gone
        r.delete_pod(pod)


def _final_checkpoint(r: _Reconciliation, chief: PodObs) -> None:
    """The chief's success summary names its final checkpoint. The progress monitor polls only while
    the job is Running, so a short run (or the last interval of any run) is only seen here."""
    final = messages.final_checkpoint(chief.message)
    known = r.status.checkpoint.step if r.status.checkpoint and r.status.checkpoint.step is not None else -1
    if final is not None and final.path is not None and final.step > known:
        r.status.checkpoint = CheckpointStatus(step=final.step, path=final.path, time=chief.finished_at or r.now)


def _training_done(r: _Reconciliation, export_manifest: dict[str, Any] | None) -> None:
    """One Event for the transition (an Event is an API write: one per job transition, not per step)."""
    st = r.status
    r.clear(C.RUNNING, "TrainingSucceeded", "the chief finished training")
    r.clear(C.RESTARTING, "TrainingSucceeded", "")
    if export_manifest is not None:
        export_name = export_manifest["metadata"]["name"]
        st.phase = "Exporting"
        st.export = ExportStatus(job_name=export_name)
        r.set_condition(C.EXPORTING, "True", "ExportStarted", f"export Job {export_name} created")
        r.event(
            "Normal",
            "TrainingSucceeded",
            f"the chief finished training; exporting the final checkpoint with Job {export_name}",
        )
        _exporting(r, export_manifest)
    else:
        r.event("Normal", "TrainingSucceeded", "the chief finished training; export is disabled")
        _succeed(r, "TrainingSucceeded", "training finished; export is disabled", event=False)


def _preflight_pending(r: _Reconciliation) -> bool:
    """A new job with export and pre-flight on that has no pre-flight verdict yet (a job whose pods already
    exist, e.g. started by an operator without pre-flight, is not held back)."""
    e = r.job.spec.export
    # A script-mode program's model exists only after training: nothing to check before, unless a
    # contract module does the export.
    return (
        e.enabled
        and e.preflight
        and r.job.spec.model.module is not None
        and r.status.phase == "Pending"
        and r.status.restarts == 0
        and not r.obs.pods
        and C.get(r.status, C.EXPORT_PREFLIGHT) is None
    )


def _preflight(r: _Reconciliation) -> bool:
    """Run the pre-flight Job and act on its verdict; True when training may start now."""
    manifest = export_job(r.job, r.cfg, preflight=True)
    name = manifest["metadata"]["name"]
    pj = r.obs.preflight_job
    if pj is None or pj.deleting:
        if pj is None and not any(isinstance(a, Create) and a.key == f"Job/{name}" for a in r.plan.actions):
            r.plan.actions.append(Create(manifest))
        return False
    pod = _last(p for p in r.obs.preflight_pods if p.phase in ("Succeeded", "Failed"))
    if pod is None and not (pj.complete or pj.failed):
        return False
    report = messages.preflight_report(pod.message) if pod else None
    if report is None or isinstance(report, ExportFailed) and report.reason in ("InternalError", "Interrupted"):
        why = (
            f"{report.reason}: {report.message}"
            if report is not None
            else (f"exit code {pod.exit_code}: {pod.message[-300:]}" if pod else pj.message or "no result")
        )
        r.set_condition(
            C.EXPORT_PREFLIGHT,
            "False",
            "PreflightDidNotRun",
            f"pre-flight Job {name} gave no verdict ({why}); training anyway",
        )
        r.event("Warning", "PreflightDidNotRun", f"export pre-flight gave no verdict ({why}); training anyway")
        return True
    if isinstance(report, ExportFailed):
        _fail(r, "ExportPreflightFailed", f"export pre-flight: {report.reason}: {report.message}")
        return False
    assert isinstance(report, PreflightReport)  # the pre-flight pod writes a report, or fails
    if not report.ok:
        failed = "; ".join(f.message for f in report.failed if f.label in report.required_failed)
        _fail(
            r,
            "ExportPreflightFailed",
            f"export pre-flight: required format(s) {', '.join(report.required_failed)} cannot be exported: {failed}",
        )
        return False
    if report.failed:
        message = "will not be exported: " + "; ".join(f.message for f in report.failed)
        r.set_condition(C.EXPORT_PREFLIGHT, "False", "FormatsWillFail", message)
        r.event("Warning", "ExportPreflightWarning", message)
        return True
    r.set_condition(
        C.EXPORT_PREFLIGHT,
        "True",
        "PreflightPassed",
        "converted and verified with fresh weights: "
        + ", ".join(report.passed)
        + ("; " + "; ".join(report.warnings) if report.warnings else ""),
    )
    return True


def _exporting(r: _Reconciliation, manifest: dict[str, Any] | None) -> None:
    _cleanup(r)
    ej = r.obs.export_job
    if manifest is None:  # export was switched off after training finished
        _succeed(r, "TrainingSucceeded", "training finished; export is disabled")
        return
    name = manifest["metadata"]["name"]
    if ej is None:
        if not any(isinstance(a, Create) and a.key == f"Job/{name}" for a in r.plan.actions):
            r.plan.actions.append(Create(manifest))
        return
    if ej.complete:
        pod = _last(p for p in r.obs.export_pods if p.phase == "Succeeded")
        result = messages.export_result(pod.message if pod else "")
        if isinstance(result, str):
            _fail(r, "ExportFailed", f"export Job {name} completed but left no usable result: {result}")
            return
        _record_export(r, name, result)
        if not result.ok:
            _fail(r, "ExportFailed", f"{result.reason}: {result.message}")
            return
        formats = ", ".join(_label(a.format, a.quantization) for a in result.artifacts) or "see manifest"
        r.clear(C.EXPORTING, "ExportSucceeded", f"exported step {result.step} to {result.path}")
        _succeed(r, "ExportSucceeded", f"exported checkpoint step {result.step} to {result.path} ({formats})")
    elif ej.failed:
        pod = _last(p for p in r.obs.export_pods if p.phase == "Failed")
        result = messages.export_result(pod.message) if pod else "no pod"
        if not isinstance(result, str) and not result.ok:
            _record_export(r, name, result)
        _fail(r, "ExportFailed", _export_failure(r, name, ej.message))


def _label(fmt: str, quantization: str | None) -> str:
    return f"{fmt} ({quantization})" if quantization not in (None, "none") else fmt


def _record_export(r: _Reconciliation, name: str, result: Any) -> None:
    """status.export from the exporter's result (also a failed one that published what passed), and the
    ExportComplete condition with an Event per format that was not exported."""
    if result.ok or result.artifacts or result.failed:
        r.status.export = ExportStatus(
            job_name=name,
            step=result.step,
            path=result.path,
            artifacts=[
                Artifact(
                    format=a.format,
                    path=a.path,
                    bytes=a.bytes,
                    sha256=a.sha256,
                    max_error=a.max_error,
                    quantization=a.quantization,
                )
                for a in result.artifacts
            ],
            failed=[
                FailedArtifact(format=f.format, quantization=f.quantization, reason=f.reason, message=f.message)
                for f in result.failed
            ],
        )
    if result.failed:
        not_exported = ", ".join(f.label for f in result.failed)
        r.set_condition(
            C.EXPORT_COMPLETE,
            "False",
            "FormatsFailed",
            f"not exported: {not_exported} (status.export.failed has the reasons)",
        )
        for f in result.failed:
            r.event("Warning", "ExportFormatFailed", f"{f.label} not exported: {f.message}")
    elif result.ok:
        r.set_condition(
            C.EXPORT_COMPLETE, "True", "AllFormatsExported", "every requested format was exported and verified"
        )


def _export_failure(r: _Reconciliation, name: str, job_message: str) -> str:
    pod = _last(p for p in r.obs.export_pods if p.phase == "Failed")
    if pod is not None and (why := messages.export_failure(pod.exit_code, pod.message)) is not None:
        return why
    return f"export Job {name} failed: {job_message or 'no message'}"


def _last(pods: Any) -> PodObs | None:
    pods = list(pods)
    return max(pods, key=lambda p: (p.finished_at is not None, p.finished_at or 0, p.name)) if pods else None


def _suspend(r: _Reconciliation, reason: str, why: str) -> None:
    """Delete the chief first: on SIGTERM it saves a checkpoint of its last step, which needs the
    parameter servers; the other pods go once the chief has stopped. An export in progress is
    stopped too (on resume the chief finds the final checkpoint and the export runs again)."""
    st = r.status
    chief_name = names.pod_name(r.job.metadata.name, "chief", 0)
    chief = r.obs.pod(chief_name)
    chief_stopping = chief is not None and chief.phase in _UNFINISHED
    for pod in r.obs.pods:
        if pod.name == chief_name or not chief_stopping:
            r.delete_pod(pod)
    if r.obs.export_job is not None and not r.obs.export_job.deleting:
        r.plan.actions.append(Delete("Job", r.obs.export_job.name, r.obs.export_job.uid))
    if st.phase != "Suspended" or st.reason != reason:
        if st.phase != "Suspended":
            pods = " (deleting the pods)" if any(p.active for p in r.obs.pods) else ""
            r.event("Warning" if reason == kueue.EVICTED else "Normal", reason, f"{why}{pods}")
        st.phase = "Suspended"
        st.start_time = None  # the deadline clock restarts on resume, as for a batch/v1 Job
        st.reason = reason
        r.clear(C.RUNNING, reason, "")
    r.set_condition(C.SUSPENDED, "True", reason, why)


def _deadline_passed(r: _Reconciliation) -> bool:
    ads = r.job.spec.run_policy.active_deadline_seconds
    if ads is None or r.status.start_time is None:
        return False
    left = (r.status.start_time + timedelta(seconds=ads) - r.now).total_seconds()
    if left > 0:
        r.plan.requeue(left)
        return False
    if r.obs.export_job is not None and not r.obs.export_job.deleting:
        r.plan.actions.append(Delete("Job", r.obs.export_job.name, r.obs.export_job.uid))
    _fail(r, "DeadlineExceeded", f"the job ran longer than runPolicy.activeDeadlineSeconds ({ads}s)")
    return True


# --- endings --------------------------------------------------------------------------------------

_UNFINISHED = ("Pending", "Running", "Unknown")


def _cleanup(r: _Reconciliation) -> None:
    """Delete trainer pods per ``runPolicy.cleanPodPolicy`` once training is over (idempotent).
    Several go in one delete-collection request (selected exactly as here: the job's trainer pods,
    and for ``Running`` only the unfinished phases)."""
    policy = r.job.spec.run_policy.clean_pod_policy
    if policy == "None":
        return
    going = [p for p in r.obs.pods if not p.deleting and (policy == "All" or p.phase in _UNFINISHED)]
    if len(going) < 2:
        for pod in going:
            r.delete_pod(pod)
        return
    name = r.job.metadata.name
    selector = f"{labels.selector_string(labels.job_selector(name))},{labels.COMPONENT}!={labels.EXPORT_COMPONENT}"
    phases = None if policy == "All" else ",".join(f"status.phase!={p}" for p in ("Succeeded", "Failed"))
    r.plan.actions.append(DeletePods(selector, phases, tuple(Delete("Pod", p.name, p.uid) for p in going)))


def _succeed(r: _Reconciliation, reason: str, message: str, event: bool = True) -> None:
    st = r.status
    st.phase = "Succeeded"
    st.completion_time = r.now
    st.reason = None
    r.set_condition(C.SUCCEEDED, "True", reason, message)
    r.clear(C.EXPORTING, reason, "")
    r.clear(stall.STALLED, reason, "")
    if event:
        r.event("Normal", "Succeeded", message)
    _cleanup(r)
    _ttl(r)


def _fail(r: _Reconciliation, reason: str, message: str) -> None:
    st = r.status
    st.phase = "Failed"
    st.completion_time = r.now
    st.reason = reason
    r.set_condition(C.FAILED, "True", reason, message)
    for type_ in (C.RUNNING, C.RESTARTING, C.EXPORTING):
        r.clear(type_, reason, "")
    r.event("Warning", reason, message)
    _cleanup(r)
    _ttl(r)


def _finished(r: _Reconciliation) -> None:
    _cleanup(r)
    _ttl(r)


def _ttl(r: _Reconciliation) -> None:
    ttl = r.job.spec.run_policy.ttl_seconds_after_finished
    done = r.status.completion_time
    if ttl is None or done is None:
        return
    left = (done + timedelta(seconds=ttl) - r.now).total_seconds()
    if left <= 0:
        r.plan.actions.append(DeleteOwner(r.job.metadata.uid))
    else:
        r.plan.requeue(left)
