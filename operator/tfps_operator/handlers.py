"""Kopf registrations, nothing else: every rule lives in :mod:`tfps_operator.reconcile`.

* one daemon per PSTrainingJob runs its reconcile loop (:class:`~tfps_operator.controller.Controller`);
* one more per Running job polls its chief's progress (:class:`~tfps_operator.monitor.ProgressMonitor`);
* read-only event handlers on the job, its pods and its export Job wake that loop. Event handlers
  store nothing, so Kopf never writes annotations or finalizers on pods or Jobs.

Kopf's own bookkeeping on the PSTrainingJob (the finalizer that lets the daemon stop cleanly) uses
the ``tfps.dev`` prefix. ``memo.settings`` (an :class:`~tfps_operator.settings.OperatorSettings`)
is provided by the runner.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from .api.models import GROUP, PLURAL, VERSION
from .build import labels as L
from .controller import Controller
from .kube.client import Kube
from .monitor import ProgressMonitor
from .settings import FINALIZER, PREFIX

MANAGED = {"app.kubernetes.io/managed-by": L.MANAGED_BY}


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    ours = memo.settings
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=PREFIX, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.peering.lifetime = ours.peering_lifetime
    # Filter pods and Jobs on the server: only the operator's own children are ever sent to it.
    selector = ",".join(f"{k}={v}" for k, v in MANAGED.items())
    settings.watching.label_selectors["v1", "pods"] = selector
    settings.watching.label_selectors["batch/v1", "jobs"] = selector
    memo.controller = Controller(await Kube.connect(ours.kubeconfig), ours)
    memo.monitor = ProgressMonitor(memo.controller.kube, ours)
    logger.info("tfps operator ready (namespaces: %s)", ", ".join(ours.namespaces) or "all")


@kopf.on.login()
def login(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """Kopf's own credential readers, without an API client library: the pod's service account,
    else the kubeconfig (``--kubeconfig`` is exported as ``$KUBECONFIG`` by the runner)."""
    if memo.settings.kubeconfig is None:
        info = kopf.login_with_service_account(settings=settings, **kwargs)
        if info is not None:
            return info
    return kopf.login_with_kubeconfig(settings=settings, **kwargs)


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    if getattr(memo, "monitor", None) is not None:
        await memo.monitor.close()
    if getattr(memo, "controller", None) is not None:
        await memo.controller.kube.close()


@kopf.daemon(GROUP, VERSION, PLURAL, id="reconcile", cancellation_backoff=2, cancellation_timeout=10)
async def job_loop(name: str, namespace: str, stopped: Any, memo: kopf.Memo, **_: Any) -> None:
    await memo.controller.run(namespace, name, stopped)


@kopf.daemon(GROUP, VERSION, PLURAL, id="progress", field="status.phase", value="Running",
             cancellation_backoff=1, cancellation_timeout=5)
async def progress_loop(name: str, namespace: str, stopped: Any, memo: kopf.Memo, **_: Any) -> None:
    """Pulls the chief's progress into status.checkpoint/progress while the job is Running (monitor.py)."""
    await memo.monitor.run(namespace, name, stopped)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(name: str, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.wake(namespace, name)


@kopf.on.event("", "v1", "pods", labels=MANAGED)
async def pod_event(labels: dict[str, str], namespace: str, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.wake(namespace, labels.get(L.JOB_NAME))


@kopf.on.event("batch", "v1", "jobs", labels=MANAGED)
async def export_job_event(labels: dict[str, str], namespace: str, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.wake(namespace, labels.get(L.JOB_NAME))


@kopf.on.probe(id="jobs")
def jobs_probe(memo: kopf.Memo, **_: Any) -> int:
    """Reported by the liveness endpoint: the number of jobs with a running loop."""
    controller = getattr(memo, "controller", None)
    return len(controller.jobs) if controller else 0
