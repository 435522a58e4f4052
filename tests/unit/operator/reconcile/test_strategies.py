"""Worker-only (MultiWorkerMirrored) jobs beside parameter-server jobs: what the strategy seam changes in the
pods the operator builds and in the state machine's decisions, and what it leaves as it was."""

from __future__ import annotations

import json

import pytest

from support.operator_helpers import CFG, T0, all_pods, later, make_job, observed, pod, status
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.monitor import _lead_pod, parse_report
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.strategies import lead_of
from tfps_operator.strategies import multi_worker_mirrored as mwms
from tfps_operator.strategies import parameter_server as ps
from tfps_wire.job_settings import JobSettings

RUNNING = {"phase": "Running", "startTime": T0.isoformat()}
PROGRAM = ["python", "train.py"]


def mwms_job(workers: int = 2, chief: int = 0, **spec):
    replicas = {"chief": {"replicas": chief}} if chief else {}
    return make_job(
        ps=0,
        workers=workers,
        strategy="MultiWorkerMirrored",
        model={"command": PROGRAM},
        training={},
        **({"replicas": {**replicas, "worker": {"replicas": workers}}} if chief else {}),
        **spec,
    )


def env_of(manifest: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in manifest["spec"]["containers"][0]["env"]}


def deleted(plan) -> list[str]:
    return sorted(a.name for a in plan.deletes() if a.kind == "Pod")


def reasons(plan) -> list[str]:
    return [e.reason for e in plan.events]


# --- the seam itself ---------------------------------------------------------------------------------


def test_the_lead_is_the_chief_else_worker_0_and_success_follows_the_policy():
    with_chief = {"chief": 1, "ps": 0, "worker": 2, "evaluator": 0}
    workers_only = {"chief": 0, "ps": 0, "worker": 2, "evaluator": 1}
    assert mwms.STRATEGY.lead(with_chief) == ("chief", 0)
    assert mwms.STRATEGY.lead(workers_only) == ("worker", 0)
    assert ps.STRATEGY.lead({"chief": 1, "ps": 1, "worker": 1}) == ("chief", 0)
    lead_done = {("worker", 0)}
    assert mwms.STRATEGY.training_succeeded(lead_done, workers_only, "ChiefOrWorker0")
    assert not mwms.STRATEGY.training_succeeded({("worker", 1)}, workers_only, "ChiefOrWorker0")
    assert not mwms.STRATEGY.training_succeeded(lead_done, workers_only, "AllWorkers")
    assert mwms.STRATEGY.training_succeeded({("worker", 0), ("worker", 1)}, workers_only, "AllWorkers")
    assert not mwms.STRATEGY.training_succeeded({("worker", 0), ("worker", 1)}, with_chief, "AllWorkers")


# --- pods -----------------------------------------------------------------------------------------------


def test_a_worker_only_job_has_worker_pods_with_a_workers_only_tf_config_and_worker_0_leads():
    job = mwms_job(workers=2)
    pods = desired_pods(job, CFG)
    assert sorted(pods) == ["mnist-worker-0", "mnist-worker-1"]
    cfg = json.loads(env_of(pods["mnist-worker-1"])["TF_CONFIG"])
    assert set(cfg["cluster"]) == {"worker"} and len(cfg["cluster"]["worker"]) == 2
    assert cfg["task"] == {"type": "worker", "index": 1}
    settings = JobSettings.model_validate_json(env_of(pods["mnist-worker-0"])["TFPS_JOB"])
    assert settings.strategy == "MultiWorkerMirrored" and set(settings.script.programs) == {"worker"}
    ports = {n: [p["name"] for p in m["spec"]["containers"][0]["ports"]] for n, m in pods.items()}
    assert ports == {"mnist-worker-0": ["grpc", "progress"], "mnist-worker-1": ["grpc"]}
    assert lead_of(job) == ("worker", 0)


def test_with_a_chief_the_chief_leads_and_is_part_of_the_cluster():
    job = mwms_job(workers=2, chief=1)
    pods = desired_pods(job, CFG)
    assert sorted(pods) == ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    cfg = json.loads(env_of(pods["mnist-worker-0"])["TF_CONFIG"])
    assert set(cfg["cluster"]) == {"chief", "worker"}
    assert [p["name"] for p in pods["mnist-worker-0"]["spec"]["containers"][0]["ports"]] == ["grpc"]


