"""Deterministic names of a job's children, and the DNS names TF_CONFIG uses."""

from __future__ import annotations

from ..api.models import Role

MAX_INDEX_DIGITS = 3
"""Replica counts are capped at 1000 by the API, so an index has at most 3 digits."""
LONGEST_POD_SUFFIX = len("-evaluator-") + MAX_INDEX_DIGITS
MAX_JOB_NAME = 63 - LONGEST_POD_SUFFIX
"""A pod's hostname is a DNS label (≤ 63 chars): ``<job>-<role>-<index>`` must fit."""


def pod_name(job: str, role: Role, index: int) -> str:
    return f"{job}-{role}-{index}"


def service_name(job: str) -> str:
    """The job's headless Service; pods set ``subdomain`` to it."""
    return job


def pod_fqdn(job: str, namespace: str, role: Role, index: int) -> str:
    return f"{pod_name(job, role, index)}.{service_name(job)}.{namespace}.svc"


def network_policy_name(job: str) -> str:
    return job


def pvc_name(job: str) -> str:
    """The PVC created from ``spec.storage.volumeClaimTemplate``."""
    return f"{job}-storage"


def export_job_name(job: str) -> str:
    """The one export Job of a training run: a fixed name, so reconciling again can never make a second."""
    return f"{job}-export"


def preflight_job_name(job: str) -> str:
    """The export pre-flight Job (fresh weights, before training): one per job."""
    return f"{job}-preflight"
