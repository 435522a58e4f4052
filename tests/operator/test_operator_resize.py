"""Resizing running jobs on the real API server (kwok runs the pods): the scale subresource as kubectl
and an HPA call it, a resize racing an operator restart, and an elastic job whose workers do not all fit.

* Scaled up, a ParameterServer job first gets the new workers beside its run (standby pods), then its
  chief is stopped and every pod restarts with the new TF_CONFIG; scaled down, the highest-index workers
  leave and the rest keep running, untouched.
* A resize whose restart an operator kill interrupts ends with one pod per name and one resize.
* An elastic job whose last worker cannot be scheduled runs without it after ``pendingTimeoutSeconds``
  (reason WorkersPending, an Event, the metric), and grows back when a node gains room.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from operator_harness import KWOK_HANDS_OFF, Cluster, OperatorProcess, job_body

from tfps_operator.api.models import GROUP, PLURAL, VERSION

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def uids(kube: Cluster, job: str) -> dict[str, str]:
    return {
        n: p["metadata"]["uid"] for n, p in kube.trainer_pods(job).items() if not p["metadata"].get("deletionTimestamp")
    }


def workers_in_tf_config(pod: dict[str, Any]) -> int:
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    return len(json.loads(env["TF_CONFIG"])["cluster"]["worker"])


def scale(kube: Cluster, job: str, n: int) -> None:
    """What ``kubectl scale psjob JOB --replicas N`` and an HPA do: a patch of the scale subresource."""
    kube.custom.patch_namespaced_custom_object_scale(GROUP, VERSION, kube.ns, PLURAL, job, {"spec": {"replicas": n}})


def names(job: str, workers: int) -> list[str]:
    return [f"{job}-chief-0", f"{job}-ps-0", *(f"{job}-worker-{i}" for i in range(workers))]


def test_kubectl_scale_grows_a_job_through_a_restart_and_shrinks_it_live(kube: Cluster, operator: OperatorProcess):
    kube.create_job(job_body("s", workers=2))
    kube.wait_pods_running("s", names("s", 2))
    kube.wait_phase("s", "Running")
    st = kube.status("s")
    assert st["clusterSize"] == {"ps": 1, "worker": 2} and st["workerSelector"].endswith("replica-type=worker")
    got = kube.custom.get_namespaced_custom_object_scale(GROUP, VERSION, kube.ns, PLURAL, "s")
    assert got["status"]["replicas"] == 2 and got["status"]["selector"] == st["workerSelector"]

    scale(kube, "s", 4)
    st = kube.wait_until(
        lambda: (s := kube.status("s")).get("resize", {}).get("completed") and s, timeout=60, what="grown to 4"
    )
    assert st["clusterSize"]["worker"] == 4 and st["restarts"] == 1 and st["resizes"] == 1
    assert st["resize"]["method"] == "Restart" and st["resize"]["reason"] == "Scaled"
    pods = kube.wait_pods_running("s", names("s", 4))
    assert all(p["metadata"]["labels"]["tfps.dev/restart"] == "1" for p in pods.values())
    assert {workers_in_tf_config(p) for p in pods.values()} == {4}
    assert {"Resizing", "Resized"} <= kube.event_reasons("s")
    kube.wait_phase("s", "Running")

    before = uids(kube, "s")
    scale(kube, "s", 1)
    st = kube.wait_until(
        lambda: (s := kube.status("s")).get("clusterSize", {}).get("worker") == 1 and s, timeout=30, what="shrunk"
    )
    assert st["resize"]["method"] == "Live" and st["restarts"] == 1
    kube.wait_until(lambda: sorted(uids(kube, "s")) == names("s", 1), timeout=30, what="workers 1-3 gone")
    assert uids(kube, "s") == {n: before[n] for n in names("s", 1)}, "the pods that stay are the same pods"
    kube.wait_until(lambda: kube.status("s").get("workers") == "1/1", timeout=20, what="Workers 1/1")


def test_a_resize_interrupted_by_an_operator_restart_creates_no_duplicate_and_is_not_lost(
    kube: Cluster, start_operator: Callable[..., OperatorProcess]
):
    op = start_operator(kube.ns)
    kube.create_job(job_body("r", workers=2, chief_template=KWOK_HANDS_OFF))
    kube.wait_until(
        lambda: (
            all(
                kube.trainer_pods("r").get(n, {}).get("status", {}).get("phase") == "Running" for n in names("r", 2)[1:]
            )
            and "r-chief-0" in kube.trainer_pods("r")
        ),
        timeout=30,
        what="ps and workers running, the chief created (kwok leaves it Pending)",
    )
    scale(kube, "r", 3)
    # the operator deletes the chief (it would save on SIGTERM); kwok leaves it to us: still stopping
    kube.wait_until(
        lambda: kube.trainer_pods("r").get("r-chief-0", {}).get("metadata", {}).get("deletionTimestamp"),
        timeout=30,
        what="chief stopping",
    )
    op.kill()
    kube.core.delete_namespaced_pod("r-chief-0", kube.ns, grace_period_seconds=0)
    start_operator(kube.ns)
    st = kube.wait_until(
        lambda: (s := kube.status("r")).get("clusterSize", {}).get("worker") == 3 and s.get("restarts") == 1 and s,
        timeout=60,
        what="restarted at 3 workers",
    )
    assert st["resizes"] == 1
    kube.wait_until(lambda: sorted(uids(kube, "r")) == names("r", 3), timeout=30, what="the new run's pods")
    time.sleep(3)
    assert kube.status("r")["restarts"] == 1 and sorted(uids(kube, "r")) == names("r", 3)


def test_an_elastic_job_runs_without_a_worker_that_cannot_be_scheduled_and_grows_back(
    kube: Cluster, pool: dict[str, Any], operator: OperatorProcess
):
    body = job_body("e", workers=5)  # 7 pods of 1 cpu on a pool of 6 cpu: the last worker stays Pending
    body["spec"]["replicas"]["worker"].update(minReplicas=2, pendingTimeoutSeconds=10)
    for role in ("chief", "ps", "worker"):
        body["spec"]["replicas"][role]["template"] = pool["template"]
    kube.create_job(body)
    st = kube.wait_until(
        lambda: (s := kube.status("e")).get("resize", {}).get("reason") == "WorkersPending" and s,
        timeout=60,
        what="the Pending worker left out",
    )
    assert st["resize"]["to"]["worker"] == 4
    st = kube.wait_until(
        lambda: (s := kube.status("e")).get("phase") == "Running" and s.get("resize", {}).get("completed") and s,
        timeout=60,
        what="running at 4",
    )
    assert st["clusterSize"]["worker"] == 4 and st["workersLeftOut"] == 1 and st["reason"] == "WorkersPending"
    assert st["workers"] == "4/4 (want 5)" and "WorkersLeftOut" in kube.event_reasons("e")
    kube.wait_until(lambda: "e-worker-4" in kube.trainer_pods("e"), timeout=20, what="a standby pod in its place")
    operator.wait_metrics(f'tfps_job_workers_left_out{{job_namespace="{kube.ns}",pstrainingjob="e"}} 1.0')

    node = pool["nodes"][0]  # room for one more pod: the standby worker runs, the job grows back to 5
    room = {"cpu": "4", "memory": "8Gi", "pods": "20"}
    kube.core.patch_node_status(node, {"status": {"allocatable": room, "capacity": room}})
    st = kube.wait_until(
        lambda: (s := kube.status("e")).get("clusterSize", {}).get("worker") == 5 and s, timeout=90, what="grown"
    )
    assert st["resize"]["reason"] == "CapacityFreed"
    st = kube.wait_until(
        lambda: (s := kube.status("e")).get("resize", {}).get("completed") and s, timeout=60, what="running at 5"
    )
    assert st["workersLeftOut"] == 0 and st.get("reason") != "WorkersPending" and st["resizes"] == 2
