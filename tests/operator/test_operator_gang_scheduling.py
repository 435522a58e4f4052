"""Gang scheduling on the real API server with hack/cluster's gang scheduler (scheduler-plugins'
Coscheduling) and kwok nodes of limited capacity, so that contention is real: two jobs that each fit
alone but not together.

* With gang scheduling (the operator started with ``TFPS_GANG_SCHEDULER_NAME``), one job runs whole and
  the other has no bound pod until the first finishes; then it runs whole.
* Without it, the default scheduler splits them: capacity is held by a job that cannot run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from operator_harness import CPU_PER_NODE, NODES, PODS_PER_JOB, Cluster, OperatorProcess, bound, contended_job

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

GANG_SCHEDULER = "scheduler-plugins-scheduler"


def pod_group(kube: Cluster, name: str) -> dict[str, Any] | None:
    from kubernetes.client.rest import ApiException

    try:
        return kube.custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", kube.ns, "podgroups", name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_gang_scheduling_runs_one_job_whole_and_binds_nothing_of_the_other_until_it_finishes(
    kube: Cluster, pool: dict[str, Any], start_operator: Callable[..., OperatorProcess]
) -> None:
    gang_env = {"TFPS_GANG_SCHEDULER_NAME": GANG_SCHEDULER}
    op = start_operator(kube.ns, extra_env=gang_env)
    kube.create_job(contended_job("a", pool["template"]))
    kube.create_job(contended_job("b", pool["template"]))

    for job in ("a", "b"):
        pg = kube.wait_until(lambda job=job: pod_group(kube, job), timeout=30, interval=0.2, what=f"PodGroup {job}")
        assert pg["spec"]["minMember"] == PODS_PER_JOB
        assert pg["metadata"]["ownerReferences"][0]["name"] == job
    kube.wait_until(
        lambda: len(kube.trainer_pods("a")) + len(kube.trainer_pods("b")) == 2 * PODS_PER_JOB,
        timeout=30,
        interval=0.2,
        what="both jobs' pods created",
    )
    for job in ("a", "b"):
        for p in kube.trainer_pods(job).values():
            assert p["spec"]["schedulerName"] == GANG_SCHEDULER
            assert p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == job

    first = kube.wait_until(
        lambda: next((j for j in ("a", "b") if len(bound(kube, j)) == PODS_PER_JOB), None),
        timeout=60,
        interval=0.3,
        what=f"one job bound whole (a: {bound(kube, 'a')}, b: {bound(kube, 'b')})",
    )
    second = "b" if first == "a" else "a"
    kube.wait_phase(first, "Running", timeout=30)
    # The other job keeps every pod unbound (watched for longer than the scheduler's permit wait and
    # its retries), and says why in its conditions.
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        assert bound(kube, second) == [], f"{second} got a pod bound while {first} holds the pool"
        time.sleep(0.5)
    waiting = kube.wait_until(
        lambda: (c := kube.condition(second, "GangScheduled")) and c["status"] == "False" and c,
        timeout=30,
        interval=0.3,
        what=f"{second} GangScheduled=False",
    )
    assert waiting["reason"] == "WaitingForGang" and f"minMember {PODS_PER_JOB}" in waiting["message"], waiting
    assert kube.status(second)["phase"] == "Pending"
    # ... and says it as the training pods do: the Reason column, condition Waiting, one Event
    kube.wait_until(
        lambda: kube.status(second).get("reason") == "WaitingForGang", timeout=30, interval=0.3, what="its reason"
    )
    assert kube.condition(second, "Waiting")["reason"] == "WaitingForGang"
    assert [e["reason"] for e in kube.events(second)].count("WaitingForGang") == 1
    assert kube.condition(first, "GangScheduled")["status"] == "True"

    # An operator killed and restarted now duplicates and changes nothing.
    before = {j: sorted(p["metadata"]["uid"] for p in kube.trainer_pods(j).values()) for j in ("a", "b")}
    groups = {j: pod_group(kube, j)["metadata"]["uid"] for j in ("a", "b")}
    op.kill()
    start_operator(kube.ns, extra_env=gang_env)
    time.sleep(10)
    assert {j: sorted(p["metadata"]["uid"] for p in kube.trainer_pods(j).values()) for j in ("a", "b")} == before
    assert {j: pod_group(kube, j)["metadata"]["uid"] for j in ("a", "b")} == groups
    assert (
        len(kube.custom.list_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", kube.ns, "podgroups")["items"])
        == 2
    )
    assert bound(kube, second) == []

    kube.finish_pod(f"{first}-chief-0", "Succeeded", 0)
    kube.wait_phase(first, "Succeeded", timeout=30)
    kube.wait_pods_running(
        second, [f"{second}-chief-0", f"{second}-ps-0", f"{second}-worker-0", f"{second}-worker-1"], timeout=90
    )
    kube.wait_phase(second, "Running", timeout=30)
    assert len(bound(kube, second)) == PODS_PER_JOB
    assert kube.condition(second, "GangScheduled")["status"] == "True"


def test_without_gang_scheduling_the_default_scheduler_splits_the_jobs(
    kube: Cluster, pool: dict[str, Any], start_operator: Callable[..., OperatorProcess]
) -> None:
    start_operator(kube.ns)
    # minAvailable is set, but this operator does not gang-schedule: it changes nothing.
    kube.create_job(contended_job("a", pool["template"], schedulingPolicy={"minAvailable": PODS_PER_JOB}))
    kube.create_job(contended_job("b", pool["template"]))
    capacity = NODES * CPU_PER_NODE
    kube.wait_until(
        lambda: len(bound(kube, "a")) + len(bound(kube, "b")) == capacity,
        timeout=60,
        interval=0.3,
        what=f"the pool full (a: {bound(kube, 'a')}, b: {bound(kube, 'b')})",
    )
    counts = sorted(len(bound(kube, j)) for j in ("a", "b"))
    assert 0 < counts[0] < PODS_PER_JOB, f"a job holds {counts[0]} of its {PODS_PER_JOB} pods: capacity it cannot use"
    for job in ("a", "b"):
        for p in kube.trainer_pods(job).values():
            assert p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
            assert "scheduling.x-k8s.io/pod-group" not in p["metadata"]["labels"]
    for job in ("a", "b"):
        assert pod_group(kube, job) is None
        assert kube.condition(job, "GangScheduled") is None
