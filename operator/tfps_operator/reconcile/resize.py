"""Resizing a running job: the size the current run has, the size it should have, and how it gets there.

``status.clusterSize`` is the parameter servers and workers the current run's TF_CONFIG lists; the pods
are built from it, not from ``spec.replicas``. The size the job should have (the *goal*) is the spec's,
capped by the workers Kueue admitted. The run moves towards it:

* a run none of whose pods exist yet (a new job, after a restart, on resume) starts at the goal;
* fewer workers: the strategy's rule (:meth:`~..strategies.TrainingStrategy.resize_method`): Live (a
  ParameterServer job's highest-index workers are deleted; the coordinator re-runs the closures they had
  in flight and the rest train on) or Restart;
* more workers: the new workers' pods are created first, beside the run, as *standby* pods (index at
  or above the run's size). TensorFlow fixes the cluster when the strategy connects, and a chief
  blocks until every worker it lists answers, so the run grows only once they are running: by a
  Restart. Standby pods that cannot be scheduled never disturb the run;
* a different parameter server count: a Restart (a sharded checkpoint restores into any count);
* elastic jobs (``minReplicas`` below ``replicas``): workers of the run still unscheduled after
  ``pendingTimeoutSeconds`` are left out by a Restart at a smaller size (not below the minimum); their
  places come back as standby pods, and the job grows again once those run (CapacityFreed).

A Restart stops the roles the strategy stops first (a ParameterServer job's chief: on SIGTERM it
finishes its scheduled steps and saves them), then, once they have exited, restarts every pod at the
new size (``status.restarts`` and ``status.resizes`` + 1; not counted against ``backoffLimit``). The
new run resumes from the checkpoint saved on stop, which the stopped chief's message names
(:func:`tfps_wire.termination.parse_stopped`). ``status.resize`` records each resize, its cost in
steps, and when the new size was running. Pure: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tfps_wire.termination import parse_stopped

from ..api.models import (
    DATA_SERVICE_ROLES,
    CheckpointStatus,
    ClusterSize,
    PSTrainingJob,
    ResizeReason,
    ResizeStatus,
    replica_counts,
)
from ..strategies import of as strategy_of
from . import conditions as C
from .context import UNFINISHED, Reconciliation
from .observed import PodObs

RESIZING = "Resizing"
"""Condition: True while a resize by restart is under way."""
WORKERS_PENDING = "WorkersPending"
"""``status.reason`` (and an Event) while workers asked for are left out."""


def spec_size(job: PSTrainingJob) -> ClusterSize:
    counts = replica_counts(job)
    return ClusterSize(ps=counts["ps"], worker=counts["worker"])


def min_workers(job: PSTrainingJob) -> int:
    """The fewest workers the job runs with: ``minReplicas``, else all it asks for (not elastic)."""
    w = job.spec.replicas.worker
    return min(w.min_replicas, w.replicas) if w.min_replicas is not None else w.replicas


def in_effect(job: PSTrainingJob, size: ClusterSize) -> PSTrainingJob:
    """``job`` with the parameter servers and workers of ``size``: what a run of that size is built from."""
    reps = job.spec.replicas
    ps, worker = reps.of("ps"), reps.worker
    replicas = reps.model_copy(
        update={
            "ps": ps.model_copy(update={"replicas": size.ps}),
            "worker": worker.model_copy(update={"replicas": size.worker}),
        }
    )
    return job.model_copy(update={"spec": job.spec.model_copy(update={"replicas": replicas})})


def goal(job: PSTrainingJob, admitted_workers: int | None) -> ClusterSize:
    """The size the job should have: the spec's, with no more workers than Kueue admitted."""
    size = spec_size(job)
    if admitted_workers is not None and admitted_workers < size.worker:
        return ClusterSize(ps=size.ps, worker=max(admitted_workers, 1))
    return size


def run_size(r: Reconciliation, admitted_workers: int | None) -> ClusterSize:
    """This pass's resize decision (a Live change, a Restart begun or continued, a new run's size), and
    the size of the current run after it: what its pods are built from."""
    size = _decide(r, admitted_workers)
    _left_out(r)
    return size


