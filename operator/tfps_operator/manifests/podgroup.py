"""The PodGroup of a gang-scheduled job (scheduler-plugins' Coscheduling, ``scheduling.x-k8s.io/v1alpha1``).

The gang scheduler binds none of the job's pods until ``minMember`` of them can be bound at once.
Pods join the group by the label :data:`POD_GROUP_LABEL`; the group is named after the job.
"""

from __future__ import annotations

from typing import Any

from ..api.models import PSTrainingJob, replica_counts
from ..settings import BuildConfig
from . import labels

API_VERSION = "scheduling.x-k8s.io/v1alpha1"
KIND = "PodGroup"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
COMPONENT = "podgroup"


def gang_enabled(cfg: BuildConfig) -> bool:
    return bool(cfg.gang_scheduler_name)


def min_member(job: PSTrainingJob) -> int:
    """``schedulingPolicy.minAvailable``, or every pod of the job with an elastic job's workers counted at
    their minimum (``spec.replicas.worker.minReplicas``)."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.min_available is not None:
        return policy.min_available
    counts = replica_counts(job)
    least = job.spec.replicas.worker.min_replicas
    if least is not None:
        counts["worker"] = min(counts["worker"], least)
    return sum(counts.values())


def pod_group_name(job: PSTrainingJob) -> str:
    return job.metadata.name


def pod_group(job: PSTrainingJob, cfg: BuildConfig) -> dict[str, Any] | None:
    """The job's PodGroup, or None when the operator does not gang-schedule."""
    if not gang_enabled(cfg):
        return None
    spec: dict[str, Any] = {"minMember": min_member(job)}
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    name = job.metadata.name
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": labels.child_metadata(job, pod_group_name(job), labels.base_labels(name, COMPONENT)),
        "spec": spec,
    }
