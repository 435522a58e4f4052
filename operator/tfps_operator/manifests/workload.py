"""The Kueue Workload of a queued job (``kueue.x-k8s.io/v1beta2``), and the status patches the operator
writes on it.

Kueue admits a Workload, not the job: the operator describes the job as one pod set per replica type
(chief, ps, worker, evaluator: counts and pod templates, so Kueue sees the requests; an elastic job's
workers with ``minCount``, so Kueue's partial admission can admit fewer), owns it by a
controller reference (Kueue lists ``PSTrainingJob.v1beta1.tfps.dev`` among its external frameworks),
and acts on what Kueue writes into its status: admission (with the flavors that place each pod set),
eviction. The operator writes two things back, as Kueue's own job integrations do: the Finished
condition when the job ends (Kueue releases the quota), and, once an evicted job's pods are gone, the
release of the admission (Kueue queues the Workload again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from . import labels

GROUP = "kueue.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta2"
KIND = "Workload"
QUEUE_LABEL = f"{GROUP}/queue-name"
"""The label Kueue users put on a job to queue it (``schedulingPolicy.queue`` says the same)."""
COMPONENT = "workload"


def kueue_enabled(cfg: BuildConfig) -> bool:
    return cfg.kueue


def queue_name(job: PSTrainingJob) -> str | None:
    """The job's LocalQueue: ``schedulingPolicy.queue``, else the ``kueue.x-k8s.io/queue-name`` label."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.queue:
        return policy.queue
    return (job.metadata.labels or {}).get(QUEUE_LABEL) or None


def queued(job: PSTrainingJob, cfg: BuildConfig) -> bool:
    """Whether Kueue decides when this job runs: the operator integrates with Kueue and the job names a queue."""
    return kueue_enabled(cfg) and queue_name(job) is not None


def priority_class(job: PSTrainingJob) -> str | None:
    policy = job.spec.run_policy.scheduling_policy
    return policy.priority_class if policy is not None else None


def workload_name(job_name: str) -> str:
    return f"psjob-{job_name}"


def _template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template of a pod set: the first pod of the replica type, as the operator will create it."""
    meta = pod.get("metadata") or {}
    return {
        "metadata": {k: v for k, v in (("labels", meta.get("labels")), ("annotations", meta.get("annotations"))) if v},
        "spec": pod["spec"],
    }


def _pod_set(job: PSTrainingJob, role: str, count: int, first: Mapping[str, Any]) -> dict[str, Any]:
    """One pod set; an elastic job's workers with ``minCount`` (Kueue's partial admission may admit
    fewer, down to it)."""
    pod_set: dict[str, Any] = {"name": role, "count": count, "template": _template(first)}
    least = job.spec.replicas.worker.min_replicas
    if role == "worker" and least is not None and least < count:
        pod_set["minCount"] = least
    return pod_set


def workload(job: PSTrainingJob, pods: Mapping[str, Mapping[str, Any]], priority: int | None) -> dict[str, Any]:
    """The Workload of ``job`` from its desired pods (``{name: manifest}``): one pod set per replica type,
    in the order chief, ps, worker, evaluator. ``priority``: the value of ``schedulingPolicy.priorityClass``
    (Kueue orders and preempts by it), None without one."""
    first: dict[str, Mapping[str, Any]] = {}
    counts: dict[str, int] = {}
    for manifest in pods.values():
        role = manifest["metadata"]["labels"][labels.REPLICA_TYPE]
        counts[role] = counts.get(role, 0) + 1
        first.setdefault(role, manifest)
    spec: dict[str, Any] = {
        "queueName": queue_name(job),
        "podSets": [_pod_set(job, role, counts[role], first[role]) for role in first],
    }
    pc = priority_class(job)
    if pc is not None:
        spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pc}
        if priority is not None:
            spec["priority"] = priority
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": labels.child_metadata(
            job, workload_name(job.metadata.name), labels.base_labels(job.metadata.name, COMPONENT)
        ),
        "spec": spec,
    }


def place(
    pod: Mapping[str, Any], node_labels: Mapping[str, str], tolerations: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """``pod`` with the admitted flavor's node labels added to its nodeSelector and its tolerations
    appended (a copy; what Kueue does to the pods of the job kinds it knows)."""
    spec = dict(pod["spec"])
    if node_labels:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **node_labels}
    extra = [dict(t) for t in tolerations if t not in (spec.get("tolerations") or [])]
    if extra:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *extra]
    return {**pod, "spec": spec}


def _condition(type_: str, status: str, reason: str, message: str, now: datetime, generation: int) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observedGeneration": generation,
    }


def _with(conditions: Iterable[Mapping[str, Any]], new: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``conditions`` with each of ``new`` set: a condition whose status is unchanged keeps its transition time."""
    out = [dict(c) for c in conditions]
    for cond in new:
        old = next((c for c in out if c.get("type") == cond["type"]), None)
        if old is None:
            out.append(cond)
        else:
            if old.get("status") == cond["status"]:
                cond = {**cond, "lastTransitionTime": old.get("lastTransitionTime", cond["lastTransitionTime"])}
            out[out.index(old)] = cond
    return out


def finished_patch(
    conditions: Iterable[Mapping[str, Any]], succeeded: bool, message: str, now: datetime, generation: int
) -> dict[str, Any]:
    """The status patch that ends the Workload: condition Finished (Kueue releases its quota)."""
    reason = "Succeeded" if succeeded else "Failed"
    return {
        "status": {"conditions": _with(conditions, [_condition("Finished", "True", reason, message, now, generation)])}
    }


def release_patch(
    conditions: Iterable[Mapping[str, Any]], evicted_reason: str, message: str, now: datetime, generation: int
) -> dict[str, Any]:
    """The status patch that gives an evicted Workload's admission back once the job's pods are gone:
    no admission, QuotaReserved and Admitted False, Requeued (True after a preemption, as Kueue's own
    job integrations set it), so Kueue queues it again."""
    requeued = "True" if evicted_reason in ("Preempted", "NodeFailures") else "False"
    return {
        "status": {
            "admission": None,
            "conditions": _with(
                conditions,
                [
                    _condition("QuotaReserved", "False", "Pending", message, now, generation),
                    _condition(
                        "Admitted", "False", "NoReservation", "The workload has no reservation", now, generation
                    ),
                    _condition("Requeued", requeued, evicted_reason, message, now, generation),
                ],
            ),
        }
    }
