"""The operator against the real API server (hack/cluster): kwok runs the pods, the tests play kubelet."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
from operator_harness import KWOK_HANDS_OFF, job_body

from tfps_operator.api.models import API_VERSION
from tfps_wire.export_result import (
    ArtifactResult,
    ExportFailed,
    ExportSucceeded,
    FormatFailure,
    PreflightArtifact,
    PreflightReport,
    encode,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0", "j-worker-1"]


def uids(pods):
    return {n: p["metadata"]["uid"] for n, p in pods.items()}


def env_of(pod):
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_apply_creates_pods_service_and_network_policy_with_tf_config(kube, operator):
    kube.create_job(job_body("j"))
    pods = kube.wait_pods_running("j", TRAINERS)
    st = kube.wait_phase("j", "Running")
    assert st["workers"] == "2/2"
    assert st["replicaStatuses"]["ps"]["active"] == 1
    job = kube.job("j")
    owner = {
        "apiVersion": API_VERSION,  # the version the operator reads, whichever the job was created as
        "kind": "PSTrainingJob",
        "name": "j",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }

    tf = json.loads(env_of(pods["j-worker-1"])["TF_CONFIG"])
    ns = kube.ns
    assert tf == {
        "cluster": {
            "chief": [f"j-chief-0.j.{ns}.svc:2222"],
            "ps": [f"j-ps-0.j.{ns}.svc:2222"],
            "worker": [f"j-worker-0.j.{ns}.svc:2222", f"j-worker-1.j.{ns}.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }
    for name, pod in pods.items():
        assert pod["metadata"]["ownerReferences"] == [owner]
        assert pod["spec"]["hostname"] == name and pod["spec"]["subdomain"] == "j"
        # Kopf keeps its bookkeeping off the pods: no finalizers, no annotations of its own.
        assert not pod["metadata"].get("finalizers")
        assert not [a for a in (pod["metadata"].get("annotations") or {}) if "kopf" in a or a.startswith("tfps.dev/")]
    # Nothing blocks the job's deletion: no finalizer, and no annotations of Kopf's.
    assert not job["metadata"].get("finalizers")
    assert not [a for a in (job["metadata"].get("annotations") or {}) if "kopf.zalando.org" in a]

    svc = kube.d(kube.core.read_namespaced_service("j", ns))
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["metadata"]["ownerReferences"] == [owner]
    np = kube.d(kube.net.read_namespaced_network_policy("j", ns))
    assert np["spec"]["ingress"][0]["ports"] == [{"port": 2222, "protocol": "TCP"}]
    assert np["metadata"]["ownerReferences"] == [owner]

    running = kube.condition("j", "Running")
    assert running["status"] == "True" and running["observedGeneration"] == job["metadata"]["generation"]
    kube.wait_until(lambda: {"Accepted", "Running"} <= kube.event_reasons("j"), timeout=10, what="events")
    operator.wait_metrics(
        'tfps_jobs{phase="Running"} 1.0', "tfps_reconcile_total", "tfps_reconcile_duration_seconds_count"
    )


def test_worker_failure_recreates_the_same_worker_and_leaves_the_ps_alone(kube, operator):
    kube.create_job(job_body("j"))
    before = uids(kube.wait_pods_running("j", TRAINERS))
    kube.wait_phase("j", "Running")
    kube.finish_pod("j-worker-1", "Failed", 1, "worker OOM")
    after = kube.wait_until(
        lambda: (u := uids(kube.wait_pods_running("j", TRAINERS)))["j-worker-1"] != before["j-worker-1"] and u,
        timeout=30,
        interval=0.3,
        what="worker-1 recreated",
    )
    assert {n: after[n] for n in ("j-chief-0", "j-ps-0", "j-worker-0")} == {
        n: before[n] for n in ("j-chief-0", "j-ps-0", "j-worker-0")
    }
    st = kube.status("j")
    assert st["restarts"] == 0 and st["phase"] == "Running"
    kube.wait_until(lambda: "WorkerRestarted" in kube.event_reasons("j"), timeout=10, what="WorkerRestarted event")
    operator.wait_metrics('tfps_pod_restarts_total{role="worker"} 1.0')

    # It fails again at once: crash-loop backoff keeps the failed pod (and its logs) ~10 s first.
    kube.finish_pod("j-worker-1", "Failed", 1, "worker OOM again")
    failed_at = time.monotonic()
    kube.wait_until(
        lambda: (
            (p := kube.trainer_pods("j").get("j-worker-1"))
            and p["metadata"]["uid"] not in (before["j-worker-1"], after["j-worker-1"])
            and p["status"].get("phase") == "Running"
        ),
        timeout=40,
        interval=0.5,
        what="worker-1 recreated again",
    )
    assert time.monotonic() - failed_at >= 8


def test_ps_failure_restarts_the_whole_job_then_backoff_limit_fails_it(kube, operator):
    kube.create_job(job_body("j", run_policy={"backoffLimit": 1}))
    before = uids(kube.wait_pods_running("j", TRAINERS))
    kube.wait_phase("j", "Running")
    kube.finish_pod("j-ps-0", "Failed", 137, reason="OOMKilled")
    kube.wait_until(lambda: kube.status("j").get("restarts") == 1, timeout=20, what="restarts == 1")
    after = kube.wait_until(
        lambda: (u := uids(kube.wait_pods_running("j", TRAINERS))) and not set(u.values()) & set(before.values()) and u,
        timeout=30,
        interval=0.3,
        what="every pod recreated",
    )
    assert all(p["metadata"]["labels"]["tfps.dev/restart"] == "1" for p in kube.trainer_pods("j").values())
    kube.wait_phase("j", "Running")
    assert kube.condition("j", "Restarting")["status"] == "False"

    kube.finish_pod("j-chief-0", "Failed", 1, "chief crashed")
    st = kube.wait_phase("j", "Failed")
    assert st["restarts"] == 1
    failed = kube.condition("j", "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and "backoffLimit is 1" in failed["message"]
    # cleanPodPolicy Running: the running PS and workers go, the failed chief stays for its logs.
    kube.wait_until(lambda: sorted(kube.trainer_pods("j")) == ["j-chief-0"], timeout=20, what="running pods deleted")
    assert after["j-chief-0"] == kube.trainer_pods("j")["j-chief-0"]["metadata"]["uid"]


def test_a_worker_only_job_restarts_every_worker_on_one_failure_and_succeeds_with_worker_0(kube, operator):
    """MultiWorkerMirrored: TF_CONFIG lists the workers only; a worker failure stops all of them (a collective
    cannot go on with a member missing) and the job restarts whole; worker 0's success ends training."""
    body = job_body("w", workers=2, strategy="MultiWorkerMirrored", model={"command": ["python", "train.py"]})
    del body["spec"]["replicas"]["chief"], body["spec"]["replicas"]["ps"]
    kube.create_job(body)
    workers = ["w-worker-0", "w-worker-1"]
    before = uids(kube.wait_pods_running("w", workers))
    kube.wait_phase("w", "Running")
    env = {e["name"]: e.get("value") for e in kube.trainer_pods("w")["w-worker-1"]["spec"]["containers"][0]["env"]}
    tf_config = json.loads(env["TF_CONFIG"])
    assert sorted(tf_config["cluster"]) == ["worker"] and tf_config["task"] == {"type": "worker", "index": 1}
    kube.finish_pod("w-worker-1", "Failed", 1, "a collective op timed out")
    kube.wait_until(lambda: kube.status("w").get("restarts") == 1, timeout=20, what="restarts == 1")
    kube.wait_until(
        lambda: (u := uids(kube.wait_pods_running("w", workers))) and not set(u.values()) & set(before.values()),
        timeout=30,
        interval=0.3,
        what="both workers recreated",
    )
    assert "JobRestarting" in kube.event_reasons("w")
    kube.finish_pod("w-worker-0", "Succeeded", 0, "completed step 40/40; final checkpoint /data/ckpt-40")
    st = kube.wait_phase("w", "Succeeded")
    assert st["restarts"] == 1 and st["checkpoint"]["step"] == 40
    kube.wait_until(lambda: sorted(kube.trainer_pods("w")) == ["w-worker-0"], timeout=20, what="worker 1 deleted")


