"""Every transition of the PSTrainingJob state machine, named after the situation it handles."""

from __future__ import annotations

import json

from support.operator_helpers import (
    CFG,
    T0,
    UID,
    all_pods,
    batch_job,
    export_pod,
    later,
    make_job,
    observed,
    pod,
    status,
)
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import creation_failed, invalid_spec, reconcile
from tfps_operator.reconcile.plan import Delete, DeleteOwner, DeletePods


def created_names(plan):
    return [a.manifest["metadata"]["name"] for a in plan.creates()]


def deleted_names(plan):
    return sorted(a.name for a in plan.deletes())


def cond(plan, type_):
    c = C.get(plan.status, type_)
    return (c.status, c.reason) if c else None


def reasons(plan):
    return [e.reason for e in plan.events]


RUNNING = {"phase": "Running", "startTime": T0.isoformat()}


# --- start ----------------------------------------------------------------------------------------


def test_new_job_creates_infra_then_every_pod_and_is_pending():
    job = make_job(ps=2, workers=2)
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    assert created_names(plan) == [
        "mnist-storage",
        "mnist",
        "mnist",
        "mnist-chief-0",
        "mnist-ps-0",
        "mnist-ps-1",
        "mnist-worker-0",
        "mnist-worker-1",
    ]
    assert [a.manifest["kind"] for a in plan.creates()][:3] == ["PersistentVolumeClaim", "Service", "NetworkPolicy"]
    assert plan.status.phase == "Pending"
    assert plan.status.start_time == T0
    assert plan.status.observed_generation == 1
    assert "Accepted" in reasons(plan)


def test_pvc_is_created_before_pods_when_the_job_asks_for_one():
    job = make_job(storage={"volumeClaimTemplate": {"size": "1Gi"}})
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    assert plan.creates()[0].manifest["kind"] == "PersistentVolumeClaim"


def test_reconciling_again_with_everything_present_creates_nothing():
    job = make_job()
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job)), later(5), CFG)
    assert plan.actions == []
    assert plan.events == []


def test_pods_created_but_not_all_scheduled_stay_pending_with_the_scheduler_message():
    job = make_job(ps=1, workers=1)
    pods = [
        pod(job, "chief", 0, "Pending", scheduled=False, unschedulable="0/3 nodes are available: insufficient cpu"),
        pod(job, "ps", 0, "Running"),
        pod(job, "worker", 0, "Pending"),
    ]
    plan = reconcile(job, status(phase="Pending"), observed(job, pods), T0, CFG)
    assert plan.status.phase == "Pending"
    assert cond(plan, C.SCHEDULED) == ("False", "Unschedulable")
    assert "insufficient cpu" in C.get(plan.status, C.SCHEDULED).message


def test_all_scheduled_but_not_running_is_pending_then_running_when_all_run():
    job = make_job(ps=1, workers=1)
    plan = reconcile(job, status(phase="Pending"), observed(job, all_pods(job, "Pending")), T0, CFG)
    assert plan.status.phase == "Pending"
    assert cond(plan, C.SCHEDULED) == ("True", "AllPodsScheduled")
    plan = reconcile(job, plan.status, observed(job, all_pods(job, "Running")), later(1), CFG)
    assert plan.status.phase == "Running"
    assert cond(plan, C.RUNNING) == ("True", "AllReplicasRunning")
    assert "Running" in reasons(plan)
    assert plan.status.replica_statuses["worker"].ready == 1
    assert plan.status.workers == "1/1"


def test_conditions_carry_observed_generation_and_keep_transition_time_while_unchanged():
    job = make_job(ps=1, workers=1)
    first = reconcile(job, status(phase="Pending"), observed(job, all_pods(job)), T0, CFG)
    again = reconcile(job, first.status, observed(job, all_pods(job)), later(30), CFG)
    c = C.get(again.status, C.RUNNING)
    assert c.observed_generation == 1
    assert c.last_transition_time == T0


# --- worker failures ------------------------------------------------------------------------------


def test_worker_failed_is_deleted_and_ps_untouched_and_no_restart_counted():
    job = make_job(ps=2, workers=3)
    pods = all_pods(job)
    pods[4] = pod(job, "worker", 1, "Failed", exit_code=1, message="OOM in step 40")
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert [(a.kind, a.name, a.uid) for a in plan.deletes()] == [("Pod", "mnist-worker-1", "uid-mnist-worker-1-0")]
    assert plan.creates() == []
    assert plan.status.restarts == 0
    assert plan.status.phase == "Running"
    assert "WorkerRestarted" in reasons(plan)


def test_worker_gone_after_failure_is_recreated_with_the_same_name_while_training_goes_on():
    job = make_job(ps=2, workers=3)
    pods = [p for p in all_pods(job) if p["metadata"]["name"] != "mnist-worker-1"]
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert created_names(plan) == ["mnist-worker-1"]
    assert plan.deletes() == []
    assert plan.status.phase == "Running" and plan.status.restarts == 0
    assert plan.recreated == ["worker"]
    assert "ReplicaRecreated" in reasons(plan)


def test_worker_still_terminating_blocks_its_replacement():
    job = make_job(ps=1, workers=2)
    pods = all_pods(job)
    pods[2] = pod(job, "worker", 0, "Failed", exit_code=1, deleting=True)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.actions == []


def test_worker_failed_with_restart_policy_never_fails_the_job():
    job = make_job(
        ps=1, workers=1, replicas={"ps": {"replicas": 1}, "worker": {"replicas": 1, "restartPolicy": "Never"}}
    )
    pods = all_pods(job, worker_0="Failed")
    pods[2] = pod(job, "worker", 0, "Failed", exit_code=5)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Failed"
    assert cond(plan, C.FAILED) == ("True", "ReplicaFailed")
    assert deleted_names(plan) == ["mnist-chief-0", "mnist-ps-0"]  # cleanPodPolicy Running: the failed pod is kept


def test_worker_exiting_zero_is_not_a_success_and_is_replaced():
    job = make_job(ps=1, workers=1)
    pods = all_pods(job)
    pods[2] = pod(job, "worker", 0, "Succeeded", exit_code=0)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert deleted_names(plan) == ["mnist-worker-0"] and plan.status.restarts == 0