def _decide(r: Reconciliation, admitted_workers: int | None) -> ClusterSize:
    st, job = r.status, r.job
    target = goal(job, admitted_workers)
    current = st.cluster_size
    run = _run_pods(r)
    stopping = _stopping(st)
    if current is None or (not run and not stopping):
        if current is not None and current != target and _in_progress(st):
            assert st.resize is not None
            st.resize = st.resize.model_copy(update={"to": target})
        st.cluster_size = target
        return target
    if stopping:
        return _stop_then_restart(r, current, run)
    want, reason = _wanted(r, current, target, run)
    if want == current:
        return current
    method = strategy_of(job).resize_method(current, want) if reason == "Scaled" else "Restart"
    st.resize = ResizeStatus.model_validate(
        {
            "from": current.model_dump(),
            "to": want.model_dump(),
            "method": method,
            "reason": reason,
            "requested": r.now,
            "step": st.progress.step if st.progress else None,
        }
    )
    what = f"workers {current.worker} → {want.worker}" + (
        f", ps {current.ps} → {want.ps}" if want.ps != current.ps else ""
    )
    if method == "Live":
        st.cluster_size = want
        st.resize.completed = r.now
        st.resize.run = st.restarts
        r.event("Normal", "Resized", f"{what} ({reason}): the highest-index workers leave; training goes on")
        return want
    r.event("Normal", RESIZING, f"{what} ({reason}): stopping the lead to save, then restarting at the new size")
    r.set_condition(RESIZING, "True", reason, f"{what}: the lead saves a checkpoint, then every pod restarts")
    return _stop_then_restart(r, current, run)


def standby(r: Reconciliation, size: ClusterSize, admitted_workers: int | None) -> range:
    """Indices of the standby workers: asked for beyond the run's workers, created beside it so that a
    grow waits until they are running (they keep their places while the lead stops for the grow)."""
    if r.status.phase not in ("Pending", "Running"):
        return range(0)
    return range(size.worker, max(size.worker, goal(r.asked, admitted_workers).worker))


def settle(r: Reconciliation) -> None:
    """A resize by restart is complete once the new run is running: record when, and what it cost."""
    st = r.status
    if not _in_progress(st) or st.phase != "Running" or _stopping(st):
        return
    assert st.resize is not None
    st.resize.completed = r.now
    r.clear(RESIZING, "Resized", "")
    lost = ""
    if st.resize.steps_lost:
        lost = f"; {st.resize.steps_lost} step(s) since the last checkpoint were lost"
    r.event("Normal", "Resized", f"running with {st.resize.to.worker} worker(s) and {st.resize.to.ps} ps{lost}")


def shrunk_live(st: Any) -> bool:
    """Workers left the current run live. TensorFlow's coordinator then waits for them for good, and while
    it does it cannot take back any other worker that fails: a worker failure must restart the job."""
    rz = st.resize
    return rz is not None and rz.method == "Live" and rz.run == st.restarts


def pending_message(r: Reconciliation) -> str | None:
    """Why workers asked for are not in the run, while some are left out."""
    st = r.status
    if not st.workers_left_out or st.cluster_size is None:
        return None
    return (
        f"{st.workers_left_out} worker(s) asked for are not in the run (until their pods run; or not "
        f"schedulable, or not admitted); running with {st.cluster_size.worker} (minReplicas {min_workers(r.job)})"
    )


# -- the rules -------------------------------------------------------------------------------------------


def _run_pods(r: Reconciliation) -> list[PodObs]:
    return [p for p in r.obs.pods if p.restart == r.status.restarts and not p.deleting]


def _in_progress(st: Any) -> bool:
    return st.resize is not None and st.resize.method == "Restart" and st.resize.completed is None


def _stopping(st: Any) -> bool:
    """A resize by restart whose lead has not stopped yet (the run still has the old size)."""
    return _in_progress(st) and st.cluster_size is not None and st.cluster_size == st.resize.from_


