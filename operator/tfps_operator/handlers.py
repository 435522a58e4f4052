"""Kopf registrations, nothing else: every rule lives in :mod:`tfps_operator.reconcile`.

* one daemon per PSTrainingJob runs its reconcile loop (:class:`~tfps_operator.controller.Controller`);
* one more per Running job polls its chief's progress (:class:`~tfps_operator.monitor.ProgressMonitor`);
* indexes of the operator's children (pods, export Jobs, Services, NetworkPolicies, PVCs, and
  PodGroups when gang scheduling is on: :func:`register_gang_handlers`), reduced
  to small observations and keyed by (namespace, job), are what those loops read instead of the API
  server (:mod:`tfps_operator.kube.watched`); Kopf fills them before any daemon starts;
* read-only event handlers on the job and its children wake that loop. Indexes and event handlers
  store nothing on objects, so Kopf never writes annotations or finalizers on children.

Kopf's own bookkeeping on the PSTrainingJob (the finalizer that lets the daemon stop cleanly) uses
the ``tfps.dev`` prefix. ``memo.settings`` (an :class:`~tfps_operator.settings.OperatorSettings`)
is provided by the runner.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from .api.models import GROUP, PLURAL, VERSION
from .controller import Controller
from .kube.client import Kube
from .kube.watched import ChildRef, JobKey, Views, child_ref
from .manifests import podgroup
from .manifests.labels import JOB_NAME, MANAGED_BY
from .monitor import ProgressMonitor
from .reconcile.observed import BatchJobObs, PodObs, batch_job_obs, pod_obs
from .settings import FINALIZER, PREFIX, OperatorSettings

MANAGED = {"app.kubernetes.io/managed-by": MANAGED_BY}
WATCHED_CHILDREN = (
    ("v1", "pods"),
    ("batch/v1", "jobs"),
    ("v1", "services"),
    ("v1", "persistentvolumeclaims"),
    ("networking.k8s.io/v1", "networkpolicies"),
)
"""Child resources watched (server-side filtered to the operator's own, by label)."""


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    ours = memo.settings
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.peering.lifetime = ours.peering_lifetime
    # Filter pods and Jobs on the server: only the operator's own children are ever sent to it.
    selector = ",".join(f"{k}={v}" for k, v in MANAGED.items())
    for resource in WATCHED_CHILDREN + ((podgroup.API_VERSION, "podgroups"),):
        settings.watching.label_selectors[resource] = selector
    kube = await Kube.connect(
        lambda: credentials(settings, memo),
        timeout=ours.api_timeout_seconds,
        connect_timeout=ours.api_connect_timeout_seconds,
    )
    memo.controller = Controller(kube, ours)
    memo.monitor = ProgressMonitor(memo.controller.kube, ours)
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
    if getattr(memo, "monitor", None) is not None:
        await memo.monitor.close()
    if getattr(memo, "controller", None) is not None:
        await memo.controller.kube.close()


# --- indexes: what the loops read instead of the API server ----------------------------------------
# Coroutines on purpose: Kopf runs a plain function handler in a thread pool, a hop per event.


def _key(namespace: str | None, labels: Mapping[str, str]) -> JobKey | None:
    job = labels.get(JOB_NAME)
    return (namespace, job) if namespace and job else None


@kopf.index("", "v1", "pods", labels=MANAGED)
async def pods_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[JobKey, PodObs] | None:
    key = _key(namespace, labels)
    return {key: pod_obs(body)} if key else None


@kopf.index("batch", "v1", "jobs", labels=MANAGED)
async def export_jobs_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[JobKey, BatchJobObs] | None:
    key = _key(namespace, labels)
    return {key: batch_job_obs(body)} if key else None


@kopf.index("", "v1", "services", labels=MANAGED)
async def services_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[JobKey, ChildRef] | None:
    key = _key(namespace, labels)
    return {key: child_ref("Service", body)} if key else None


@kopf.index("networking.k8s.io", "v1", "networkpolicies", labels=MANAGED)
async def network_policies_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[JobKey, ChildRef] | None:
    key = _key(namespace, labels)
    return {key: child_ref("NetworkPolicy", body)} if key else None


@kopf.index("", "v1", "persistentvolumeclaims", labels=MANAGED)
async def claims_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[JobKey, ChildRef] | None:
    key = _key(namespace, labels)
    return {key: child_ref("PersistentVolumeClaim", body)} if key else None


async def pod_groups_by_job(
    namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
) -> dict[JobKey, ChildRef] | None:
    key = _key(namespace, labels)
    return {key: child_ref(podgroup.KIND, body)} if key else None


def register_gang_handlers(settings: OperatorSettings) -> None:
    """The PodGroup index and wake-up, only when the operator gang-schedules: without it the
    PodGroup CRD may not exist and the chart grants no access to PodGroups."""
    if not podgroup.gang_enabled(settings.build):
        return
    group, version = podgroup.API_VERSION.split("/")
    kopf.index(group, version, "podgroups", labels=MANAGED, id="pod_groups_by_job")(pod_groups_by_job)
    kopf.on.event(group, version, "podgroups", labels=MANAGED, id="pod_group_event")(_child_event(podgroup.KIND))


def _views(kw: dict[str, Any]) -> Views:
    pod_groups = (kw["pod_groups_by_job"],) if "pod_groups_by_job" in kw else ()
    return Views(
        pods=kw["pods_by_job"],
        export_jobs=kw["export_jobs_by_job"],
        children=(kw["services_by_job"], kw["network_policies_by_job"], kw["claims_by_job"], *pod_groups),
    )


# --- the loops ------------------------------------------------------------------------------------


def _namespaced(namespace: str | None) -> str:
    """Kopf types ``namespace`` for cluster-scoped resources too; the job and its children are namespaced."""
    assert namespace is not None
    return namespace


@kopf.daemon(GROUP, VERSION, PLURAL, id="reconcile", cancellation_backoff=2, cancellation_timeout=10)
async def job_loop(
    name: str, namespace: str | None, stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **kw: Any
) -> None:
    await memo.controller.run(_namespaced(namespace), name, stopped, body, _views(kw))


@kopf.daemon(
    GROUP,
    VERSION,
    PLURAL,
    id="progress",
    field="status.phase",
    value="Running",
    cancellation_backoff=1,
    cancellation_timeout=5,
)
async def progress_loop(
    name: str, namespace: str | None, stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **kw: Any
) -> None:
    """Pulls the chief's progress into status.checkpoint/progress while the job is Running (monitor.py)."""
    await memo.monitor.run(_namespaced(namespace), name, stopped, body, _views(kw))


# --- wake-ups -------------------------------------------------------------------------------------


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_event(name: str, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    memo.controller.wake(_namespaced(namespace), name)


def _child_event(kind: str) -> Any:
    async def wake(
        name: str, uid: str, labels: Mapping[str, str], namespace: str | None, memo: kopf.Memo, **_: Any
    ) -> None:
        memo.controller.wake(_namespaced(namespace), labels.get(JOB_NAME), f"{kind}/{name}", uid)

    return wake


kopf.on.event("", "v1", "pods", labels=MANAGED, id="pod_event")(_child_event("Pod"))
kopf.on.event("batch", "v1", "jobs", labels=MANAGED, id="export_job_event")(_child_event("Job"))
kopf.on.event("", "v1", "services", labels=MANAGED, id="service_event")(_child_event("Service"))
kopf.on.event("networking.k8s.io", "v1", "networkpolicies", labels=MANAGED, id="network_policy_event")(
    _child_event("NetworkPolicy")
)
kopf.on.event("", "v1", "persistentvolumeclaims", labels=MANAGED, id="claim_event")(
    _child_event("PersistentVolumeClaim")
)


@kopf.on.probe(id="jobs")
def jobs_probe(memo: kopf.Memo, **_: Any) -> int:
    """Reported by the liveness endpoint: the number of jobs with a running loop."""
    controller = getattr(memo, "controller", None)
    return len(controller.jobs) if controller else 0