# --- PS / chief failures --------------------------------------------------------------------------


def test_ps_failed_while_training_restarts_below_backoff_limit_restarting_all_pods_recreated():
    job = make_job(ps=2, workers=2)
    pods = all_pods(job)
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=137)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.restarts == 1
    assert plan.status.phase == "Restarting"
    assert cond(plan, C.RESTARTING) == ("True", "JobRestarting")
    assert deleted_names(plan) == sorted(p["metadata"]["name"] for p in pods)
    assert plan.creates() == []
    assert plan.job_restarted and "JobRestarting" in reasons(plan)


def test_after_a_restart_old_pods_are_stale_never_counted_again_and_replaced_once_gone():
    job = make_job(ps=1, workers=1)
    old = all_pods(job, restart=0)
    old[1] = pod(job, "ps", 0, "Failed", exit_code=137, restart=0)  # the failure already counted
    st = status(phase="Restarting", restarts=1, startTime=T0.isoformat())
    st.conditions = reconcile(job, status(**RUNNING), observed(job, old), later(10), CFG).status.conditions
    plan = reconcile(job, st, observed(job, old), later(11), CFG)
    assert plan.status.restarts == 1
    assert deleted_names(plan) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]
    assert plan.creates() == []
    plan = reconcile(job, plan.status, observed(job, []), later(12), CFG)
    assert created_names(plan) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]
    assert all(a.manifest["metadata"]["labels"]["tfps.dev/restart"] == "1" for a in plan.creates())
    plan = reconcile(job, plan.status, observed(job, all_pods(job, restart=1)), later(13), CFG)
    assert plan.status.phase == "Running"
    assert cond(plan, C.RESTARTING) == ("False", "AllReplicasRunning")
    assert not C.is_true(plan.status, C.RESTARTING)


def test_status_read_before_our_own_restart_leaves_the_new_runs_pods_alone_and_looks_again():
    # pods of run 1 exist, but this status still says restarts=0 (read before the restart was written)
    job = make_job(ps=1, workers=1)
    new_run = all_pods(job, restart=1)
    plan = reconcile(job, status(**RUNNING), observed(job, new_run), later(10), CFG)
    assert plan.actions == [] and plan.events == []
    assert plan.status.restarts == 0
    assert plan.requeue_after is not None and plan.requeue_after <= 1.0
    # once the read catches up, the same pods are the current run and nothing is deleted
    plan = reconcile(job, status(**{**RUNNING, "restarts": 1}), observed(job, new_run), later(11), CFG)
    assert deleted_names(plan) == []


def test_chief_failed_at_backoff_limit_fails_with_backoff_limit_exceeded():
    job = make_job(ps=1, workers=1, runPolicy={"backoffLimit": 2})
    pods = all_pods(job, restart=2)
    pods[0] = pod(job, "chief", 0, "Failed", exit_code=1, restart=2)
    plan = reconcile(
        job, status(phase="Running", restarts=2, startTime=T0.isoformat()), observed(job, pods), later(10), CFG
    )
    assert plan.status.phase == "Failed"
    assert cond(plan, C.FAILED) == ("True", "BackoffLimitExceeded")
    assert plan.status.completion_time == later(10)
    assert deleted_names(plan) == ["mnist-ps-0", "mnist-worker-0"]


def test_backoff_limit_zero_fails_on_the_first_ps_failure():
    job = make_job(ps=1, workers=1, runPolicy={"backoffLimit": 0})
    pods = all_pods(job)
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=1)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(1), CFG)
    assert cond(plan, C.FAILED) == ("True", "BackoffLimitExceeded")


def test_ps_pod_vanished_while_running_restarts_the_job():
    job = make_job(ps=2, workers=1)
    pods = [p for p in all_pods(job) if p["metadata"]["name"] != "mnist-ps-1"]
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.restarts == 1 and plan.status.phase == "Restarting"
    assert "mnist-ps-1 disappeared" in C.get(plan.status, C.RESTARTING).message


def test_ps_missing_while_pending_is_simply_created():
    job = make_job(ps=2, workers=1)
    pods = [p for p in all_pods(job, "Pending") if p["metadata"]["name"] != "mnist-ps-1"]
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), observed(job, pods), later(1), CFG)
    assert created_names(plan) == ["mnist-ps-1"] and plan.status.restarts == 0


def test_exit_code_policy_permanent_code_fails_signal_retries():
    spec = {"replicas": {"ps": {"replicas": 1, "restartPolicy": "ExitCode"}, "worker": {"replicas": 1}}}
    job = make_job(**spec)
    for code, phase in ((2, "Failed"), (137, "Restarting")):
        pods = all_pods(job)
        pods[1] = pod(job, "ps", 0, "Failed", exit_code=code)
        assert reconcile(job, status(**RUNNING), observed(job, pods), later(1), CFG).status.phase == phase


def test_evaluator_that_finished_is_not_missing():
    job = make_job(ps=1, workers=1, evaluator=1)
    pods = all_pods(job, evaluator_0="Succeeded")
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), observed(job, pods), later(1), CFG)
    assert plan.status.phase == "Running" and plan.actions == []


# --- success and export ---------------------------------------------------------------------------


def test_chief_succeeded_without_export_deletes_running_ps_and_workers_and_succeeds():
    job = make_job(ps=2, workers=2, export={"enabled": False})
    pods = all_pods(job, chief_0="Succeeded")
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(60), CFG)
    assert plan.status.phase == "Succeeded"
    assert cond(plan, C.SUCCEEDED) == ("True", "TrainingSucceeded")
    assert deleted_names(plan) == ["mnist-ps-0", "mnist-ps-1", "mnist-worker-0", "mnist-worker-1"]
    assert plan.status.completion_time == later(60)