ACTIVE_DEADLINE = 15
"""Long enough that the job is seen Running before it runs out, however slowly the pods come up: the clock
starts at the job's first pass (status.startTime), not when it becomes Running."""


def test_active_deadline_fails_the_job_by_timer(kube, operator):
    kube.create_job(job_body("j", run_policy={"activeDeadlineSeconds": ACTIVE_DEADLINE}))
    kube.wait_phase("j", "Running")
    st = kube.wait_phase("j", "Failed", timeout=ACTIVE_DEADLINE + 30)
    assert kube.condition("j", "Failed")["reason"] == "DeadlineExceeded"
    assert st["completionTime"]
    # not before the deadline (both stamps in whole seconds)
    started, completed = (datetime.fromisoformat(st[k].replace("Z", "+00:00")) for k in ("startTime", "completionTime"))
    assert (completed - started).total_seconds() >= ACTIVE_DEADLINE - 1, st
    kube.wait_until(lambda: not kube.trainer_pods("j"), timeout=20, what="pods deleted")


def test_chief_success_without_export_removes_ps_and_workers_and_succeeds(kube, operator):
    kube.create_job(job_body("j", export=False))
    kube.wait_pods_running("j", TRAINERS)
    kube.finish_pod("j-chief-0", "Succeeded", 0)
    st = kube.wait_phase("j", "Succeeded")
    assert kube.condition("j", "Succeeded")["reason"] == "TrainingSucceeded" and st["completionTime"]
    kube.wait_until(lambda: sorted(kube.trainer_pods("j")) == ["j-chief-0"], timeout=20, what="ps/workers deleted")
    kube.wait_until(lambda: "TrainingSucceeded" in kube.event_reasons("j"), timeout=10, what="TrainingSucceeded event")


