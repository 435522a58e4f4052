"""Kueue on the real API server: hack/cluster's Kueue (v0.17.0) admits the Workloads the operator creates,
against a ClusterQueue whose quota holds one job, on kwok nodes of limited capacity.

* Three queued jobs run one at a time, each whole, in queue order; the waiting ones are Suspended with
  reason WaitingForAdmission (``kubectl get psjob`` shows it) and Kueue's words; pods land where the
  admitted ResourceFlavor sends them; deleting a waiting job leaves no Workload behind; a restarted
  operator duplicates nothing.
* An evicted job (its ClusterQueue stopped with HoldAndDrain) is suspended, gives its quota back once its
  pods are gone, and resumes when Kueue admits it again.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from operator_harness import PODS_PER_JOB, Cluster, OperatorProcess, bound, contended_job

from support import kueue

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

KUEUE = kueue.API
ENV = {"TFPS_KUEUE": "true"}
POOL_KEY = "tfps.dev/test-pool"


def toleration(ns: str) -> dict[str, str]:
    return {"key": POOL_KEY, "operator": "Equal", "value": ns, "effect": "NoSchedule"}


def _workloads(kube: Cluster) -> dict[str, dict[str, Any]]:
    items = kube.custom.list_namespaced_custom_object(*KUEUE, kube.ns, "workloads")["items"]
    return {w["metadata"]["name"]: w for w in items}


def _cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


@pytest.fixture
def queue(kube: Cluster, pool: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A ResourceFlavor that sends pods to the pool (its node label and toleration), a ClusterQueue
    with the quota of one job (4 cpu) for this namespace, a LocalQueue ``lq``. StrictFIFO: in order."""
    name = kube.ns
    flavor = kueue.resource_flavor(name, {POOL_KEY: kube.ns}, [toleration(kube.ns)])
    cq = kueue.cluster_queue(name, kube.ns, name, "4", queueingStrategy="StrictFIFO")
    kube.custom.create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
    kube.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    kube.custom.create_namespaced_custom_object(*KUEUE, kube.ns, "localqueues", kueue.local_queue("lq", name))
    kube.wait_until(
        lambda: (
            _cond(kube.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", name), "Active").get("status")
            == "True"
        ),
        timeout=30,
        interval=0.3,
        what="ClusterQueue Active",
    )
    # Pods ask for 1 cpu each; where they go is the flavor's business (no nodeSelector, no toleration).
    template = {"spec": {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}}
    yield {"cluster_queue": name, "template": template, "nodes": pool["nodes"]}
    for kind, n in (("clusterqueues", name), ("resourceflavors", name)):
        try:
            kube.custom.delete_cluster_custom_object(*KUEUE, kind, n)
        except Exception:
            pass


def queued_job(name: str, q: dict[str, Any]) -> dict[str, Any]:
    return contended_job(name, q["template"], schedulingPolicy={"queue": "lq"})


def _pods_on_pool(kube: Cluster, job: str, nodes: list[str]) -> None:
    for p in kube.trainer_pods(job).values():
        assert p["spec"]["nodeSelector"][POOL_KEY] == kube.ns  # the admitted flavor's node label
        assert {"key": POOL_KEY, "operator": "Equal", "value": kube.ns, "effect": "NoSchedule"} in p["spec"][
            "tolerations"
        ]
        assert p["spec"]["nodeName"] in nodes


def _names(job: str) -> list[str]:
    return [f"{job}-chief-0", f"{job}-ps-0", f"{job}-worker-0", f"{job}-worker-1"]


def test_three_queued_jobs_run_one_at_a_time_whole_in_queue_order(
    kube: Cluster,
    queue: dict[str, Any],
    start_operator: Callable[..., OperatorProcess],
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    op = start_operator(kube.ns, extra_env=ENV)
    for job in ("a", "b", "c"):  # Kueue orders by the Workload's creation (whole seconds): one second apart
        kube.create_job(queued_job(job, queue))
        kube.wait_until(
            lambda job=job: f"psjob-{job}" in _workloads(kube), timeout=30, interval=0.2, what=f"{job}'s Workload"
        )
        time.sleep(1.1)
    wl = _workloads(kube)["psjob-a"]
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("chief", 1), ("ps", 1), ("worker", 2)]
    assert wl["metadata"]["ownerReferences"][0]["name"] == "a" and wl["spec"]["queueName"] == "lq"

    kube.wait_pods_running("a", _names("a"), timeout=60)
    kube.wait_phase("a", "Running", timeout=30)
    _pods_on_pool(kube, "a", queue["nodes"])
    for job in ("b", "c"):
        st = kube.wait_until(
            lambda job=job: (s := kube.status(job)).get("reason") == "WaitingForAdmission" and s,
            timeout=30,
            interval=0.3,
            what=f"{job} waiting for admission",
        )
        assert st["phase"] == "Suspended" and kube.trainer_pods(job) == {}
        assert "LocalQueue lq" in kube.condition(job, "Suspended")["message"]
    listing = kubectl("-n", kube.ns, "get", "psjob").stdout
    assert [
        line.split()[1:2] + line.split()[-2:-1] for line in listing.splitlines() if line.startswith(("b ", "c "))
    ] == [
        ["Suspended", "WaitingForAdmission"],
        ["Suspended", "WaitingForAdmission"],
    ], listing

    # An operator killed and restarted now duplicates and changes nothing.
    before = {j: sorted(p["metadata"]["uid"] for p in kube.trainer_pods(j).values()) for j in "abc"}
    workloads = {n: w["metadata"]["uid"] for n, w in _workloads(kube).items()}
    op.kill()
    start_operator(kube.ns, extra_env=ENV)
    time.sleep(8)
    assert {j: sorted(p["metadata"]["uid"] for p in kube.trainer_pods(j).values()) for j in "abc"} == before
    assert {n: w["metadata"]["uid"] for n, w in _workloads(kube).items()} == workloads

    # A waiting job deleted leaves no Workload behind.
    kube.delete_job("c")
    kube.wait_until(lambda: "psjob-c" not in _workloads(kube), timeout=30, interval=0.3, what="c's Workload gone")

    # a finishes: its Workload is Finished, the quota goes to b, which runs whole.
    kube.finish_pod("a-chief-0", "Succeeded", 0)
    kube.wait_phase("a", "Succeeded", timeout=30)
    kube.wait_until(
        lambda: _cond(_workloads(kube).get("psjob-a"), "Finished").get("status") == "True",
        timeout=30,
        interval=0.3,
        what="a's Workload Finished",
    )
    kube.wait_pods_running("b", _names("b"), timeout=60)
    kube.wait_phase("b", "Running", timeout=30)
    assert len(bound(kube, "b")) == PODS_PER_JOB
    _pods_on_pool(kube, "b", queue["nodes"])
    assert {"WaitingForAdmission", "JobResumed"} <= kube.event_reasons("b")


def test_an_evicted_job_is_suspended_gives_its_quota_back_and_resumes_when_admitted_again(
    kube: Cluster, queue: dict[str, Any], start_operator: Callable[..., OperatorProcess]
) -> None:
    start_operator(kube.ns, extra_env=ENV)
    kube.create_job(queued_job("a", queue))
    first = kube.wait_pods_running("a", _names("a"), timeout=60)
    kube.wait_phase("a", "Running", timeout=30)
    cq = queue["cluster_queue"]

    kube.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", cq, {"spec": {"stopPolicy": "HoldAndDrain"}})
    kube.wait_until(lambda: "Evicted" in kube.event_reasons("a"), timeout=30, interval=0.3, what="Evicted event")
    kube.wait_until(lambda: kube.trainer_pods("a") == {}, timeout=60, interval=0.3, what="a's pods deleted")
    released = kube.wait_until(
        lambda: (w := _workloads(kube)["psjob-a"]) and not (w.get("status") or {}).get("admission") and w,
        timeout=30,
        interval=0.3,
        what="a's admission given back",
    )
    assert _cond(released, "QuotaReserved")["status"] == "False"
    assert _cond(released, "Evicted")["status"] == "True"
    assert kube.status("a")["phase"] == "Suspended"

    kube.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", cq, {"spec": {"stopPolicy": "None"}})
    again = kube.wait_pods_running("a", _names("a"), timeout=60)
    kube.wait_phase("a", "Running", timeout=30)
    assert {n: p["metadata"]["uid"] for n, p in again.items()}.keys() == first.keys()
    assert all(again[n]["metadata"]["uid"] != first[n]["metadata"]["uid"] for n in first)  # new pods
    assert kube.status("a").get("reason") is None


def test_an_elastic_job_starts_with_the_workers_kueue_can_admit(
    kube: Cluster, queue: dict[str, Any], start_operator: Callable[..., OperatorProcess]
) -> None:
    """Partial admission: the quota holds 4 of the 6 pods the job asks for (chief, ps, 4 workers); its
    worker pod set says ``minCount`` 1, so Kueue admits 2 workers and the job runs with them."""
    start_operator(kube.ns, extra_env=ENV)
    body = contended_job("p", queue["template"], schedulingPolicy={"queue": "lq"})
    body["spec"]["replicas"]["worker"].update(replicas=4, minReplicas=1)
    kube.create_job(body)
    wl = kube.wait_until(
        lambda: (w := _workloads(kube).get("psjob-p")) and (w.get("status") or {}).get("admission") and w,
        timeout=60,
        interval=0.3,
        what="p's Workload admitted",
    )
    worker_set = next(p for p in wl["spec"]["podSets"] if p["name"] == "worker")
    assert (worker_set["count"], worker_set["minCount"]) == (4, 1)
    admitted = {a["name"]: a["count"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert admitted == {"chief": 1, "ps": 1, "worker": 2}
    kube.wait_pods_running("p", _names("p"), timeout=60)
    st = kube.wait_phase("p", "Running", timeout=30)
    assert st["clusterSize"] == {"ps": 1, "worker": 2} and st["workersLeftOut"] == 2
    assert st["workers"] == "2/2 (want 4)" and st["reason"] == "WorkersPending"
    time.sleep(2)
    assert sorted(kube.trainer_pods("p")) == _names("p"), "no pod beyond what Kueue admitted"
