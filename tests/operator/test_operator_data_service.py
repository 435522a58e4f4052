"""A job with a tf.data service on the real API server (hack/cluster, kwok runs the pods, the test plays kubelet):
its pods, their addresses and the NetworkPolicy that admits them, status, and the failure rules of
docs/data-service.md (a data worker recreated alone, the service left running through a training restart, a
dispatcher that cannot start failing the job with its reason)."""

from __future__ import annotations

import json

import pytest
from operator_harness import job_body

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0", "j-worker-1"]
SERVICE = ["j-dispatcher-0", "j-dataworker-0", "j-dataworker-1"]


def uids(pods, names):
    return {n: pods[n]["metadata"]["uid"] for n in names}


def env_of(pod):
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_the_service_runs_beside_training_is_recreated_alone_survives_a_restart_and_fails_the_job_with_its_reason(
    kube, operator
):
    body = job_body("j", run_policy={"backoffLimit": 3})
    body["spec"]["replicas"].update(dispatcher={"replicas": 1}, dataWorker={"replicas": 2})
    kube.create_job(body)
    pods = kube.wait_pods_running("j", TRAINERS + SERVICE)
    st = kube.wait_phase("j", "Running")
    kube.wait_until(lambda: kube.status("j").get("dataWorkers") == "2/2", timeout=20, what="dataWorkers 2/2")
    st = kube.status("j")
    assert st["replicaStatuses"]["dispatcher"]["active"] == 1 and st["replicaStatuses"]["dataworker"]["active"] == 2

    # addresses: the training cluster does not list the service; the chief finds the dispatcher in TFPS_JOB
    chief = env_of(pods["j-chief-0"])
    assert set(json.loads(chief["TF_CONFIG"])["cluster"]) == {"chief", "ps", "worker"}
    ns = kube.ns
    assert json.loads(chief["TFPS_JOB"])["data_service"]["dispatcher"] == f"j-dispatcher-0.j.{ns}.svc:2222"
    worker = json.loads(env_of(pods["j-dataworker-1"])["TF_CONFIG"])
    assert worker["task"] == {"type": "dataworker", "index": 1}
    assert worker["cluster"]["dataworker"][1] == f"j-dataworker-1.j.{ns}.svc:2222"
    for name in SERVICE:
        spec = pods[name]["spec"]
        assert spec["hostname"] == name and spec["subdomain"] == "j"  # stable DNS names through the headless Service
        assert [p["containerPort"] for p in spec["containers"][0]["ports"]] == [2222]
    # the job's policy admits the job's own pods, the service's included, to that port and nothing else to it
    (policy,) = kube.net.list_namespaced_network_policy(ns, label_selector="tfps.dev/job-name=j").items
    grpc = [r for r in policy.spec.ingress if r.ports[0].port == 2222]
    assert (
        len(grpc) == 1
        and grpc[0]._from[0].pod_selector.match_labels.items() <= pods["j-dataworker-0"]["metadata"]["labels"].items()
    )

    # a data worker dies: it alone is recreated, training goes on
    kube.finish_pod("j-dataworker-1", "Failed", 137, reason="OOMKilled")
    after = kube.wait_until(
        lambda: (
            (p := kube.wait_pods_running("j", TRAINERS + SERVICE))
            and p["j-dataworker-1"]["metadata"]["uid"] != pods["j-dataworker-1"]["metadata"]["uid"]
            and p
        ),
        timeout=40,
        interval=0.3,
        what="dataworker-1 recreated",
    )
    unchanged = [n for n in TRAINERS + SERVICE if n != "j-dataworker-1"]
    assert uids(after, unchanged) == uids(pods, unchanged)
    assert kube.status("j")["restarts"] == 0 and kube.status("j")["phase"] == "Running"

    # a parameter server dies: the training cluster restarts around the service, which keeps running
    kube.finish_pod("j-ps-0", "Failed", 137, reason="OOMKilled")
    kube.wait_until(lambda: kube.status("j").get("restarts") == 1, timeout=20, what="restarts == 1")
    again = kube.wait_until(
        lambda: (
            (p := kube.wait_pods_running("j", TRAINERS + SERVICE))
            and not set(uids(p, TRAINERS).values()) & set(uids(after, TRAINERS).values())
            and p
        ),
        timeout=40,
        interval=0.3,
        what="the training pods recreated",
    )
    assert uids(again, SERVICE) == uids(after, SERVICE)
    kube.wait_phase("j", "Running")

    # the dispatcher cannot start (its journal cannot be written): the job fails at once with its reason
    reason = "tfps-trainer dispatcher/0: tf.data service dispatcher: its journal /tfps/x cannot be written"
    kube.finish_pod("j-dispatcher-0", "Failed", 2, reason)
    kube.wait_phase("j", "Failed")
    failed = kube.condition("j", "Failed")
    assert "journal /tfps/x cannot be written" in failed["message"], failed