def test_the_export_job_runs_with_the_leads_template():
    job = make_job(
        ps=0,
        workers=2,
        strategy="MultiWorkerMirrored",
        model={"command": PROGRAM, "module": "tfps_trainer.examples.linear"},
        training={},
        replicas={"worker": {"replicas": 2, "template": {"spec": {"nodeSelector": {"pool": "train"}}}}},
    )
    assert export_job(job, CFG)["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "train"}


def test_the_monitor_polls_the_lead_and_reads_a_workers_report():
    body = mwms_job().to_wire()
    assert _lead_pod(body, "mnist") == "mnist-worker-0"
    assert _lead_pod(make_job().to_wire(), "mnist") == "mnist-chief-0"
    assert _lead_pod({"spec": "garbage"}, "mnist") == "mnist-chief-0"
    report = parse_report(json.dumps({"role": "worker", "job": "mnist", "step": 7}), "mnist")
    assert report is not None and report.progress.step == 7
    assert parse_report(json.dumps({"role": "evaluator", "job": "mnist", "step": 7}), "mnist") is None


# --- the state machine -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["worker", "chief"])
def test_any_worker_or_chief_failure_restarts_every_pod_from_the_checkpoint(role):
    job = mwms_job(workers=2, chief=1)
    pods = all_pods(job)
    failed = next(i for i, p in enumerate(pods) if p["metadata"]["name"] == f"mnist-{role}-0")
    pods[failed] = pod(job, role, 0, "Failed", exit_code=1, message="collective timed out")
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.restarts == 1 and plan.status.preemptions == 0
    assert plan.status.phase == "Restarting" and "JobRestarting" in reasons(plan)
    assert deleted(plan) == ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    assert {a.grace_seconds for a in plan.deletes()} == {5}  # survivors cannot save: no long grace
    assert plan.status.recreations == {}


def test_the_first_pod_to_fail_is_named_as_the_cause_not_the_peer_that_failed_after_it():
    job = mwms_job(workers=2, replicas={"worker": {"replicas": 2, "restartPolicy": "ExitCode"}})
    pods = all_pods(job)
    pods[0] = pod(job, "worker", 0, "Failed", exit_code=5, message="Collective ops is aborted by: peer")
    pods[1] = pod(job, "worker", 1, "Failed", exit_code=137)
    pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-01-01T12:00:09Z"
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Restarting"
    restarting = next(e.message for e in plan.events if e.reason == "JobRestarting")
    assert restarting.startswith("worker failed (exit code 137"), restarting


def test_the_same_worker_failure_in_a_ps_job_recreates_only_that_worker():
    job = make_job(ps=1, workers=2)
    pods = all_pods(job)
    pods[3] = pod(job, "worker", 1, "Failed", exit_code=1)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.restarts == 0 and deleted(plan) == ["mnist-worker-1"]
    pods[0] = pod(job, "chief", 0, "Failed", exit_code=1)
    restart = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert restart.status.restarts == 1 and {a.grace_seconds for a in restart.deletes()} == {None}


def test_a_vanished_worker_restarts_the_job_as_a_preemption():
    job = mwms_job(workers=2)
    pods = all_pods(job)[:1]
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.restarts == 1 and plan.status.preemptions == 1
    assert "JobPreempted" in reasons(plan)


def test_preemption_checkpoint_handlers_exit_42_is_a_preemption_even_under_restart_policy_exit_code():
    job = mwms_job(workers=2, replicas={"worker": {"replicas": 2, "restartPolicy": "ExitCode"}})
    pods = all_pods(job)
    pods[1] = pod(job, "worker", 1, "Failed", exit_code=42)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Restarting" and plan.status.preemptions == 1
    assert "PreemptionSaved" in next(e.message for e in plan.events if e.reason == "JobPreempted")


def test_a_worker_that_finished_first_is_neither_a_failure_nor_the_end():
    job = mwms_job(workers=2, export={"enabled": False})
    pods = all_pods(job, worker_1="Succeeded")
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Running" and deleted(plan) == [] and plan.status.restarts == 0


def test_worker_0_finishing_ends_training_and_its_summary_is_the_final_checkpoint():
    job = mwms_job(workers=2, export={"enabled": False})
    pods = all_pods(job)
    pods[0] = pod(
        job, "worker", 0, "Succeeded", exit_code=0, message="completed step 90/90; final checkpoint /c/ckpt-90"
    )
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(60), CFG)
    assert plan.status.phase == "Succeeded"
    assert plan.status.checkpoint.step == 90 and plan.status.checkpoint.path == "/c/ckpt-90"
    assert any("worker 0 finished training" in e.message for e in plan.events)
    assert deleted(plan) == ["mnist-worker-1"]  # cleanPodPolicy Running


def test_all_workers_policy_waits_for_every_worker():
    job = mwms_job(workers=2, export={"enabled": False}, runPolicy={"successPolicy": "AllWorkers"})
    first = reconcile(job, status(**RUNNING), observed(job, all_pods(job, worker_0="Succeeded")), later(10), CFG)
    assert first.status.phase == "Running"
    pods = all_pods(job, "Succeeded")
    assert reconcile(job, status(**RUNNING), observed(job, pods), later(20), CFG).status.phase == "Succeeded"


def test_suspending_a_worker_only_job_stops_every_pod_at_once():
    job = mwms_job(workers=2, chief=1, runPolicy={"suspend": True})
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job)), later(50), CFG)
    assert plan.status.phase == "Suspended"
    assert deleted(plan) == ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    assert C.is_true(plan.status, C.SUSPENDED)
