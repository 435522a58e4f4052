"""How the replicas of a job train together: what differs between ParameterServer and MultiWorkerMirrored jobs,
as data one small module per strategy declares and the state machine, the builders and ``tfps run`` consult.

A strategy says which roles' failures restart the whole job (the rest are recreated alone), which roles end
on their own when training is done, which roles touch the job's storage, which stop first on suspension
(and on a resize by restart), how a running cluster is resized, and when training has succeeded. TF_CONFIG
needs no per-strategy rule: the cluster lists the roles that have replicas (:mod:`..manifests.tfconfig`),
which is what both strategies expect. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from tfps_wire.strategy import lead_task

from ..api.models import ClusterSize, PSTrainingJob, ResizeMethod, Role, Strategy, SuccessPolicy, replica_counts

Task = tuple[Role, int]

DATA_SERVICE_STORAGE: frozenset[Role] = frozenset({"dispatcher"})
"""The tf.data service's roles that touch storage (the dispatcher's journal), whatever the strategy: the
service is not part of the training cluster (docs/data-service.md); its pods are recreated alone
(never in ``restarts_job``) and never finish on their own (never in ``finishes``)."""


@dataclass(frozen=True)
class TrainingStrategy:
    name: Strategy
    restarts_job: frozenset[Role]
    """Roles whose failure (or disappearance) restarts every pod of the job from the latest checkpoint; any other
    role's failed pod is recreated alone."""
    finishes: frozenset[Role]
    """Roles whose pods exit 0 on their own when training is done; any other role exiting is a failure."""
    storage_roles: frozenset[Role]
    """Roles that read or write the job's storage (and so get its credentials)."""
    stops_first: frozenset[Role]
    """On suspension these stop first (their SIGTERM save needs the rest of the cluster); the rest follow."""
    restart_grace_seconds: int | None
    """The grace period of the pods stopped by a restart of the job; None: their own
    (``runPolicy.terminationGracePeriodSeconds``)."""
    workers_leave_live: bool
    """Workers can leave the running cluster for good (a resize down) without a restart: the rest train on."""

    def lead(self, counts: Mapping[Role, int]) -> Task:
        """The task that reports progress and whose success ends training: the chief, else worker 0."""
        role, index = lead_task(counts)
        return role, index  # type: ignore[return-value]

    def resize_method(self, before: ClusterSize, after: ClusterSize) -> ResizeMethod:
        """How the running cluster becomes ``after``: Live (workers leave, the rest train on) or Restart
        (the lead saves, every pod restarts at the new size from that checkpoint). Only workers leaving
        can be live: TensorFlow fixes the cluster when the strategy connects, so adding a worker or
        changing the parameter servers needs a new one."""
        if self.workers_leave_live and after.ps == before.ps and after.worker < before.worker:
            return "Live"
        return "Restart"

    def training_succeeded(
        self, succeeded: Collection[Task], counts: Mapping[Role, int], policy: SuccessPolicy
    ) -> bool:
        """Training is done: the lead exited 0 (ChiefOrWorker0), or every chief and worker did (AllWorkers)."""
        if policy == "AllWorkers":
            tasks = [(r, i) for r in ("chief", "worker") for i in range(counts.get(r, 0))]
            return all(t in succeeded for t in tasks)
        return self.lead(counts) in succeeded


def of(job: PSTrainingJob) -> TrainingStrategy:
    """The strategy of ``job`` (``spec.strategy``)."""
    from . import multi_worker_mirrored, parameter_server

    return {
        "ParameterServer": parameter_server.STRATEGY,
        "MultiWorkerMirrored": multi_worker_mirrored.STRATEGY,
    }[job.spec.strategy]


def lead_of(job: PSTrainingJob) -> Task:
    """The lead task of ``job``."""
    return of(job).lead(replica_counts(job))
