"""The training phases (Pending, Running, Restarting, Suspended): the pods of the current run, what a
failed or lost pod costs (recreated alone, or the whole job restarted), scheduling, waiting and stall
conditions, suspension and the active deadline."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..api.models import (
    DATA_SERVICE_ROLES,
    CheckpointStatus,
    ExportStatus,
    PSTrainingJobStatus,
    ReplicaStatus,
    Role,
    replica_counts,
)
from ..manifests import labels, names
from ..manifests.podgroup import KIND as KIND_PODGROUP
from ..manifests.podgroup import gang_enabled, min_member, pod_group_name
from ..strategies import TrainingStrategy
from ..strategies import of as strategy_of
from . import conditions as C
from . import crashloop, gang, kueue, lineage, messages, resize, stall, waiting
from .context import UNFINISHED, Reconciliation
from .endings import fail, succeed
from .export import exporting
from .failure_policy import Decision, on_failure
from .observed import PodObs
from .plan import Create, Delete


def training(
    r: Reconciliation,
    desired: dict[str, dict[str, Any]],
    export_manifest: dict[str, Any] | None,
    standby: dict[str, dict[str, Any]] | None = None,
) -> None:
    """``desired``: the current run's pods; ``standby``: workers created beside it before it grows
    (:mod:`.resize`), which are not part of its training cluster."""
    job, st, obs = r.job, r.status, r.obs
    epoch = st.restarts
    standby = standby or {}
    current = {p.name: p for p in obs.pods if of_run(p, epoch) and p.name in desired}
    spares = {p.name: p for p in obs.pods if p.restart == epoch and p.name in standby}
    for pod in obs.pods:  # from an earlier run of the job, or no longer in the run (a worker resized away)
        if pod.name not in current and pod.name not in spares:
            r.delete_pod(pod)

    strategy = strategy_of(job)
    counts = replica_counts(job)
    lead = current.get(names.pod_name(job.metadata.name, *strategy.lead(counts)))
    succeeded = {  # a lead stopped for a resize that reached its target step meanwhile succeeded too
        (p.role, p.index)
        for p in current.values()
        if p.phase == "Succeeded" and p.role is not None and p.index is not None
    }
    if strategy.training_succeeded(succeeded, counts, job.spec.run_policy.success_policy):
        if lead is not None:
            _final_checkpoint(r, lead)
        training_done(r, export_manifest, _lead_name(lead), lead)
        return

    decisions: list[tuple[PodObs | None, str, Decision]] = []
    for pod in current.values():
        if pod.deleting or pod.role is None:
            continue
        unexpected_exit = pod.phase == "Succeeded" and pod.role not in strategy.finishes  # servers never exit
        if pod.phase == "Failed" or unexpected_exit:
            decisions.append((pod, pod.role, _failure_decision(r, strategy, pod.role, pod.exit_code, pod.message)))
    if st.phase == "Running":  # every pod existed: a missing pod the training cluster needs is a lost one
        for name, manifest in desired.items():
            role = manifest["metadata"]["labels"]["tfps.dev/replica-type"]
            if name not in current and role in strategy.restarts_job and obs.pod(name) is None:
                decisions.append((None, role, _failure_decision(r, strategy, role, None, vanished=name)))

    fatal = next((d for _, _, d in decisions if d.action == "fail_job"), None)
    if fatal:
        fail(r, fatal.reason, fatal.message)
        return
    restarts = [(p, d) for p, _, d in decisions if d.action == "restart_job"]
    # the first to fail is the cause; later ones (a peer's collective aborted) are its consequence
    restart = min(restarts, key=lambda pd: _finished(pd[0]))[1] if restarts else None
    if restart:
        restart_job(r, restart, current)
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
    _standby(r, standby, spares, group_ready)
    for name, manifest in desired.items():
        if name in current or obs.pod(name) is not None or not group_ready:
            continue  # exists, its previous incarnation is still going away, or its PodGroup is not there yet
        r.plan.actions.append(Create(manifest))
        if st.phase == "Running":
            role = manifest["metadata"]["labels"]["tfps.dev/replica-type"]
            r.plan.recreated.append(role)
            r.event("Normal", "ReplicaRecreated", f"{name} recreated with the same name")

    _training_phase(r, desired, current, replacing, group_ready)


def _standby(r: Reconciliation, standby: dict[str, dict[str, Any]], spares: dict[str, PodObs], ready: bool) -> None:
    """Standby workers: created when missing; one that exited (it waited for a cluster it is not in yet)
    is deleted and created again, uncounted."""
    for name, manifest in standby.items():
        pod = spares.get(name)
        if pod is not None and pod.phase in ("Succeeded", "Failed"):
            r.delete_pod(pod)
        elif pod is None and r.obs.pod(name) is None and ready:
            r.plan.actions.append(Create(manifest))


def _finished(pod: PodObs | None) -> tuple[int, float]:
    """Sort key of failed pods: those with a finish time first, earliest first; vanished pods last."""
    if pod is None or pod.finished_at is None:
        return (1, 0.0)
    return (0, pod.finished_at.timestamp())


def _failure_decision(
    r: Reconciliation,
    strategy: TrainingStrategy,
    role: Role,
    exit_code: int | None,
    detail: str = "",
    vanished: str | None = None,
) -> Decision:
    spec = r.job.spec.replicas.of(role)
    d = on_failure(
        role,
        spec.restart_policy,
        exit_code,
        counted_restarts(r.status),
        r.job.spec.run_policy.backoff_limit,
        _recreated(r, role),
        spec.recreate_limit,
        detail[-2000:],
        alone=role not in strategy.restarts_job and not (role == "worker" and resize.shrunk_live(r.status)),
    )
    if vanished:
        d = Decision(d.action, d.reason, d.message.replace(f"{role} vanished", f"{vanished} disappeared"), d.counted)
    return d


def counted_restarts(st: PSTrainingJobStatus) -> int:
    """Whole-job restarts counted against ``backoffLimit``: not those of a preemption or a resize."""
    return st.restarts - st.preemptions - st.resizes


def _recreated(r: Reconciliation, role: str) -> int:
    """Recreations of ``role``'s pods so far (from ``status.recreations``)."""
    prefix = f"{r.job.metadata.name}-{role}-"
    return sum(rec.total for name, rec in r.status.recreations.items() if name.startswith(prefix))