def _finish_training_with_export(kube, export_spec=None):
    """Chief and export pods are left to the test (kwok hands off); PS/workers run."""
    kube.create_job(job_body("j", export=True, chief_template=KWOK_HANDS_OFF, export_spec=export_spec))
    kube.wait_until(lambda: "j-chief-0" in kube.trainer_pods("j"), timeout=20, what="chief created")
    kube.finish_pod("j-chief-0", "Succeeded", 0)
    kube.wait_phase("j", "Exporting")
    ej = kube.wait_until(
        lambda: next(iter(kube.d(kube.batch.list_namespaced_job(kube.ns).items)), None),
        timeout=20,
        what="export Job created",
    )  # the status is written before the child
    assert ej["metadata"]["name"] == "j-export"
    assert ej["metadata"]["ownerReferences"][0]["name"] == "j"
    assert ej["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "-m", "tfps_trainer.export"]
    pod = kube.wait_until(lambda: next(iter(kube.pods("job-name=j-export")), None), timeout=20, what="export pod")
    return pod


def test_export_job_runs_after_training_and_its_result_lands_in_status(kube, operator):
    pod = _finish_training_with_export(kube)
    result = ExportSucceeded(
        step=10,
        path="exports/10",
        manifest="exports/10/manifest.json",
        artifacts=[
            ArtifactResult(
                format="savedmodel", path="exports/10/savedmodel", bytes=51234, sha256="ab" * 32, max_error=0.0
            ),
            ArtifactResult(format="onnx", path="exports/10/model.onnx", bytes=4096, sha256="cd" * 32, max_error=2e-7),
        ],
    )
    kube.finish_pod(pod, "Succeeded", 0, encode(result))
    st = kube.wait_phase("j", "Succeeded")
    assert kube.condition("j", "Succeeded")["reason"] == "ExportSucceeded"
    assert st["export"]["jobName"] == "j-export" and st["export"]["step"] == 10
    assert [(a["format"], a["bytes"], a["sha256"]) for a in st["export"]["artifacts"]] == [
        ("savedmodel", 51234, "ab" * 32),
        ("onnx", 4096, "cd" * 32),
    ]
    kube.wait_until(lambda: sorted(kube.trainer_pods("j")) == ["j-chief-0"], timeout=20, what="ps/workers deleted")
    assert len(kube.batch.list_namespaced_job(kube.ns).items) == 1  # never a second export Job


def test_failing_export_job_fails_the_job_with_the_exporters_message(kube, operator):
    pod = _finish_training_with_export(kube, export_spec={"backoffLimit": 0})
    kube.finish_pod(
        pod,
        "Failed",
        7,
        encode(ExportFailed(reason="VerificationFailed", message="onnx: max abs error 0.3 > tolerance 1e-05")),
    )
    kube.wait_phase("j", "Failed", timeout=40)
    failed = kube.condition("j", "Failed")
    assert failed["reason"] == "ExportFailed"
    assert failed["message"] == "VerificationFailed: onnx: max abs error 0.3 > tolerance 1e-05"


def test_an_optional_format_that_failed_is_named_in_status_condition_and_event_and_the_job_succeeds(kube, operator):
    pod = _finish_training_with_export(kube)
    failure = FormatFailure(
        format="tflite",
        quantization="int8",
        reason="VerificationFailed",
        message="tflite (int8): output 'probs': argmax agreement 0.700 < minArgmaxAgreement 0.9",
    )
    result = ExportSucceeded(
        step=10,
        path="exports/10",
        manifest="exports/10/manifest.json",
        failed=[failure],
        artifacts=[
            ArtifactResult(
                format="savedmodel", path="exports/10/savedmodel", bytes=51234, sha256="ab" * 32, max_error=0.0
            )
        ],
    )
    kube.finish_pod(pod, "Succeeded", 0, encode(result))
    st = kube.wait_phase("j", "Succeeded")
    assert kube.condition("j", "ExportComplete")["status"] == "False"
    assert "tflite (int8)" in kube.condition("j", "ExportComplete")["message"]
    assert [(f["format"], f["quantization"], f["reason"]) for f in st["export"]["failed"]] == [
        ("tflite", "int8", "VerificationFailed")
    ]
    kube.wait_until(
        lambda: "ExportFormatFailed" in kube.event_reasons("j"), timeout=10, what="ExportFormatFailed event"
    )


def _preflight_pod(kube, job: str = "j"):
    kube.wait_until(
        lambda: any(j.metadata.name == f"{job}-preflight" for j in kube.batch.list_namespaced_job(kube.ns).items),
        timeout=20,
        what="pre-flight Job",
    )
    return kube.wait_until(
        lambda: next(iter(kube.pods(f"job-name={job}-preflight")), None), timeout=20, what="pre-flight pod"
    )


def test_preflight_runs_before_any_trainer_pod_and_its_verdict_starts_training(kube, operator):
    kube.create_job(job_body("j", export=True, chief_template=KWOK_HANDS_OFF, export_spec={"preflight": True}))
    pod = _preflight_pod(kube)
    time.sleep(2)  # the operator has had every chance to create trainer pods early
    assert kube.trainer_pods("j") == {} and kube.status("j")["phase"] == "Pending"
    report = PreflightReport(
        ok=True,
        artifacts=[PreflightArtifact(format="savedmodel", bytes=100, max_error=0.0)],
        failed=[
            FormatFailure(
                format="onnx",
                reason="ConversionFailed",
                message="onnx (opset 17): ops tf2onnx could not convert: Igamma",
            )
        ],
    )
    kube.finish_pod(pod, "Succeeded", 0, encode(report))
    kube.wait_until(lambda: "j-chief-0" in kube.trainer_pods("j"), timeout=20, what="trainer pods after the pre-flight")
    assert kube.condition("j", "ExportPreflight")["reason"] == "FormatsWillFail"
    assert "Igamma" in kube.condition("j", "ExportPreflight")["message"]
    kube.wait_until(
        lambda: "ExportPreflightWarning" in kube.event_reasons("j"), timeout=10, what="pre-flight warning event"
    )


def test_a_required_format_failing_the_preflight_fails_the_job_before_any_trainer_pod(kube, operator):
    kube.create_job(job_body("j", export=True, chief_template=KWOK_HANDS_OFF, export_spec={"preflight": True}))
    pod = _preflight_pod(kube)
    failure = FormatFailure(format="savedmodel", reason="ContractError", message="savedmodel: export failed: no")
    report = PreflightReport(ok=False, failed=[failure], required_failed=["savedmodel"])
    kube.finish_pod(pod, "Failed", 3, encode(report))
    kube.wait_phase("j", "Failed", timeout=40)
    assert kube.condition("j", "Failed")["reason"] == "ExportPreflightFailed"
    assert "savedmodel: export failed: no" in kube.condition("j", "Failed")["message"]
    assert kube.trainer_pods("j") == {}


def test_suspend_deletes_the_pods_and_resume_brings_them_back(kube, operator):
    kube.create_job(job_body("j"))
    kube.wait_phase("j", "Running")
    kube.patch_job("j", {"spec": {"runPolicy": {"suspend": True}}})
    kube.wait_phase("j", "Suspended")
    kube.wait_until(lambda: not kube.trainer_pods("j"), timeout=20, what="pods deleted")
    assert kube.job("j") is not None
    kube.patch_job("j", {"spec": {"runPolicy": {"suspend": False}}})
    kube.wait_pods_running("j", TRAINERS)
    kube.wait_phase("j", "Running")
    assert kube.condition("j", "Suspended")["reason"] == "JobResumed"
    kube.wait_until(lambda: {"JobSuspended", "JobResumed"} <= kube.event_reasons("j"), timeout=10, what="events")


def test_ttl_after_finished_deletes_the_job_and_its_children(kube, operator):
    kube.create_job(job_body("j", run_policy={"ttlSecondsAfterFinished": 2, "cleanPodPolicy": "None"}))
    kube.wait_pods_running("j", TRAINERS)
    kube.finish_pod("j-chief-0", "Succeeded", 0)
    kube.wait_phase("j", "Succeeded")
    kube.wait_until(lambda: kube.job("j") is None, timeout=30, what="job deleted by TTL")
    kube.wait_until(lambda: not kube.trainer_pods("j"), timeout=30, what="pods garbage-collected")


def test_deleting_the_job_deletes_every_child(kube, operator):
    kube.create_job(job_body("j"))
    kube.wait_phase("j", "Running")
    kube.delete_job("j")
    kube.wait_until(lambda: kube.job("j") is None, timeout=30, what="job gone")
    kube.wait_until(lambda: not kube.trainer_pods("j"), timeout=30, what="pods garbage-collected")
    kube.wait_until(lambda: not kube.core.list_namespaced_service(kube.ns).items, timeout=30, what="service gone")
    kube.wait_until(lambda: not kube.net.list_namespaced_network_policy(kube.ns).items, timeout=30, what="netpol gone")


def test_a_job_deleted_while_the_operator_is_down_goes_at_once_and_the_restarted_operator_forgets_it(
    kube, start_operator
):
    op = start_operator(kube.ns)
    kube.create_job(job_body("j"))
    kube.create_job(job_body("k"))
    kube.wait_phase("j", "Running")
    kube.wait_phase("k", "Running")
    op.kill()
    kube.delete_job("j")
    kube.wait_until(lambda: kube.job("j") is None, timeout=10, what="job gone without the operator")
    kube.wait_until(lambda: not kube.trainer_pods("j"), timeout=30, what="its pods garbage-collected")
    op2 = start_operator(kube.ns)
    kube.wait_until(lambda: _reconciles(op2.metrics()) >= 1, timeout=20, what="a reconciliation after restart")
    kube.finish_pod("k-chief-0", "Succeeded", 0)  # the other job is still looked after
    kube.wait_phase("k", "Succeeded")
    assert not kube.trainer_pods("j")  # nothing of the deleted job came back
    assert "could not" not in op2.log()


def test_a_finalizer_left_by_an_older_operator_is_removed(kube, operator):
    body = job_body("j")
    body["metadata"]["finalizers"] = ["tfps.dev/finalizer"]
    kube.create_job(body)
    kube.wait_phase("j", "Running")
    kube.wait_until(lambda: not kube.job("j")["metadata"].get("finalizers"), timeout=20, what="finalizer removed")
    kube.delete_job("j")
    kube.wait_until(lambda: kube.job("j") is None, timeout=30, what="job gone")


def test_operator_killed_mid_job_restarts_without_duplicates_or_double_counting(kube, start_operator):
    op = start_operator(kube.ns)
    kube.create_job(job_body("j"))
    kube.wait_pods_running("j", TRAINERS)
    kube.wait_phase("j", "Running")
    op.kill()
    kube.finish_pod("j-ps-0", "Failed", 137)  # fails while nobody watches
    op2 = start_operator(kube.ns)
    kube.wait_until(lambda: kube.status("j").get("restarts") == 1, timeout=30, what="restart counted")
    kube.wait_pods_running("j", TRAINERS)
    kube.wait_phase("j", "Running")
    op2.kill()  # and again, with nothing to do
    op3 = start_operator(kube.ns)
    kube.wait_until(lambda: _reconciles(op3.metrics()) >= 1, timeout=20, what="a reconciliation after restart")
    pods = kube.wait_pods_running("j", TRAINERS)
    assert len(pods) == 4 and kube.status("j")["restarts"] == 1
    assert all(p["metadata"]["labels"]["tfps.dev/restart"] == "1" for p in pods.values())


def test_restricted_podsecurity_namespace_admits_the_pods(restricted_kube, start_operator):
    kube = restricted_kube
    start_operator(kube.ns)
    kube.create_job(job_body("j"))
    kube.wait_pods_running("j", TRAINERS)
    kube.wait_phase("j", "Running")
    assert kube.condition("j", "Created")["status"] == "True"


def test_quota_refusal_is_a_clear_condition_and_recovers_when_lifted(kube, start_operator):
    kube.core.create_namespaced_resource_quota(kube.ns, {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}})
    kube.wait_until(
        lambda: kube.core.read_namespaced_resource_quota("pods", kube.ns).status.hard, timeout=20, what="quota active"
    )
    op = start_operator(kube.ns)
    kube.create_job(job_body("j"))
    created = kube.wait_until(
        lambda: (c := kube.condition("j", "Created")) and c["status"] == "False" and c, timeout=30, what="Created=False"
    )
    assert created["reason"] == "CreateFailed" and "exceeded quota" in created["message"]
    kube.wait_until(lambda: "CreateFailed" in kube.event_reasons("j"), timeout=10, what="CreateFailed event")
    reconciles_then = _reconciles(op.metrics())
    kube.core.delete_namespaced_resource_quota("pods", kube.ns)
    kube.wait_pods_running("j", TRAINERS, timeout=30)
    kube.wait_phase("j", "Running")
    assert kube.condition("j", "Created")["status"] == "True"
    assert _reconciles(op.metrics()) - reconciles_then < 60  # backoff, not a hot loop


