"""The tf.data service's pods in the state machine (docs/data-service.md): created with the job, recreated
alone when they fail while training goes on, left running through a restart of the training cluster, a
service that cannot start failing the job with its reason; in status, gang scheduling and Kueue."""

from __future__ import annotations

from support.operator_helpers import CFG, T0, all_pods, later, make_job, observed, pod, status
from tfps_operator.manifests.podgroup import min_member
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.manifests.workload import workload
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.writes import status_patch

RUNNING = {"phase": "Running", "startTime": T0.isoformat()}


def served(workers: int = 2, data_workers: int = 2, **spec):
    replicas = {
        "ps": {"replicas": 1},
        "worker": {"replicas": workers, **spec.pop("worker", {})},
        "dispatcher": {"replicas": 1},
        "dataWorker": {"replicas": data_workers},
    }
    return make_job(replicas=replicas, **spec)


def service_pods(job, restart: int = 0, **phases: str):
    return [
        pod(job, "dispatcher", 0, phases.get("dispatcher_0", "Running"), restart=restart),
        *(pod(job, "dataworker", i, phases.get(f"dataworker_{i}", "Running"), restart=restart) for i in range(2)),
    ]


def test_a_new_job_creates_the_service_with_the_training_cluster():
    job = served()
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    created = [a.manifest["metadata"]["name"] for a in plan.creates() if a.manifest["kind"] == "Pod"]
    assert created[-3:] == ["mnist-dispatcher-0", "mnist-dataworker-0", "mnist-dataworker-1"]


def test_a_failed_data_worker_is_recreated_alone_while_training_goes_on():
    job = served()
    pods = all_pods(job) + service_pods(job)
    pods[-1] = pod(job, "dataworker", 1, "Failed", exit_code=137)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert [a.name for a in plan.deletes()] == ["mnist-dataworker-1"]
    assert plan.status.phase == "Running" and plan.status.restarts == 0
    assert "DataworkerRestarted" in [e.reason for e in plan.events]
    assert plan.status.data_workers == "1/2"
    assert status_patch(plan.status)["dataWorkers"] == "1/2"  # written by the reconciler


def test_a_failed_dispatcher_is_recreated_alone_and_a_missing_one_is_created_again():
    job = served()
    pods = all_pods(job) + service_pods(job, dispatcher_0="Failed")
    pods[-3] = pod(job, "dispatcher", 0, "Failed", exit_code=1)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert [a.name for a in plan.deletes()] == ["mnist-dispatcher-0"]
    assert plan.status.restarts == 0 and plan.status.data_workers == "2/2, no dispatcher"
    gone = [p for p in pods if p["metadata"]["name"] != "mnist-dispatcher-0"]
    plan = reconcile(job, plan.status, observed(job, gone), later(20), CFG)
    assert [a.manifest["metadata"]["name"] for a in plan.creates()] == ["mnist-dispatcher-0"]
    assert plan.status.phase == "Running" and plan.recreated == ["dispatcher"]


def test_a_service_that_cannot_start_fails_the_job_with_its_reason():
    job = served()
    reason = "tfps-trainer dispatcher/0: tf.data service dispatcher: its journal /tfps/x cannot be written"
    pods = all_pods(job) + service_pods(job)
    pods[-3] = pod(job, "dispatcher", 0, "Failed", exit_code=2, message=reason)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Failed"
    failed = C.get(plan.status, C.FAILED)
    assert failed is not None and "journal /tfps/x cannot be written" in failed.message


def test_a_training_restart_leaves_the_service_running_and_counts_it_in_the_new_run():
    job = served()
    pods = all_pods(job) + service_pods(job)
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=137)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.restarts == 1 and plan.status.phase == "Restarting"
    assert sorted(a.name for a in plan.deletes()) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    # the old training pods gone, the new run is created around the service that kept running
    plan = reconcile(job, plan.status, observed(job, service_pods(job, restart=0)), later(12), CFG)
    created = [a.manifest["metadata"]["name"] for a in plan.creates()]
    assert created == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"]
    assert plan.deletes() == []
    plan = reconcile(job, plan.status, observed(job, all_pods(job, restart=1) + service_pods(job)), later(13), CFG)
    assert plan.status.phase == "Running" and plan.deletes() == [] and plan.creates() == []
    assert plan.status.replica_statuses["dataworker"].ready == 2
    assert plan.status.replica_statuses["dispatcher"].ready == 1


def test_gang_scheduling_and_kueue_count_the_whole_service():
    job = served(workers=4, data_workers=3, worker={"minReplicas": 2})
    assert min_member(job) == 1 + 1 + 2 + 1 + 3  # chief, ps, the elastic minimum of workers, the whole service
    sets = {s["name"]: s for s in workload(job, desired_pods(job, CFG), None)["spec"]["podSets"]}
    assert (sets["dispatcher"]["count"], sets["dataworker"]["count"]) == (1, 3)
    assert "minCount" not in sets["dataworker"] and sets["worker"]["minCount"] == 2


def test_the_dispatcher_alone_of_the_service_gets_the_storage_credentials():
    job = served(storage={"uri": "gs://bucket/jobs", "credentialsSecret": {"name": "gcs", "key": "key.json"}})
    pods = desired_pods(job, CFG)

    def has_credentials(name: str) -> bool:
        return any(e["name"] == "GOOGLE_APPLICATION_CREDENTIALS" for e in pods[name]["spec"]["containers"][0]["env"])

    assert has_credentials("mnist-dispatcher-0") and has_credentials("mnist-chief-0")
    assert not has_credentials("mnist-dataworker-0") and not has_credentials("mnist-worker-0")