def test_chief_succeeded_puts_its_final_checkpoint_into_status_even_if_the_monitor_never_saw_it():
    # a short run: the monitor (which polls only while Running) last saw step 100, or nothing at all
    job = make_job(ps=1, workers=1, export={"enabled": False})
    pods = all_pods(job)
    pods[0] = pod(
        job,
        "chief",
        0,
        "Succeeded",
        exit_code=0,
        message="completed step 300/300; final checkpoint /tfps/default/mnist/checkpoints/ckpt-300",
    )
    for seen in (None, {"step": 100, "path": "/tfps/default/mnist/checkpoints/ckpt-100"}):
        st = status(**RUNNING, **({"checkpoint": seen} if seen else {}))
        plan = reconcile(job, st, observed(job, pods), later(60), CFG)
        assert plan.status.checkpoint.step == 300
        assert plan.status.checkpoint.path == "/tfps/default/mnist/checkpoints/ckpt-300"
        assert plan.status.checkpoint.time is not None
    # a newer checkpoint already in status is never replaced by an older summary, nor by a missing one
    st = status(**RUNNING, checkpoint={"step": 400, "path": "/x/ckpt-400"})
    assert reconcile(job, st, observed(job, pods), later(60), CFG).status.checkpoint.step == 400
    pods[0] = pod(job, "chief", 0, "Succeeded", exit_code=0, message="completed step 300/300; final checkpoint -")
    assert reconcile(job, status(**RUNNING), observed(job, pods), later(60), CFG).status.checkpoint is None


def test_clean_pod_policy_none_keeps_pods_and_all_deletes_the_chief_too():
    for policy, expected in (("None", []), ("All", ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"])):
        job = make_job(ps=1, workers=1, export={"enabled": False}, runPolicy={"cleanPodPolicy": policy})
        plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job, chief_0="Succeeded")), later(1), CFG)
        assert deleted_names(plan) == expected


def test_a_finished_jobs_pods_go_in_one_delete_collection_selected_like_the_policy():
    job = make_job(ps=2, workers=3, export={"enabled": False})
    pods = all_pods(job, chief_0="Succeeded", worker_2="Failed")
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(1), CFG)
    (batch,) = [a for a in plan.actions if isinstance(a, DeletePods)]
    assert batch.label_selector == (
        "app.kubernetes.io/managed-by=tfps-operator,tfps.dev/job-name=mnist,app.kubernetes.io/component!=export"
    )
    assert batch.field_selector == "status.phase!=Succeeded,status.phase!=Failed"
    assert sorted(d.name for d in batch.pods) == ["mnist-ps-0", "mnist-ps-1", "mnist-worker-0", "mnist-worker-1"]
    assert not [a for a in plan.actions if isinstance(a, Delete)]  # nothing deleted twice
    # the pass after: the pods are going; nothing more to delete, and they no longer count
    going = [
        {**p, "metadata": {**p["metadata"], "deletionTimestamp": "2026-01-01T12:00:01Z"}}
        if p["metadata"]["name"] in {d.name for d in batch.pods}
        else p
        for p in pods
    ]
    again = reconcile(job, plan.status, observed(job, going), later(2), CFG)
    assert again.deletes() == [] and again.status.replica_statuses["ps"].active == 0


def test_chief_succeeded_with_export_creates_the_export_job_and_is_exporting():
    job = make_job(ps=1, workers=1)
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job, chief_0="Succeeded")), later(60), CFG)
    assert plan.status.phase == "Exporting"
    assert cond(plan, C.EXPORTING) == ("True", "ExportStarted")
    assert created_names(plan) == ["mnist-export"]
    assert plan.status.export.job_name == "mnist-export"
    assert deleted_names(plan) == ["mnist-ps-0", "mnist-worker-0"]


def test_exporting_with_the_export_job_present_never_creates_a_second_one():
    job = make_job(ps=1, workers=1)
    obs = observed(job, [export_pod(job, "Running")], export_job=batch_job(job))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(70), CFG)
    assert plan.status.phase == "Exporting"
    assert plan.creates() == []


def test_exporting_after_operator_restart_without_the_job_creates_it_once():
    job = make_job(ps=1, workers=1)
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), observed(job), later(70), CFG)
    assert created_names(plan) == ["mnist-export"]


RESULT = {
    "ok": True,
    "step": 120,
    "path": "exports/120",
    "manifest": "exports/120/manifest.json",
    "artifacts": [
        {
            "format": "savedmodel",
            "path": "exports/120/savedmodel",
            "bytes": 51234,
            "sha256": "ab" * 32,
            "maxError": 0.0,
            "quantization": None,
        },
        {
            "format": "tflite",
            "path": "exports/120/model.tflite",
            "bytes": 2048,
            "sha256": "cd" * 32,
            "maxError": 1e-7,
            "quantization": "none",
        },
    ],
}


def test_export_job_complete_fills_status_export_from_the_termination_message_and_succeeds():
    job = make_job(ps=1, workers=1)
    obs = observed(
        job, [export_pod(job, "Succeeded", json.dumps(RESULT), exit_code=0)], export_job=batch_job(job, "Complete")
    )
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert plan.status.phase == "Succeeded"
    assert cond(plan, C.SUCCEEDED) == ("True", "ExportSucceeded")
    exp = plan.status.export
    assert (exp.job_name, exp.step, exp.path) == ("mnist-export", 120, "exports/120")
    assert [(a.format, a.bytes, a.max_error) for a in exp.artifacts] == [
        ("savedmodel", 51234, 0.0),
        ("tflite", 2048, 1e-7),
    ]
    assert not C.is_true(plan.status, C.EXPORTING)


def test_export_job_failed_reports_the_exporters_reason_as_export_failed():
    job = make_job(ps=1, workers=1)
    msg = json.dumps({"ok": False, "reason": "VerificationFailed", "message": "onnx: max abs error 3e-05 > 1e-05"})
    obs = observed(
        job,
        [export_pod(job, "Failed", msg, exit_code=7)],
        export_job=batch_job(job, "Failed", "Job has reached the specified backoff limit"),
    )
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert plan.status.phase == "Failed"
    assert cond(plan, C.FAILED) == ("True", "ExportFailed")
    assert C.get(plan.status, C.FAILED).message == "VerificationFailed: onnx: max abs error 3e-05 > 1e-05"


def test_export_failed_without_a_message_names_the_reason_from_the_exit_code():
    job = make_job(ps=1, workers=1)
    obs = observed(job, [export_pod(job, "Failed", "", exit_code=4)], export_job=batch_job(job, "Failed"))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert C.get(plan.status, C.FAILED).message.startswith("CheckpointNotFound (exit code 4)")