def _reconciles(metrics: str) -> float:
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("tfps_reconcile_total{"))


def test_claim_template_creates_an_owned_pvc_and_unscheduled_pods_stay_pending(kube, operator):
    body = job_body("j")
    body["spec"]["storage"] = {"volumeClaimTemplate": {"size": "1Gi", "storageClassName": "none-such"}}
    kube.create_job(body)
    pvc = kube.wait_until(
        lambda: kube.core.list_namespaced_persistent_volume_claim(kube.ns, label_selector="tfps.dev/job-name=j").items,
        timeout=20,
        what="PVC created",
    )[0]
    assert pvc.metadata.name == "j-storage" and pvc.metadata.owner_references[0].name == "j"

    # Scheduled=False comes at once (pods not scheduled yet), then carries the scheduler's reason.
    def unschedulable() -> dict | None:
        c = kube.condition("j", "Scheduled")
        text = (c or {}).get("message", "").lower()
        return c if c and c["status"] == "False" and ("persistentvolumeclaim" in text or "unbound" in text) else None

    kube.wait_until(unschedulable, timeout=30, what="Scheduled=False naming the unbound claim")
    assert kube.status("j")["phase"] == "Pending"


def test_a_child_name_taken_by_someone_else_is_reported_not_stolen(kube, operator):
    kube.core.create_namespaced_service(
        kube.ns, {"metadata": {"name": "j"}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}
    )
    kube.create_job(job_body("j"))
    created = kube.wait_until(
        lambda: (c := kube.condition("j", "Created")) and c["status"] == "False" and c, timeout=30, what="Created=False"
    )
    assert created["reason"] == "CreateFailed"
    assert "Service/j already exists and is not controlled by this PSTrainingJob" in created["message"]
    svc = kube.core.read_namespaced_service("j", kube.ns)
    assert not svc.metadata.owner_references  # left alone
    job = kube.job("j")
    assert job["metadata"].get("annotations") is None or not [
        a for a in job["metadata"]["annotations"] if a.startswith("kopf.")
    ]