def _wanted(
    r: Reconciliation, current: ClusterSize, target: ClusterSize, run: list[PodObs]
) -> tuple[ClusterSize, ResizeReason]:
    """The size the run should move to now, and why."""
    job = r.job
    reason: ResizeReason = "Admitted" if target.worker < spec_size(job).worker else "Scaled"
    if target.ps != current.ps or target.worker < current.worker:
        return target, "Scaled" if target.ps != current.ps else reason
    timeout = job.spec.replicas.worker.pending_timeout_seconds
    floor = min_workers(job)
    workers = {p.index: p for p in run if p.role == "worker" and p.index is not None}
    stuck = [i for i, p in workers.items() if i < current.worker and _pending_too_long(p, r.now, timeout)]
    if stuck and current.worker > floor:
        return ClusterSize(ps=current.ps, worker=max(floor, current.worker - len(stuck))), "WorkersPending"
    spares = [workers.get(i) for i in range(current.worker, target.worker)]
    ready = sum(1 for p in spares if p is not None and p.phase == "Running")
    waiting = [p for p in spares if p is None or p.phase != "Running"]
    if ready and (not waiting or all(p is not None and _pending_too_long(p, r.now, timeout) for p in waiting)):
        grown = ClusterSize(ps=current.ps, worker=current.worker + ready)
        back = r.status.resize is not None and r.status.resize.reason in ("WorkersPending", "CapacityFreed")
        return grown, "CapacityFreed" if back and reason == "Scaled" else reason
    return current, reason


def _pending_too_long(p: PodObs, now: datetime, timeout: int) -> bool:
    return (
        p.phase == "Pending"
        and not p.scheduled
        and p.created_at is not None
        and (now - p.created_at).total_seconds() >= timeout
    )


def _stop_then_restart(r: Reconciliation, current: ClusterSize, run: list[PodObs]) -> ClusterSize:
    """Stop the roles the strategy stops first (they save on SIGTERM); once they have exited, restart
    every pod at the new size."""
    st = r.status
    assert st.resize is not None
    first = strategy_of(r.job).stops_first
    going = [p for p in r.obs.pods if p.restart == st.restarts and p.role in first and p.phase in UNFINISHED]
    for pod in going:
        r.delete_pod(pod)  # its own grace period: it finishes its scheduled steps and saves them
    if going:
        return current
    lead = next((p for p in r.obs.pods if p.restart == st.restarts and p.role in first), None)
    if lead is not None and lead.phase == "Succeeded":  # it reached the target step while stopping: done
        st.resize.completed = r.now
        r.clear(RESIZING, "TrainingSucceeded", "training finished while the lead stopped for the resize")
        return current
    saved = parse_stopped(lead.message) if lead is not None else None
    if saved is not None and saved.saved_step is not None and saved.path:
        known = st.checkpoint.step if st.checkpoint and st.checkpoint.step is not None else -1
        if saved.saved_step > known:
            st.checkpoint = CheckpointStatus(
                step=saved.saved_step, path=saved.path, time=lead.finished_at if lead and lead.finished_at else r.now
            )
    resumed = st.checkpoint.step if st.checkpoint else None
    st.resize.resumed_from = resumed
    before = st.resize.step if saved is None else max(saved.step, st.resize.step or 0)
    if before is not None:
        st.resize.step = before
        st.resize.steps_lost = max(0, before - (resumed or 0))
    st.restarts += 1
    st.resizes += 1
    st.resize.run = st.restarts
    st.cluster_size = st.resize.to
    st.phase = "Restarting"
    r.plan.job_restarted = True
    r.set_condition(
        C.RESTARTING, "True", RESIZING, f"restarting at {st.resize.to.worker} worker(s), {st.resize.to.ps} ps"
    )
    r.clear(C.RUNNING, RESIZING, "")
    grace = strategy_of(r.job).restart_grace_seconds
    for pod in run:
        if pod.role not in DATA_SERVICE_ROLES:  # the tf.data service runs on through the restart
            r.delete_pod(pod, grace)
    return st.resize.to


def _left_out(r: Reconciliation) -> None:
    """``status.workersLeftOut`` (workers asked for and not in the run: not yet running, not schedulable,
    or not admitted), and an Event when it changes to a new non-zero count."""
    st = r.status
    assert st.cluster_size is not None
    left = max(0, spec_size(r.job).worker - st.cluster_size.worker)
    if left != st.workers_left_out:
        st.workers_left_out = left
        if left:
            r.event("Normal", "WorkersLeftOut", pending_message(r) or "")
