"""hack/cluster's Kueue is real: it admits Workloads within quota, queues the rest, preempts, and leaves
batch Jobs alone unless asked.

Workloads here are made the way the operator makes them for a PSTrainingJob (Kueue's external framework
route): created by a client with ``spec.queueName`` and pod sets, owned (controller) by a PSTrainingJob,
and finished or requeued by status patches as an external job controller does. No operator runs: the
PSTrainingJob is only an owner.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from support.parallel import worker_tag

pytestmark = pytest.mark.cluster

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
PSJOB_GROUP, PSJOB_VERSION = "tfps.dev", "v1alpha1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
BATCH_JOBS_LABEL = "kueue.tfps.dev/manage-batch-jobs"  # hack/lib/kueue.sh: namespaces where Kueue manages Jobs
FIELD_MANAGER = "tfps-test-job-controller"
IMAGE = "tfps.invalid/never-pulled:1"


@pytest.fixture(scope="module")
def psjob_crd(kubeconfig: str) -> dict[str, Any]:
    from support.crd import install_crd

    return install_crd(kubeconfig)


@pytest.fixture
def api(k8s: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(k8s)


class Queues:
    """A ResourceFlavor, a ClusterQueue (cpu quota on that flavor, every namespace) and a LocalQueue."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str, cpu: str, preemption: dict | None) -> None:
        suffix = f"{worker_tag()}{secrets.token_hex(3)}"  # cluster-scoped names: apart across xdist workers
        self.api, self.namespace = api, namespace
        self.flavor, self.cq, self.lq = f"t-flavor-{suffix}", f"t-cq-{suffix}", "team"
        self.priority_classes: list[str] = []
        api.create_cluster_custom_object(
            GROUP,
            VERSION,
            "resourceflavors",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ResourceFlavor",
                "metadata": {"name": self.flavor},
                "spec": {"nodeLabels": {"type": "kwok"}},
            },
        )
        cq_spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": self.flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        }
        if preemption:
            cq_spec["preemption"] = preemption
        api.create_cluster_custom_object(
            GROUP,
            VERSION,
            "clusterqueues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ClusterQueue",
                "metadata": {"name": self.cq},
                "spec": cq_spec,
            },
        )
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "localqueues",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "LocalQueue",
                "metadata": {"name": self.lq},
                "spec": {"clusterQueue": self.cq},
            },
        )

    def priority_class(self, value: int) -> str:
        name = f"t-prio-{value}-{worker_tag()}{secrets.token_hex(3)}"
        self.api.create_cluster_custom_object(
            GROUP,
            VERSION,
            "workloadpriorityclasses",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
        self.priority_classes.append(name)
        return name

    def delete(self) -> None:
        """Cluster-scoped objects (Kueue's finalizers let them go once no Workload uses them)."""
        for plural, name in [
            ("clusterqueues", self.cq),
            ("resourceflavors", self.flavor),
            *[("workloadpriorityclasses", n) for n in self.priority_classes],
        ]:
            try:
                self.api.delete_cluster_custom_object(GROUP, VERSION, plural, name)
            except ApiException as e:
                if e.status != 404:
                    raise


@pytest.fixture
def make_queues(api: client.CustomObjectsApi, namespace: str) -> Iterator[Callable[..., Queues]]:
    made: list[Queues] = []

    def make(cpu: str = "2", preemption: dict | None = None, ns: str | None = None) -> Queues:
        q = Queues(api, ns or namespace, cpu, preemption)
        made.append(q)
        return q

    yield make
    for q in made:
        for wl in api.list_namespaced_custom_object(GROUP, VERSION, q.namespace, "workloads")["items"]:
            try:  # a Workload's GC waits for its namespace; delete now so the queues can go
                api.delete_namespaced_custom_object(GROUP, VERSION, q.namespace, "workloads", wl["metadata"]["name"])
            except ApiException as e:
                if e.status != 404:
                    raise
        q.delete()


def make_psjob(api: client.CustomObjectsApi, namespace: str, name: str, labels: dict | None = None) -> dict:
    body = {
        "apiVersion": f"{PSJOB_GROUP}/{PSJOB_VERSION}",
        "kind": "PSTrainingJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "replicas": {"worker": {"replicas": 1}},
            "training": {"steps": 10},
        },
    }
    return api.create_namespaced_custom_object(PSJOB_GROUP, PSJOB_VERSION, namespace, "pstrainingjobs", body)


def owner_ref(obj: dict) -> dict:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def make_workload(
    api: client.CustomObjectsApi,
    namespace: str,
    name: str,
    owner: dict,
    queue: str,
    count: int,
    cpu: str = "1",
    priority: tuple[str, int] | None = None,
) -> dict:
    """A Workload as an external job controller writes it: one pod set ``worker`` of ``count`` pods."""
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": "worker",
                "count": count,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": IMAGE, "resources": {"requests": {"cpu": cpu}}}],
                    }
                },
            }
        ],
    }
    if priority:
        spec["priorityClassRef"] = {"group": GROUP, "kind": "WorkloadPriorityClass", "name": priority[0]}
        spec["priority"] = priority[1]
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name, "ownerReferences": [owner_ref(owner)]},
        "spec": spec,
    }
    return api.create_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", body)