def test_export_complete_but_garbage_termination_message_is_export_failed():
    job = make_job(ps=1, workers=1)
    obs = observed(job, [export_pod(job, "Succeeded", "done!", exit_code=0)], export_job=batch_job(job, "Complete"))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert cond(plan, C.FAILED) == ("True", "ExportFailed")
    assert "not an export result" in C.get(plan.status, C.FAILED).message


def test_an_optional_format_that_failed_is_recorded_with_an_event_and_the_job_still_succeeds():
    job = make_job(ps=1, workers=1)
    failed = {
        "format": "tflite",
        "quantization": "int8",
        "reason": "VerificationFailed",
        "message": "tflite (int8): output 'probs': argmax agreement 0.700 < minArgmaxAgreement 0.9",
    }
    msg = json.dumps({**RESULT, "failed": [failed]})
    obs = observed(job, [export_pod(job, "Succeeded", msg, exit_code=0)], export_job=batch_job(job, "Complete"))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert plan.status.phase == "Succeeded" and cond(plan, C.SUCCEEDED) == ("True", "ExportSucceeded")
    assert cond(plan, C.EXPORT_COMPLETE) == ("False", "FormatsFailed")
    assert "tflite (int8)" in C.get(plan.status, C.EXPORT_COMPLETE).message
    (f,) = plan.status.export.failed
    assert (f.format, f.quantization, f.reason) == ("tflite", "int8", "VerificationFailed")
    assert [(e.type, e.reason) for e in plan.events if e.reason == "ExportFormatFailed"] == [
        ("Warning", "ExportFormatFailed")
    ]
    assert "argmax agreement 0.700" in next(e.message for e in plan.events if e.reason == "ExportFormatFailed")


def test_every_format_exported_sets_export_complete_true():
    job = make_job(ps=1, workers=1)
    obs = observed(
        job, [export_pod(job, "Succeeded", json.dumps(RESULT), exit_code=0)], export_job=batch_job(job, "Complete")
    )
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert cond(plan, C.EXPORT_COMPLETE) == ("True", "AllFormatsExported")
    assert plan.status.export.failed == []


def test_a_required_format_that_failed_fails_the_job_and_status_shows_what_was_published():
    job = make_job(ps=1, workers=1, export={"required": ["savedmodel", "onnx"]})
    failed = {
        "format": "onnx",
        "reason": "ConversionFailed",
        "message": "onnx (opset 17): ops tf2onnx could not convert: Igamma",
    }
    msg = json.dumps(
        {
            "ok": False,
            "reason": "ConversionFailed",
            "message": "required format(s) onnx failed: ...",
            "step": 120,
            "path": "exports/120",
            "artifacts": RESULT["artifacts"][:1],
            "failed": [failed],
        }
    )
    obs = observed(job, [export_pod(job, "Failed", msg, exit_code=6)], export_job=batch_job(job, "Failed"))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(90), CFG)
    assert plan.status.phase == "Failed" and cond(plan, C.FAILED) == ("True", "ExportFailed")
    assert C.get(plan.status, C.FAILED).message.startswith("ConversionFailed: required format(s) onnx failed")
    assert [a.format for a in plan.status.export.artifacts] == ["savedmodel"]
    assert [f.format for f in plan.status.export.failed] == ["onnx"]


# --- export pre-flight -----------------------------------------------------------------------------


def _preflight_report(**fields) -> str:
    artifacts = [
        {"format": f, "quantization": q, "bytes": 100, "maxError": 0.0}
        for f, q in (("savedmodel", None), ("tflite", "none"), ("onnx", None))
    ]
    return json.dumps({"preflight": True, "ok": True, "artifacts": artifacts, **fields})


def test_a_new_job_with_preflight_creates_only_the_preflight_job_and_infra_and_stays_pending():
    job = make_job(ps=1, workers=1, export={"preflight": True})
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    assert plan.status.phase == "Pending"
    assert "mnist-preflight" in created_names(plan)
    assert not [n for n in created_names(plan) if n.startswith(("mnist-chief", "mnist-ps"))]
    job_manifest = next(a.manifest for a in plan.creates() if a.manifest["kind"] == "Job")
    assert job_manifest["spec"]["backoffLimit"] == 0
    assert job_manifest["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "--preflight"
    # while it runs, nothing more is created
    again = reconcile(
        job,
        plan.status,
        observed(job, [export_pod(job, "Running", preflight=True)], preflight_job=batch_job(job, preflight=True)),
        later(5),
        CFG,
    )
    assert again.creates() == [] and again.status.phase == "Pending"


def test_preflight_passed_records_the_condition_and_creates_the_pods_in_the_same_pass():
    job = make_job(ps=1, workers=1, export={"preflight": True})
    obs = observed(
        job,
        [export_pod(job, "Succeeded", _preflight_report(), exit_code=0, preflight=True)],
        preflight_job=batch_job(job, "Complete", preflight=True),
    )
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), obs, later(20), CFG)
    assert cond(plan, C.EXPORT_PREFLIGHT) == ("True", "PreflightPassed")
    assert sorted(n for n in created_names(plan)) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]
    # and once recorded it is never run again (a restart of the job does not repeat it)
    later_plan = reconcile(job, plan.status, observed(job, all_pods(job)), later(30), CFG)
    assert "mnist-preflight" not in created_names(later_plan)


def test_preflight_with_an_optional_format_failing_warns_and_trains():
    job = make_job(ps=1, workers=1, export={"preflight": True})
    failed = [
        {
            "format": "tflite",
            "quantization": "none",
            "reason": "ConversionFailed",
            "message": "tflite: the model has a lookup table LiteRT's built-in ops cannot run",
        }
    ]
    obs = observed(
        job,
        [export_pod(job, "Succeeded", _preflight_report(failed=failed, artifacts=[]), exit_code=0, preflight=True)],
        preflight_job=batch_job(job, "Complete", preflight=True),
    )
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), obs, later(20), CFG)
    assert cond(plan, C.EXPORT_PREFLIGHT) == ("False", "FormatsWillFail")
    assert "lookup table" in C.get(plan.status, C.EXPORT_PREFLIGHT).message
    assert ("Warning", "ExportPreflightWarning") in [(e.type, e.reason) for e in plan.events]
    assert "mnist-chief-0" in created_names(plan)