def _training_phase(
    r: Reconciliation,
    desired: dict[str, dict[str, Any]],
    current: dict[str, PodObs],
    replacing: set[str],
    group_ready: bool,
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
    w = waiting.why(live)
    if gang_enabled(r.cfg) and live:
        says = next((p.unschedulable_message for p in unscheduled if p.unschedulable_message), "")
        v = gang.condition(pod_group_name(r.job), min_member(r.job), len(live) - len(unscheduled), len(desired), says)
        r.set_condition(gang.GANG_SCHEDULED, v.status, v.reason, v.message)
        w = gang.waiting(v, w)
    elif gang_enabled(r.cfg) and not group_ready:
        w = waiting.Waiting(gang.WAITING_FOR_GANG, gang.no_pod_group(pod_group_name(r.job)))
    waiting.report(r, w)
    if resize.pending_message(r) and st.reason in (None, resize.WORKERS_PENDING):
        st.reason = resize.WORKERS_PENDING
    elif not st.workers_left_out and st.reason == resize.WORKERS_PENDING:
        st.reason = None
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


def _stalled(r: Reconciliation, current: dict[str, PodObs]) -> None:
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
            fail(r, stall.STALLED, f"{verdict.message} (stallPolicy Fail)")
        elif policy == "Restart" and counted_restarts(r.status) >= backoff:
            fail(
                r,
                "BackoffLimitExceeded",
                f"{verdict.message}; stallPolicy Restart, but backoffLimit {backoff} is used up",
            )
        elif policy == "Restart":
            restart_job(
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


def replica_statuses(r: Reconciliation) -> None:
    """Counts of the current run's pods as they will be after this plan: pods being deleted (now or
    by this plan) no longer count, so a finished job shows what is really left."""
    counts = replica_counts(r.job)
    going = {a.name for a in r.plan.deletes() if a.kind == "Pod"}
    pods = [p for p in r.obs.pods if of_run(p, r.status.restarts) and p.name not in going and not p.deleting]
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
    in_run = counts["worker"]
    running_workers = sum(
        p.role == "worker" and p.phase == "Running" and p.index is not None and p.index < in_run for p in pods
    )
    asked = r.asked.spec.replicas.worker.replicas
    want = f" (want {asked})" if asked != in_run else ""
    r.status.workers = f"{running_workers}/{in_run}{want}"  # the Workers printer column, e.g. "2/3 (want 4)"
    r.status.data_workers = _data_workers(counts, pods)
    r.status.worker_selector = labels.selector_string(labels.role_selector(r.job.metadata.name, "worker"))


def _data_workers(counts: dict[Role, int], pods: list[PodObs]) -> str | None:
    """The Data printer column: data workers running/asked, "no dispatcher" while it is not running."""
    if not counts["dispatcher"]:
        return None
    running = sum(p.role == "dataworker" and p.phase == "Running" for p in pods)
    dispatcher = any(p.role == "dispatcher" and p.phase == "Running" for p in pods)
    return f"{running}/{counts['dataworker']}" + ("" if dispatcher else ", no dispatcher")


def of_run(pod: PodObs, restarts: int) -> bool:
    """A pod of the current run: labelled with it, or one of the tf.data service's, which a restart of the
    training cluster leaves running (its dispatcher's journal and the iteration's place outlive the run:
    docs/data-service.md)."""
    return pod.restart == restarts or pod.role in DATA_SERVICE_ROLES


def restart_job(r: Reconciliation, d: Decision, current: dict[str, PodObs]) -> None:
    st = r.status
    st.restarts += 1
    if not d.counted:
        st.preemptions += 1
    st.phase = "Restarting"
    r.plan.job_restarted = True
    r.set_condition(C.RESTARTING, "True", d.reason, d.message)
    r.clear(C.RUNNING, d.reason, d.message)
    r.event("Warning", d.reason, d.message)
    grace = strategy_of(r.job).restart_grace_seconds
    for pod in current.values():  # now stale (restart label < restarts): replaced once gone
        if pod.role not in DATA_SERVICE_ROLES:
            r.delete_pod(pod, grace)


def _final_checkpoint(r: Reconciliation, lead: PodObs) -> None:
    """The lead's success summary names its final checkpoint. The progress monitor polls only while
    the job is Running, so a short run (or the last interval of any run) is only seen here."""
    final = messages.final_checkpoint(lead.message)
    known = r.status.checkpoint.step if r.status.checkpoint and r.status.checkpoint.step is not None else -1
    if final is not None and final.path is not None and final.step > known:
        r.status.checkpoint = CheckpointStatus(step=final.step, path=final.path, time=lead.finished_at or r.now)


def _lead_name(lead: PodObs | None) -> str:
    """How messages name the task whose success ended training: "the chief", "worker 0"."""
    if lead is None or lead.role is None:
        return "training"
    return "the chief" if lead.role == "chief" else f"{lead.role} {lead.index}"


def training_done(
    r: Reconciliation, export_manifest: dict[str, Any] | None, who: str = "the chief", lead: PodObs | None = None
) -> None:
    """One Event for the transition (an Event is an API write: one per job transition, not per step). The
    export's lineage is fixed here, from ``lead`` (the pod whose success ended training)."""
    st = r.status
    r.clear(C.RUNNING, "TrainingSucceeded", f"{who} finished training")
    r.clear(C.RESTARTING, "TrainingSucceeded", "")
    if export_manifest is not None:
        export_name = export_manifest["metadata"]["name"]
        st.phase = "Exporting"
        st.export = ExportStatus(job_name=export_name, lineage=lineage.fixed(r.asked, lead))
        r.set_condition(C.EXPORTING, "True", "ExportStarted", f"export Job {export_name} created")
        r.event(
            "Normal",
            "TrainingSucceeded",
            f"{who} finished training; exporting the final checkpoint with Job {export_name}",
        )
        exporting(r, export_manifest)
    else:
        r.event("Normal", "TrainingSucceeded", f"{who} finished training; export is disabled")
        succeed(r, "TrainingSucceeded", "training finished; export is disabled", event=False)


def suspend(r: Reconciliation, reason: str, why: str) -> None:
    """Delete the roles the strategy stops first (a ParameterServer job's chief: on SIGTERM it saves a
    checkpoint of its last step, which needs the parameter servers); the other pods go once those have
    stopped. An export in progress is stopped too (on resume the lead finds the final checkpoint and the
    export runs again)."""
    st = r.status
    first = strategy_of(r.job).stops_first
    stopping_first = any(p.role in first and p.phase in UNFINISHED for p in r.obs.pods)
    for pod in r.obs.pods:
        if pod.role in first or not stopping_first:
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


def deadline_passed(r: Reconciliation) -> bool:
    ads = r.job.spec.run_policy.active_deadline_seconds
    if ads is None or r.status.start_time is None:
        return False
    left = (r.status.start_time + timedelta(seconds=ads) - r.now).total_seconds()
    if left > 0:
        r.plan.requeue(left)
        return False
    if r.obs.export_job is not None and not r.obs.export_job.deleting:
        r.plan.actions.append(Delete("Job", r.obs.export_job.name, r.obs.export_job.uid))
    fail(r, "DeadlineExceeded", f"the job ran longer than runPolicy.activeDeadlineSeconds ({ads}s)")
    return True