def get_wl(api: client.CustomObjectsApi, namespace: str, name: str) -> dict:
    return api.get_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", name)


def cond(wl: dict, ctype: str) -> dict | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


def is_true(wl: dict, ctype: str) -> bool:
    c = cond(wl, ctype)
    return c is not None and c["status"] == "True"


def wait_wl(
    api: client.CustomObjectsApi, wait_until: Any, namespace: str, name: str, ok: Callable[[dict], bool], what: str
) -> dict:
    return wait_until(
        lambda: (wl := get_wl(api, namespace, name)) and ok(wl) and wl, timeout=60, interval=0.3, what=f"{name}: {what}"
    )


def admitted(wl: dict) -> bool:
    return is_true(wl, "QuotaReserved") and is_true(wl, "Admitted")


def pending(wl: dict) -> bool:
    c = cond(wl, "QuotaReserved")
    return c is not None and c["status"] == "False" and c["reason"] == "Pending" and not is_true(wl, "Admitted")


def finish(api: client.CustomObjectsApi, namespace: str, name: str) -> None:
    """The job controller reports the end: condition Finished=True by server-side apply (its own entry only)."""
    api.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "workloads",
        name,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Workload",
            "metadata": {"name": name},
            "status": {
                "conditions": [
                    {
                        "type": "Finished",
                        "status": "True",
                        "reason": "Succeeded",
                        "message": "the job succeeded",
                        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ]
            },
        },
        field_manager=FIELD_MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def test_workloads_are_admitted_within_quota_queued_beyond_it_and_collected_with_their_owner(
    api, namespace, make_queues, psjob_crd, wait_until
) -> None:
    q = make_queues(cpu="2")
    job_a, job_b = make_psjob(api, namespace, "job-a"), make_psjob(api, namespace, "job-b")

    make_workload(api, namespace, "wl-a", job_a, q.lq, count=1)
    wl_a = wait_wl(api, wait_until, namespace, "wl-a", admitted, "QuotaReserved and Admitted")
    adm = wl_a["status"]["admission"]
    assert adm["clusterQueue"] == q.cq
    (psa,) = adm["podSetAssignments"]
    assert psa["name"] == "worker"
    assert psa["flavors"] == {"cpu": q.flavor}
    assert psa["count"] == 1
    assert psa["resourceUsage"] == {"cpu": "1"}

    # 1 of 2 cpu in use: a Workload of 2 x 1 cpu does not fit and waits, Pending, with the reason.
    make_workload(api, namespace, "wl-b", job_b, q.lq, count=2)
    wl_b = wait_wl(api, wait_until, namespace, "wl-b", pending, "QuotaReserved=False, reason Pending")
    assert "insufficient unused quota for cpu" in cond(wl_b, "QuotaReserved")["message"]
    assert "admission" not in wl_b["status"]
    time.sleep(2)  # still waiting a moment later: nothing frees quota by itself
    assert pending(get_wl(api, namespace, "wl-b"))

    # The job controller marks wl-a Finished: its quota is released and wl-b is admitted.
    finish(api, namespace, "wl-a")
    wl_b = wait_wl(api, wait_until, namespace, "wl-b", admitted, "admitted once wl-a finished")
    assert wl_b["status"]["admission"]["podSetAssignments"][0]["count"] == 2

    # Deleting the owner collects its Workload (ownerReference; no finalizer on client-made Workloads).
    api.delete_namespaced_custom_object(PSJOB_GROUP, PSJOB_VERSION, namespace, "pstrainingjobs", "job-a")

    def wl_a_gone() -> bool:
        try:
            get_wl(api, namespace, "wl-a")
            return False
        except ApiException as e:
            if e.status != 404:
                raise
            return True

    wait_until(wl_a_gone, timeout=60, interval=0.3, what="wl-a garbage-collected after its PSTrainingJob")
    assert admitted(get_wl(api, namespace, "wl-b"))