def test_preflight_with_a_required_format_failing_fails_the_job_before_any_pod():
    job = make_job(ps=1, workers=1, export={"preflight": True})
    failed = [{"format": "savedmodel", "reason": "ConversionFailed", "message": "savedmodel: export failed: boom"}]
    report = _preflight_report(ok=False, artifacts=[], failed=failed, requiredFailed=["savedmodel"])
    obs = observed(
        job,
        [export_pod(job, "Failed", report, exit_code=6, preflight=True)],
        preflight_job=batch_job(job, "Failed", preflight=True),
    )
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), obs, later(20), CFG)
    assert plan.status.phase == "Failed" and cond(plan, C.FAILED) == ("True", "ExportPreflightFailed")
    assert "savedmodel: export failed: boom" in C.get(plan.status, C.FAILED).message
    assert not [n for n in created_names(plan) if n.startswith("mnist-")]


def test_preflight_that_cannot_build_the_model_fails_the_job_with_the_contract_error():
    job = make_job(ps=1, workers=1, export={"preflight": True})
    msg = json.dumps({"ok": False, "reason": "ContractError", "message": "model module 'x' is missing loss"})
    obs = observed(
        job,
        [export_pod(job, "Failed", msg, exit_code=3, preflight=True)],
        preflight_job=batch_job(job, "Failed", preflight=True),
    )
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), obs, later(20), CFG)
    assert cond(plan, C.FAILED) == ("True", "ExportPreflightFailed")
    assert "ContractError: model module 'x' is missing loss" in C.get(plan.status, C.FAILED).message


def test_preflight_that_gave_no_verdict_warns_and_trains_anyway():
    job = make_job(ps=1, workers=1, export={"preflight": True})
    obs = observed(
        job,
        [export_pod(job, "Failed", "OOMKilled", exit_code=137, preflight=True)],
        preflight_job=batch_job(job, "Failed", preflight=True),
    )
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), obs, later(20), CFG)
    assert cond(plan, C.EXPORT_PREFLIGHT) == ("False", "PreflightDidNotRun")
    assert "exit code 137" in C.get(plan.status, C.EXPORT_PREFLIGHT).message
    assert "mnist-chief-0" in created_names(plan)


def test_preflight_is_skipped_when_export_is_off_or_pods_already_exist():
    off = make_job(ps=1, workers=1, export={"enabled": False, "preflight": True})
    assert "mnist-preflight" not in created_names(reconcile(off, status(), observed(off), T0, CFG))
    job = make_job(ps=1, workers=1, export={"preflight": True})
    plan = reconcile(
        job, status(phase="Pending", startTime=T0.isoformat()), observed(job, all_pods(job, "Pending")), later(5), CFG
    )
    assert "mnist-preflight" not in created_names(plan)


# --- deadline, suspend, TTL ----------------------------------------------------------------------


def test_deadline_in_the_future_asks_to_be_woken_exactly_then():
    job = make_job(ps=1, workers=1, runPolicy={"activeDeadlineSeconds": 100})
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job)), later(40), CFG)
    assert plan.requeue_after == 60
    assert plan.status.phase == "Running"


def test_deadline_passed_fails_with_deadline_exceeded_and_deletes_running_pods():
    job = make_job(ps=1, workers=1, runPolicy={"activeDeadlineSeconds": 100})
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job)), later(100), CFG)
    assert plan.status.phase == "Failed"
    assert cond(plan, C.FAILED) == ("True", "DeadlineExceeded")
    assert deleted_names(plan) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]


def test_deadline_passed_while_exporting_deletes_the_export_job():
    job = make_job(ps=1, workers=1, runPolicy={"activeDeadlineSeconds": 100})
    obs = observed(job, [export_pod(job, "Running")], export_job=batch_job(job))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(101), CFG)
    assert cond(plan, C.FAILED) == ("True", "DeadlineExceeded")
    assert ("Job", "mnist-export") in [(a.kind, a.name) for a in plan.deletes()]


def test_suspend_deletes_the_chief_first_then_every_other_pod_keeps_the_job_and_resume_recreates_them():
    job = make_job(ps=1, workers=1, runPolicy={"suspend": True, "activeDeadlineSeconds": 100})
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job)), later(50), CFG)
    assert plan.status.phase == "Suspended"
    assert cond(plan, C.SUSPENDED) == ("True", "JobSuspended")
    assert deleted_names(plan) == ["mnist-chief-0"]  # it saves a checkpoint on SIGTERM: the PS must stay meanwhile
    assert plan.creates() == [] and plan.status.start_time is None
    stopping = [pod(job, "chief", 0, deleting=True), *all_pods(job)[1:]]
    assert deleted_names(reconcile(job, plan.status, observed(job, stopping), later(51), CFG)) == []
    rest = reconcile(job, plan.status, observed(job, all_pods(job)[1:]), later(60), CFG)
    assert deleted_names(rest) == ["mnist-ps-0", "mnist-worker-0"]
    again = reconcile(job, plan.status, observed(job, []), later(500), CFG)
    assert again.status.phase == "Suspended" and again.actions == [] and again.events == []

    resumed = make_job(ps=1, workers=1, runPolicy={"suspend": False, "activeDeadlineSeconds": 100})
    plan = reconcile(resumed, again.status, observed(resumed, []), later(1000), CFG)
    assert plan.status.phase == "Pending"
    assert cond(plan, C.SUSPENDED) == ("False", "JobResumed")
    assert created_names(plan) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]
    assert plan.status.start_time == later(1000)  # the deadline clock starts again
    assert plan.requeue_after == 100


def test_ttl_after_finished_waits_then_deletes_the_job():
    job = make_job(ps=1, workers=1, runPolicy={"ttlSecondsAfterFinished": 30})
    done = status(phase="Succeeded", completionTime=later(100).isoformat())
    plan = reconcile(job, done, observed(job), later(110), CFG)
    assert plan.requeue_after == 20 and plan.actions == []
    plan = reconcile(job, done, observed(job), later(130), CFG)
    assert plan.actions == [DeleteOwner(UID)]


