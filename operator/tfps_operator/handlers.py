"""Kopf registrations, nothing else: every rule lives in :mod:`tfps_operator.reconcile`.

Kopf logs in, serves the liveness probe and watches the PSTrainingJobs: a read-only event handler hands
every job body to the controller (:class:`~tfps_operator.controller.Controller`), which queues it. Kopf
adds no finalizer (none is needed) and posts no Events; its one write is removing the finalizer an older
operator left on a job, harmless from two replicas. Every other write goes through the operator's own
client and its write gate. The controller's children are watched by its own lean
informers (:mod:`tfps_operator.kube.informer`), started here with the pool of workers that drains the
queue, and, with leader election, the :class:`~tfps_operator.elector.Elector` that says when it may act.

Kopf's own bookkeeping uses the ``tfps.dev`` prefix. ``memo.settings`` (an
:class:`~tfps_operator.settings.OperatorSettings`) is provided by the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import kopf

from . import metrics
from .api.models import GROUP, PLURAL, VERSION
from .controller import Controller
from .elector import Elector
from .kube.client import Kube
from .kube.informer import Informer
from .kube.watched import Views, child_ref
from .manifests import podgroup
from .manifests import workload as wlm
from .manifests.labels import JOB_NAME, MANAGED_BY
from .monitor import ProgressMonitor
from .reconcile.observed import batch_job_obs, pod_obs, workload_obs
from .settings import FINALIZER, PREFIX

CHILDREN = f"app.kubernetes.io/managed-by={MANAGED_BY},{JOB_NAME}"
"""The label selector of the children's informers (the operator's own, of some job)."""


def informers(kube: Kube, controller: Controller, namespaces: tuple[str, ...], gang: bool, kueue: bool) -> Views:
    """The children's informers, as the views a pass reads."""

    def make(kind: str, reduce: Callable[[dict[str, Any]], Any]) -> Informer[Any]:
        return Informer(kube, kind, namespaces, CHILDREN, reduce, controller.child_event)

    def ref(kind: str) -> Callable[[dict[str, Any]], Any]:
        return lambda body: child_ref(kind, body)

    kinds = ["Service", "NetworkPolicy", "PersistentVolumeClaim"] + ([podgroup.KIND] if gang else [])
    return Views(
        pods=make("Pod", pod_obs),
        export_jobs=make("Job", batch_job_obs),
        children=tuple(make(k, ref(k)) for k in kinds),
        workloads=make(wlm.KIND, workload_obs) if kueue else None,
    )


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    ours = memo.settings
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.posting.enabled = False  # Kopf's own Events would bypass the write gate; errors are logged
    settings.watching.server_timeout = 300
    # Kopf keeps a task per job while events about it keep coming, and for idle_timeout after; the
    # handler only hands the body over, so a job's task has no reason to outlive its burst.
    settings.batching.idle_timeout = 0.5
    kube = await Kube.connect(
        lambda: credentials(settings, memo),
        timeout=ours.api_timeout_seconds,
        connect_timeout=ours.api_connect_timeout_seconds,
        max_connections=ours.api_max_connections,
        instance=ours.identity,
    )
    controller = memo.controller = Controller(kube, ours)
    controller.monitor = ProgressMonitor(kube, ours)
    elector = None
    metrics.LEADER.set(0 if ours.leader_election else 1)
    if ours.leader_election:
        elector = memo.elector = Elector(
            kube, ours.lease_namespace, ours.lease_name, ours.identity, ours.lease_timings, controller.lead
        )
        kube.write_gate = elector.may_write
    views = controller.views = informers(
        kube, controller, ours.namespaces, podgroup.gang_enabled(ours.build), wlm.kueue_enabled(ours.build)
    )
    watched = [
        views.pods,
        views.export_jobs,
        *views.children,
        *([views.workloads] if views.workloads is not None else []),
    ]
    assert all(isinstance(w, Informer) for w in watched)
    memo.tasks = [asyncio.create_task(w.run()) for w in watched if isinstance(w, Informer)]
    memo.tasks.append(asyncio.create_task(controller.work([w.synced for w in watched if isinstance(w, Informer)])))
    if elector is not None:
        memo.tasks.append(asyncio.create_task(elector.run()))
    logger.info("tfps operator ready (namespaces: %s)", ", ".join(ours.namespaces) or "all")


def credentials(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """Kopf's own credential readers, without an API client library: the pod's service account,
    else the kubeconfig (``--kubeconfig`` is exported as ``$KUBECONFIG`` by the runner). Used by
    Kopf's watches and by the operator's own client alike."""
    if memo.settings.kubeconfig is None:
        info = kopf.login_with_service_account(settings=settings, **kwargs)
        if info is not None:
            return info
    return kopf.login_with_kubeconfig(settings=settings, **kwargs)


kopf.on.login(id="login")(credentials)


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    elector = getattr(memo, "elector", None)
    if elector is not None:
        await elector.release()
    for task in getattr(memo, "tasks", ()):
        task.cancel()
    for task in getattr(memo, "tasks", ()):
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    controller = getattr(memo, "controller", None)
    if controller is not None:
        if controller.monitor is not None:
            await controller.monitor.close()
        await controller.kube.close()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Every event about a job: the controller keeps its newest body and queues it."""
    memo.controller.job_event(event.get("type"), event["object"])


@kopf.on.probe(id="jobs")
def jobs_probe(memo: kopf.Memo, **_: Any) -> int:
    """Reported by the liveness endpoint: the number of jobs the controller looks after."""
    controller = getattr(memo, "controller", None)
    return len(controller.jobs) if controller else 0