def test_a_preempted_workload_is_requeued_by_its_job_controller_and_admitted_again(
    api, namespace, make_queues, psjob_crd, wait_until
) -> None:
    q = make_queues(cpu="2", preemption={"withinClusterQueue": "LowerPriority"})
    low, high = q.priority_class(10), q.priority_class(1000)
    job_low, job_high = make_psjob(api, namespace, "job-low"), make_psjob(api, namespace, "job-high")

    make_workload(api, namespace, "wl-low", job_low, q.lq, count=2, priority=(low, 10))
    wait_wl(api, wait_until, namespace, "wl-low", admitted, "admitted")
    make_workload(api, namespace, "wl-high", job_high, q.lq, count=2, priority=(high, 1000))

    # Kueue evicts wl-low (Evicted and Preempted) but keeps its quota reserved until the job controller
    # has stopped the job and cleared the admission; wl-high waits for that.
    wl_low = wait_wl(api, wait_until, namespace, "wl-low", lambda w: is_true(w, "Evicted"), "Evicted")
    assert cond(wl_low, "Evicted")["reason"] == "Preempted"
    assert is_true(wl_low, "Preempted") and cond(wl_low, "Preempted")["reason"] == "InClusterQueue"
    assert is_true(wl_low, "QuotaReserved") and wl_low["status"]["admission"]["clusterQueue"] == q.cq
    time.sleep(2)
    assert not is_true(get_wl(api, namespace, "wl-high"), "QuotaReserved")

    # What Kueue's own job reconciler does once the job is stopped (jobframework step 6:
    # SetRequeuedCondition + UnsetQuotaReservationWithCondition), as a merge patch of the status
    # subresource by an external client: admission removed, QuotaReserved/Admitted False, Requeued True.
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    evicted = cond(wl_low, "Evicted")
    replaced = {
        "QuotaReserved": {"status": "False", "reason": "Pending", "message": evicted["message"]},
        "Admitted": {"status": "False", "reason": "NoReservation", "message": "The workload has no reservation"},
        "Requeued": {"status": "True", "reason": evicted["reason"], "message": evicted["message"]},
    }
    conditions = [c for c in wl_low["status"]["conditions"] if c["type"] not in replaced]
    conditions += [{"type": t, "lastTransitionTime": now, **c} for t, c in replaced.items()]
    api.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "workloads",
        "wl-low",
        {
            "metadata": {"resourceVersion": wl_low["metadata"]["resourceVersion"]},
            "status": {"admission": None, "conditions": conditions},
        },
        _content_type="application/merge-patch+json",
    )

    wait_wl(api, wait_until, namespace, "wl-high", admitted, "admitted once wl-low's quota is released")
    wl_low = wait_wl(api, wait_until, namespace, "wl-low", pending, "requeued: Pending")
    assert "admission" not in wl_low["status"]
    assert is_true(wl_low, "Requeued")

    # wl-high ends: the requeued wl-low is admitted again (the job would resume from its checkpoint).
    finish(api, namespace, "wl-high")
    wl_low = wait_wl(api, wait_until, namespace, "wl-low", admitted, "admitted again")
    assert not is_true(wl_low, "Evicted")


def _workloads_owned_by(api: client.CustomObjectsApi, namespace: str, uid: str) -> list[str]:
    return [
        w["metadata"]["name"]
        for w in api.list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads")["items"]
        if any(o["uid"] == uid for o in w["metadata"].get("ownerReferences") or [])
    ]


def _batch_job(name: str, labels: dict, owner: dict | None = None) -> client.V1Job:
    refs = None
    if owner:
        ref = owner_ref(owner)
        refs = [
            client.V1OwnerReference(
                api_version=ref["apiVersion"], kind=ref["kind"], name=ref["name"], uid=ref["uid"], controller=True
            )
        ]
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name, labels=labels, owner_references=refs),
        spec=client.V1JobSpec(
            suspend=False,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[
                        client.V1Container(
                            name="main", image=IMAGE, resources=client.V1ResourceRequirements(requests={"cpu": "100m"})
                        )
                    ],
                )
            ),
        ),
    )


def test_batch_jobs_are_managed_only_in_opted_in_namespaces(
    api, k8s, make_namespace, make_queues, psjob_crd, wait_until
) -> None:
    batch = client.BatchV1Api(k8s)

    # Control: in a namespace labelled for it, a Job with the queue-name label becomes Kueue's (a Workload).
    opted_in = make_namespace(labels={BATCH_JOBS_LABEL: "true"})
    q = make_queues(ns=opted_in)
    job = batch.create_namespaced_job(opted_in, _batch_job("queued", {QUEUE_LABEL: q.lq}))
    t0 = time.monotonic()
    wait_until(
        lambda: _workloads_owned_by(api, opted_in, job.metadata.uid), timeout=60, what="a Workload for the queued Job"
    )
    took = time.monotonic() - t0

    # Elsewhere, the operator's export Job (no queue label), owned by a PSTrainingJob that carries one and
    # whose Workload has finished, is left alone: not suspended, no Workload of its own.
    ns = make_namespace()
    q2 = make_queues(ns=ns)
    psjob = make_psjob(api, ns, "trained", labels={QUEUE_LABEL: q2.lq})
    make_workload(api, ns, "wl-trained", psjob, q2.lq, count=1)
    wait_wl(api, wait_until, ns, "wl-trained", admitted, "admitted")
    finish(api, ns, "wl-trained")
    export = batch.create_namespaced_job(ns, _batch_job("export", {}, owner=psjob))
    time.sleep(max(5.0, 3 * took))
    assert batch.read_namespaced_job(export.metadata.name, ns).spec.suspend is False
    assert _workloads_owned_by(api, ns, export.metadata.uid) == []