def test_finished_job_is_left_alone_and_cleans_up_leftover_running_pods():
    job = make_job(ps=1, workers=1, export={"enabled": False})
    done = status(phase="Succeeded", completionTime=later(100).isoformat())
    plan = reconcile(job, done, observed(job, all_pods(job, chief_0="Succeeded")), later(110), CFG)
    assert plan.status.phase == "Succeeded"
    assert deleted_names(plan) == ["mnist-ps-0", "mnist-worker-0"]
    assert plan.events == [] and plan.creates() == []


# --- errors ---------------------------------------------------------------------------------------


def test_invalid_template_is_failed_invalid_spec_without_creating_anything():
    job = make_job(
        replicas={"worker": {"replicas": 1, "template": {"spec": {"env": [{"name": "TF_CONFIG", "value": "x"}]}}}}
    )
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    assert plan.status.phase == "Failed"
    assert cond(plan, C.FAILED) == ("True", "InvalidSpec")
    assert "spec.replicas.worker.template.spec.env[0].name" in C.get(plan.status, C.FAILED).message
    assert plan.creates() == []


def test_unparseable_spec_is_failed_invalid_spec_once():
    plan = invalid_spec(status(), 3, "spec.training.steps: Input should be greater than or equal to 1", T0)
    assert plan.status.phase == "Failed" and cond(plan, C.FAILED) == ("True", "InvalidSpec")
    assert C.get(plan.status, C.FAILED).observed_generation == 3
    assert invalid_spec(plan.status, 3, "x", later(1)).events == []


def test_api_server_refusing_a_pod_sets_created_false_with_its_message_and_one_event():
    st = status(phase="Pending")
    msg = {
        "Pod/mnist-ps-0": 'pods "mnist-ps-0" is forbidden: exceeded quota: q, '
        "requested: pods=1, used: pods=2, limited: pods=2"
    }
    changed, event = creation_failed(st, 1, msg, T0)
    assert changed and event.reason == "CreateFailed" and "exceeded quota" in event.message
    assert C.get(st, C.CREATED).status == "False" and C.get(st, C.CREATED).reason == "CreateFailed"
    assert creation_failed(st, 1, msg, later(5)) == (False, None)  # same error again: no new event, no status write


def test_created_condition_turns_true_when_every_child_exists():
    job = make_job(ps=1, workers=1)
    st = status(phase="Pending")
    creation_failed(st, 1, {"Pod/mnist-ps-0": "quota"}, T0)
    plan = reconcile(job, st, observed(job, all_pods(job, "Pending")), later(5), CFG)
    assert cond(plan, C.CREATED) == ("True", "ChildrenCreated")


# --- more situations ------------------------------------------------------------------------------


def test_ps_failing_again_while_restarting_counts_a_second_restart():
    job = make_job(ps=1, workers=1)
    pods = all_pods(job, restart=1)
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=1, restart=1)
    plan = reconcile(
        job, status(phase="Restarting", restarts=1, startTime=T0.isoformat()), observed(job, pods), later(1), CFG
    )
    assert plan.status.restarts == 2 and plan.status.phase == "Restarting"


def test_pods_beyond_the_spec_are_deleted_as_stale():
    job = make_job(ps=1, workers=1)
    bigger = make_job(ps=1, workers=2)
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(bigger)), later(1), CFG)
    assert deleted_names(plan) == ["mnist-worker-1"] and plan.creates() == []


def test_suspend_while_exporting_stops_the_export_and_resume_trains_to_the_final_checkpoint_again():
    job = make_job(ps=1, workers=1, runPolicy={"suspend": True})
    obs = observed(job, [export_pod(job, "Running")], export_job=batch_job(job))
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), obs, later(1), CFG)
    assert plan.status.phase == "Suspended"
    assert plan.actions == [Delete("Job", "mnist-export", "uid-mnist-export")]
    resumed = make_job(ps=1, workers=1)
    plan = reconcile(resumed, plan.status, observed(resumed), later(10), CFG)
    assert plan.status.phase == "Pending" and created_names(plan) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]


def test_export_switched_off_while_exporting_finishes_as_succeeded():
    job = make_job(ps=1, workers=1, export={"enabled": False})
    plan = reconcile(job, status(phase="Exporting", startTime=T0.isoformat()), observed(job), later(1), CFG)
    assert plan.status.phase == "Succeeded"


def test_observed_pod_reads_phase_exit_code_and_termination_message_from_a_raw_pod():
    from tfps_operator.reconcile.observed import pod_obs

    job = make_job()
    p = pod_obs(pod(job, "worker", 2, "Failed", exit_code=137, message="OOMKilled\n", restart=3))
    assert (p.name, p.role, p.index, p.restart, p.phase, p.exit_code, p.message) == (
        "mnist-worker-2",
        "worker",
        2,
        3,
        "Failed",
        137,
        "OOMKilled",
    )
    assert not p.active
    q = pod_obs(
        {
            "metadata": {"name": "x", "uid": "u", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running"},
        }
    )
    assert q.deleting and not q.active and q.role is None


def test_a_failed_pod_whose_replica_type_label_names_no_role_is_observed_without_a_role_and_decides_nothing():
    from tfps_operator.reconcile.observed import pod_obs

    job = make_job()
    raw = pod(job, "worker", 0, "Failed", exit_code=1)
    raw["metadata"]["labels"]["tfps.dev/replica-type"] = "gardener"
    assert pod_obs(raw).role is None
    pods = [raw if p["metadata"]["name"] == "mnist-worker-0" else p for p in all_pods(job)]
    plan = reconcile(job, status(phase="Running", startTime=T0.isoformat()), observed(job, pods), later(1), CFG)
    assert plan.status.phase == "Running" and "mnist-worker-0" not in plan.replaced


def test_status_workers_column_counts_running_workers():
    job = make_job(ps=1, workers=3)
    pods = all_pods(job, worker_2="Pending")
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), observed(job, pods), later(1), CFG)
    assert plan.status.workers == "2/3"
    assert plan.status.replica_statuses["worker"].active == 3


