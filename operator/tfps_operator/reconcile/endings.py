"""How a job ends: Succeeded or Failed, the cleanup of its pods (``runPolicy.cleanPodPolicy``) and its
deletion after ``runPolicy.ttlSecondsAfterFinished``."""

from __future__ import annotations

from datetime import timedelta

from ..manifests import labels
from . import conditions as C
from . import stall
from .context import UNFINISHED, Reconciliation
from .plan import Delete, DeleteOwner, DeletePods


def cleanup(r: Reconciliation) -> None:
    """Delete trainer pods per ``runPolicy.cleanPodPolicy`` once training is over (idempotent).
    Several go in one delete-collection request (selected exactly as here: the job's trainer pods,
    and for ``Running`` only the unfinished phases)."""
    policy = r.job.spec.run_policy.clean_pod_policy
    if policy == "None":
        return
    going = [p for p in r.obs.pods if not p.deleting and (policy == "All" or p.phase in UNFINISHED)]
    if len(going) < 2:
        for pod in going:
            r.delete_pod(pod)
        return
    name = r.job.metadata.name
    selector = f"{labels.selector_string(labels.job_selector(name))},{labels.COMPONENT}!={labels.EXPORT_COMPONENT}"
    phases = None if policy == "All" else ",".join(f"status.phase!={p}" for p in ("Succeeded", "Failed"))
    r.plan.actions.append(DeletePods(selector, phases, tuple(Delete("Pod", p.name, p.uid) for p in going)))


def succeed(r: Reconciliation, reason: str, message: str, event: bool = True) -> None:
    st = r.status
    st.phase = "Succeeded"
    st.completion_time = r.now
    st.reason = None
    r.set_condition(C.SUCCEEDED, "True", reason, message)
    r.clear(C.EXPORTING, reason, "")
    r.clear(stall.STALLED, reason, "")
    if event:
        r.event("Normal", "Succeeded", message)
    cleanup(r)
    ttl(r)


def fail(r: Reconciliation, reason: str, message: str) -> None:
    st = r.status
    st.phase = "Failed"
    st.completion_time = r.now
    st.reason = reason
    r.set_condition(C.FAILED, "True", reason, message)
    for type_ in (C.RUNNING, C.RESTARTING, C.EXPORTING):
        r.clear(type_, reason, "")
    r.event("Warning", reason, message)
    cleanup(r)
    ttl(r)


def finished(r: Reconciliation) -> None:
    cleanup(r)
    ttl(r)


def ttl(r: Reconciliation) -> None:
    ttl = r.job.spec.run_policy.ttl_seconds_after_finished
    done = r.status.completion_time
    if ttl is None or done is None:
        return
    left = (done + timedelta(seconds=ttl) - r.now).total_seconds()
    if left <= 0:
        r.plan.actions.append(DeleteOwner(r.job.metadata.uid))
    else:
        r.plan.requeue(left)