def test_script_mode_job_in_a_restricted_namespace_with_the_pod_template_fields(
    make_namespace, k8s, wait_until, crd_installed, start_operator
):
    """A script-mode job: no pre-flight (its model exists only after training), pods admitted under PodSecurity
    restricted with a service account (no token), an init container, a spread constraint and a per-replica
    image; the chief's summary puts the program's final checkpoint into the status, then the export runs."""
    from operator_harness import Cluster

    ns = make_namespace(
        labels={
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        }
    )
    kube = Cluster(k8s, ns, wait_until)
    kube.bound_claim("data")
    kube.core.create_namespaced_service_account(ns, {"metadata": {"name": "gcs-reader"}})
    template = {
        **KWOK_HANDS_OFF,
        "spec": {
            "serviceAccountName": "gcs-reader",
            "initContainers": [{"name": "fetch", "image": "busybox:1", "command": ["true"]}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"tfps.dev/job-name": "j"}},
                }
            ],
        },
    }
    body = job_body("j", export=True, chief_template=template, export_spec={"preflight": True})
    body["spec"]["model"] = {"command": ["python", "train.py", "--model-dir", "$(TFPS_MODEL_DIR)"]}
    body["spec"]["training"] = {}
    body["spec"]["replicas"]["ps"]["image"] = "registry.example/ps:2"
    try:
        start_operator(ns)
        kube.create_job(body)
        # admitted (created) is what this test is about; kwok's stages need not run them
        pods = kube.wait_until(
            lambda: len(p := kube.trainer_pods("j")) == 4 and p, timeout=60, what="the 4 trainer pods admitted"
        )
        chief = pods["j-chief-0"]
        assert not any(j.metadata.name == "j-preflight" for j in kube.batch.list_namespaced_job(ns).items)
        spec = chief["spec"]
        assert spec["serviceAccountName"] == "gcs-reader" and spec["automountServiceAccountToken"] is False
        assert not [
            m for c in spec["containers"] for m in c.get("volumeMounts", []) if "serviceaccount" in m["mountPath"]
        ]
        assert spec["initContainers"][0]["name"] == "fetch"
        assert spec["initContainers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
        assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
        assert pods["j-ps-0"]["spec"]["containers"][0]["image"] == "registry.example/ps:2"
        settings = json.loads(env_of(chief)["TFPS_JOB"])
        assert settings["script"]["programs"]["chief"] == ["python", "train.py", "--model-dir", "$(TFPS_MODEL_DIR)"]
        kube.finish_pod(
            "j-chief-0",
            "Succeeded",
            0,
            f"tfps-trainer chief/0: completed step 150/150; final checkpoint /data/{ns}/j/checkpoints/ckpt-150",
        )
        st = kube.wait_until(
            lambda: (s := kube.status("j")).get("phase") == "Exporting" and s, timeout=30, what="Exporting"
        )
        assert st["checkpoint"]["step"] == 150 and st["checkpoint"]["path"].endswith("ckpt-150")
    finally:
        kube.core.delete_persistent_volume(f"{ns}-data")