def test_crash_looping_worker_is_kept_until_its_backoff_passes_then_replaced():
    job = make_job(ps=1, workers=1)
    pods = all_pods(job)
    pods[2] = pod(job, "worker", 0, "Failed", exit_code=1)
    first = reconcile(job, status(**RUNNING), observed(job, pods), T0, CFG)  # the first failure: replaced at once
    assert deleted_names(first) == ["mnist-worker-0"]
    rec = first.status.recreations["mnist-worker-0"]
    assert (rec.total, rec.recent, rec.last) == (1, 1, T0)
    # The back-off is in the status: a restarted operator (nothing in memory) waits it out too.
    plan = reconcile(job, first.status, observed(job, pods), later(5), CFG)
    assert plan.actions == [] and plan.events == []  # the failed pod (and its logs) stay for now
    assert plan.requeue_after == 5
    plan = reconcile(job, first.status, observed(job, pods), later(10), CFG)
    assert deleted_names(plan) == ["mnist-worker-0"] and plan.replaced == ["mnist-worker-0"]
    assert plan.status.recreations["mnist-worker-0"].total == 2
    assert plan.status.replica_statuses["worker"].recreated == 2


def test_crash_loop_backoff_doubles_to_five_minutes_and_resets_after_ten_quiet_minutes():
    from tfps_operator.reconcile.crashloop import delay, not_before, record

    assert [delay(n) for n in range(8)] == [0, 10, 20, 40, 80, 160, 300, 300]
    first = record(None, T0)
    assert not_before(first, T0) == later(10)
    second = record(first, later(10))
    assert second.recent == 2 and not_before(second, later(10)) == later(30)
    assert not_before(second, later(30)) is None
    third = record(second, later(10 + 600))
    assert (third.recent, third.total) == (1, 3)  # quiet for 10 minutes: the back-off starts over, the count does not


def test_replica_statuses_of_a_finished_job_count_only_what_the_cleanup_leaves():
    job = make_job(ps=1, workers=2, export={"enabled": False})
    plan = reconcile(job, status(**RUNNING), observed(job, all_pods(job, chief_0="Succeeded")), later(5), CFG)
    rs = plan.status.replica_statuses
    assert (rs["chief"].succeeded, rs["ps"].active, rs["worker"].active, plan.status.workers) == (1, 0, 0, "0/2")


def test_replica_statuses_after_a_job_restart_count_no_stale_pod():
    job = make_job(ps=1, workers=1)
    pods = all_pods(job)
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=1)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(5), CFG)
    assert all(r.active == 0 and r.failed == 0 for r in plan.status.replica_statuses.values())


# --- failure semantics: the exit-code table ----------------------------------------------------------


def test_chief_with_a_permanent_exit_code_fails_the_job_at_once_with_its_termination_message():
    job = make_job(ps=1, workers=1)
    pods = all_pods(job)
    pods[0] = pod(
        job,
        "chief",
        0,
        "Failed",
        exit_code=3,
        message='Traceback ...\n  File "m.py", line 3\n'
        "tfps-trainer chief/0: model module 'm': build_model() raised KeyError: 'units'",
    )
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Failed" and plan.status.restarts == 0
    assert cond(plan, C.FAILED) == ("True", "InvalidModel") and plan.status.reason == "InvalidModel"
    message = C.get(plan.status, C.FAILED).message
    assert "exit code 3 (InvalidModel, permanent)" in message and "build_model() raised KeyError" in message
    assert 'File "m.py", line 3' in message


def test_lost_ps_exit_code_restarts_the_job_under_exit_code_policy():
    job = make_job(
        ps=1, workers=1, replicas={"ps": {"replicas": 1, "restartPolicy": "ExitCode"}, "worker": {"replicas": 1}}
    )
    pods = all_pods(job)
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=5)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Restarting" and plan.status.restarts == 1
    pods[1] = pod(job, "ps", 0, "Failed", exit_code=1)  # unknown: ExitCode does not retry it
    assert reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG).status.phase == "Failed"


def test_preempted_chief_restarts_the_job_without_using_the_backoff_limit():
    job = make_job(ps=1, workers=1, runPolicy={"backoffLimit": 0})
    pods = all_pods(job)
    pods[0] = pod(job, "chief", 0, "Failed", exit_code=6)
    plan = reconcile(job, status(**RUNNING), observed(job, pods), later(10), CFG)
    assert plan.status.phase == "Restarting" and (plan.status.restarts, plan.status.preemptions) == (1, 1)
    assert "JobPreempted" in reasons(plan)
    # The next real failure still meets backoffLimit 0.
    again = all_pods(job, restart=1)
    again[0] = pod(job, "chief", 0, "Failed", exit_code=1, restart=1)
    st = plan.status.model_copy(update={"phase": "Running"})
    assert cond(reconcile(job, st, observed(job, again), later(20), CFG), C.FAILED) == ("True", "BackoffLimitExceeded")


def test_an_evaluator_failing_over_and_over_fails_the_job_at_its_recreate_limit():
    from tfps_operator.api.models import Recreation

    job = make_job(
        ps=1,
        workers=1,
        evaluator=1,
        training={"steps": 100, "checkpoint": {"everySteps": 10}},
        replicas={"ps": {"replicas": 1}, "worker": {"replicas": 1}, "evaluator": {"replicas": 1, "recreateLimit": 2}},
    )
    pods = all_pods(job)
    pods[3] = pod(job, "evaluator", 0, "Failed", exit_code=1)
    st = status(**RUNNING, recreations={"mnist-evaluator-0": Recreation(total=2, recent=2, last=T0).to_wire()})
    plan = reconcile(job, st, observed(job, pods), later(3600), CFG)
    assert cond(plan, C.FAILED) == ("True", "RecreateLimitExceeded")
    assert "after 2 recreation(s); recreateLimit is 2" in C.get(plan.status, C.FAILED).message


def test_exit_code_table_kinds_and_the_documented_table():
    from pathlib import Path

    from tfps_wire import exitcodes

    assert [exitcodes.kind(c) for c in (0, 1, 2, 3, 4, 5, 6, 7, 130, 137, 143, 41, None)] == [
        "success",
        "unknown",
        "permanent",
        "permanent",
        "permanent",
        "retryable",
        "retryable",
        "retryable",
        "retryable",
        "retryable",
        "retryable",
        "unknown",
        "retryable",
    ]
    docs = Path(__file__).resolve().parents[4] / "docs" / "operator.md"
    assert exitcodes.markdown_table() in docs.read_text(), (
        "docs/operator.md: paste tfps_wire.exitcodes.markdown_table()"
    )


# --- admission: a new run's children are validated (dry-run) before any is created -------------------


def test_a_new_job_asks_to_validate_every_child_from_its_templates_one_pod_per_replica_type_before_creating_any():
    job = make_job(ps=1, workers=2)
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    keys = sorted(f"{m['kind']}/{m['metadata']['name']}" for m in plan.validate)
    assert keys == [
        "Job/mnist-export",
        "PersistentVolumeClaim/mnist-storage",
        "Pod/mnist-chief-0",
        "Pod/mnist-ps-0",
        "Pod/mnist-worker-0",
    ]
    # The Service and NetworkPolicy (built by the operator alone) are created without a dry-run.
    assert {"Service/mnist", "NetworkPolicy/mnist"} <= {c.key for c in plan.creates()}


def test_a_restarted_run_is_validated_again_and_a_running_one_is_not():
    job = make_job(ps=1, workers=1)
    restarted = reconcile(
        job, status(phase="Restarting", restarts=1, startTime=T0.isoformat()), observed(job, []), T0, CFG
    )
    assert created_names(restarted) and {m["metadata"]["name"] for m in restarted.validate} >= {
        "mnist-chief-0",
        "mnist-ps-0",
        "mnist-worker-0",
    }
    pods = all_pods(job)
    pods[2] = pod(job, "worker", 0, "Failed", exit_code=1)
    plan = reconcile(job, status(**RUNNING), observed(job, pods[:2]), T0, CFG)  # a worker recreated alone
    assert created_names(plan) == ["mnist-worker-0"] and plan.validate == []


def test_refusals_fail_the_job_naming_the_template_once_per_replica_type():
    from tfps_operator.reconcile.admission import verdict, where

    job = make_job(ps=1, workers=2)
    new = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    pods = {m["metadata"]["name"]: m for m in new.validate if m["kind"] == "Pod"}
    assert sorted(pods) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]
    refusals = {
        where(pods["mnist-worker-0"]): 'spec.containers[0].volumeMounts[2].name: Not found: "data"',
        where(
            {**pods["mnist-worker-0"], "metadata": {**pods["mnist-worker-0"]["metadata"], "name": "mnist-worker-1"}}
        ): ('spec.containers[0].volumeMounts[2].name: Not found: "data"'),
    }
    plan = verdict(new.status, 1, refusals, T0)
    assert plan.status.phase == "Failed" and cond(plan, C.FAILED) == ("True", "InvalidSpec")
    message = C.get(plan.status, C.FAILED).message
    assert message == (
        "the API server refuses the job's children (nothing was created): spec.replicas.worker.template "
        '(Pod/mnist-worker-0): spec.containers[0].volumeMounts[2].name: Not found: "data"'
    )


# --- why a job waits ----------------------------------------------------------------------------------


def _waiting_container(p, reason, message):
    p["status"]["containerStatuses"] = [
        {"name": "trainer", "state": {"waiting": {"reason": reason, "message": message}}}
    ]
    return p


def test_an_image_that_cannot_be_pulled_is_the_jobs_reason_with_an_event_once():
    job = make_job(ps=1, workers=1)
    pods = all_pods(job, "Pending")
    pods[1] = _waiting_container(pods[1], "ImagePullBackOff", 'Back-off pulling image "tfps-trainer:nope"')
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), observed(job, pods), T0, CFG)
    assert cond(plan, "Waiting") == ("True", "ImagePullBackOff") and plan.status.reason == "ImagePullBackOff"
    assert (
        C.get(plan.status, "Waiting").message
        == 'mnist-ps-0 cannot start: ImagePullBackOff: Back-off pulling image "tfps-trainer:nope"'
    )
    assert reasons(plan) == ["ImagePullBackOff"]
    again = reconcile(job, plan.status, observed(job, pods), later(5), CFG)
    assert again.events == [] and again.status.conditions == plan.status.conditions
    started = reconcile(job, again.status, observed(job, all_pods(job)), later(30), CFG)
    assert cond(started, "Waiting") == ("False", "PodsStarted") and started.status.reason is None
    assert started.status.phase == "Running"


def test_an_unbound_claim_is_named_as_such():
    job = make_job(ps=1, workers=1)
    msg = (
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available"
    )
    pods = [pod(job, r, 0, "Pending", scheduled=False, unschedulable=msg) for r in ("chief", "ps", "worker")]
    plan = reconcile(job, status(phase="Pending", startTime=T0.isoformat()), observed(job, pods), T0, CFG)
    assert cond(plan, "Waiting") == ("True", "UnboundClaim") and plan.status.reason == "UnboundClaim"
    assert C.get(plan.status, "Waiting").message.startswith(
        "mnist-chief-0, mnist-ps-0, mnist-worker-0 not scheduled: 0/2 nodes"
    )
    assert "UnboundClaim" in reasons(plan)


def test_stall_policy_restart_restarts_a_stalled_job_and_fail_fails_it():
    st = status(
        phase="Running",
        startTime=T0.isoformat(),
        conditions=[{"type": "Running", "status": "True", "lastTransitionTime": T0.isoformat()}],
    )
    job = make_job(ps=1, workers=1, runPolicy={"stallSeconds": 60, "stallPolicy": "Restart"})
    plan = reconcile(job, st, observed(job, all_pods(job)), later(61), CFG)
    assert plan.status.phase == "Restarting" and plan.status.restarts == 1 and "StallRestart" in reasons(plan)
    assert len(plan.deletes()) == 3
    job = make_job(ps=1, workers=1, runPolicy={"stallSeconds": 60, "stallPolicy": "Fail"})
    plan = reconcile(job, st, observed(job, all_pods(job)), later(61), CFG)
    assert plan.status.phase == "Failed" and cond(plan, C.FAILED) == ("True", "Stalled")
    job = make_job(ps=1, workers=1, runPolicy={"stallSeconds": 60})  # None: report only
    plan = reconcile(job, st, observed(job, all_pods(job)), later(61), CFG)
    assert plan.status.phase == "Running" and cond(plan, "Stalled") == ("True", "NoNewCheckpoint")
