"""Failure semantics on the real API server (hack/cluster, kwok runs the pods, the tests play kubelet):
admission by server-side dry-run, permanent exit codes, back-off kept in the status, why a job waits."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from operator_harness import Cluster, job_body

from tfps_trainer.script.startup import classify
from tfps_trainer.script.wrapper import cannot_run
from tfps_wire import exitcodes
from tfps_wire.termination import termination_line

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0", "j-worker-1"]
KWOK_HANDS_OFF = {"metadata": {"annotations": {"kwok.x-k8s.io/status": "custom"}}}


def _children(kube: Cluster, job: str) -> list[str]:
    sel = f"tfps.dev/job-name={job}"
    return (
        [f"Pod/{n}" for n in kube.pods(sel)]
        + [f"Service/{s.metadata.name}" for s in kube.core.list_namespaced_service(kube.ns, label_selector=sel).items]
        + [
            f"NetworkPolicy/{p.metadata.name}"
            for p in kube.net.list_namespaced_network_policy(kube.ns, label_selector=sel).items
        ]
    )


@pytest.mark.parametrize(
    ("template", "expect"),
    [
        (
            {"tolerations": [{"key": "gpu", "operator": "Sometimes", "effect": "NoSchedule"}]},
            'spec.tolerations[0].operator: Unsupported value: "Sometimes"',
        ),
        ({"volumeMounts": [{"name": "ghost", "mountPath": "/ghost"}]}, 'volumeMounts[2].name: Not found: "ghost"'),
    ],
    ids=["toleration-operator", "mount-without-volume"],
)
def test_a_template_the_api_server_refuses_fails_the_job_before_any_child_exists(kube, operator, template, expect):
    body = job_body("j")
    body["spec"]["replicas"]["worker"]["template"] = {"spec": template}
    kube.create_job(body)
    st = kube.wait_phase("j", "Failed")
    failed = kube.condition("j", "Failed")
    assert failed["reason"] == "InvalidSpec" and st["reason"] == "InvalidSpec"
    assert "spec.replicas.worker.template (Pod/j-worker-0)" in failed["message"] and expect in failed["message"], failed
    assert "InvalidSpec" in kube.event_reasons("j")
    time.sleep(2)
    assert _children(kube, "j") == []  # not the chief, not the PS, not the Service: nothing


def test_privileged_in_a_restricted_namespace_is_refused_by_podsecurity_before_anything_is_created(
    restricted_kube, start_operator
):
    """The operator relaxes the namespace (its own rule would refuse privileged first): the namespace's
    Pod Security admission still judges the pods, by the dry-run, before anything is created."""
    kube = restricted_kube
    start_operator(kube.ns, extra_env={"TFPS_RELAXED_NAMESPACES": kube.ns})
    kube.create_job(
        job_body(
            "j", chief_template={"spec": {"securityContext": {"privileged": True, "allowPrivilegeEscalation": True}}}
        )
    )
    kube.wait_phase("j", "Failed")
    failed = kube.condition("j", "Failed")
    assert failed["reason"] == "InvalidSpec" and "violates PodSecurity" in failed["message"], failed
    assert "spec.replicas.chief.template (Pod/j-chief-0)" in failed["message"]
    assert _children(kube, "j") == []


def test_privileged_is_refused_by_the_operator_in_a_namespace_it_does_not_relax(kube, operator):
    """No Pod Security labels on the namespace: the operator's own rule refuses the template, naming it."""
    kube.create_job(
        job_body(
            "j", chief_template={"spec": {"securityContext": {"privileged": True, "allowPrivilegeEscalation": True}}}
        )
    )
    kube.wait_phase("j", "Failed")
    failed = kube.condition("j", "Failed")
    assert failed["reason"] == "InvalidSpec", failed
    assert (
        "spec.replicas.chief.template.spec.securityContext.privileged: privileged containers are refused"
        in (failed["message"])
    )
    assert "spec.replicas.chief.template.spec.securityContext.allowPrivilegeEscalation" in failed["message"]
    time.sleep(2)
    assert _children(kube, "j") == []


def test_a_permanent_exit_code_fails_the_job_at_once_with_the_termination_message(kube, operator):
    kube.create_job(job_body("j", run_policy={"backoffLimit": 3}))
    kube.wait_pods_running("j", TRAINERS)
    kube.wait_phase("j", "Running")
    message = (
        'Traceback (most recent call last):\n  File "/app/model.py", line 12, in build_model\n'
        "KeyError: 'units'\ntfps-trainer chief/0: model module 'model': build_model() raised KeyError: 'units'"
    )
    kube.finish_pod("j-chief-0", "Failed", 3, message)
    st = kube.wait_phase("j", "Failed", timeout=20)
    failed = kube.condition("j", "Failed")
    assert st["restarts"] == 0 and failed["reason"] == "InvalidModel", failed
    assert "exit code 3 (InvalidModel, permanent)" in failed["message"]
    assert 'File "/app/model.py", line 12' in failed["message"] and "build_model() raised KeyError" in failed["message"]


def test_a_program_that_cannot_run_fails_the_job_from_a_worker_without_a_recreation(kube, operator):
    """A worker of a parameter-server job is recreated alone on a retryable failure; a program that cannot
    run (here: a module missing at import, as the script-mode wrapper reports it) fails the job at once."""
    kube.create_job(job_body("j", run_policy={"backoffLimit": 3}))
    kube.wait_pods_running("j", TRAINERS)
    kube.wait_phase("j", "Running")
    argv = ["python", "/code/train.py", "--log_dir=/train/logs"]
    failure = classify(
        [
            "Traceback (most recent call last):",
            '  File "/code/train.py", line 3, in <module>',
            "    import retrying",
            "ModuleNotFoundError: No module named 'retrying'",
        ],
        argv,
        1,
    )
    assert failure is not None
    kube.finish_pod(
        "j-worker-1", "Failed", exitcodes.CANNOT_RUN, termination_line("worker/1", cannot_run(argv, 1, failure).reason)
    )
    st = kube.wait_phase("j", "Failed", timeout=20)
    failed = kube.condition("j", "Failed")
    assert st["restarts"] == 0 and failed["reason"] == "ProgramCannotRun", failed
    assert "exit code 9 (ProgramCannotRun, permanent)" in failed["message"]
    assert "module 'retrying'" in failed["message"] and "--code" in failed["message"], failed
    assert "j-worker-1" not in kube.status("j").get("recreations", {})


def test_the_crash_loop_back_off_survives_an_operator_restart(kube, start_operator):
    op = start_operator(kube.ns)
    kube.create_job(job_body("j"))
    first = kube.wait_pods_running("j", TRAINERS)["j-worker-1"]["metadata"]["uid"]
    kube.wait_phase("j", "Running")
    kube.finish_pod("j-worker-1", "Failed", 1, "worker OOM")
    second = kube.wait_until(
        lambda: (
            (p := kube.wait_pods_running("j", TRAINERS)["j-worker-1"])["metadata"]["uid"] != first
            and p["metadata"]["uid"]
        ),
        timeout=30,
        what="worker-1 recreated",
    )
    rec = kube.status("j")["recreations"]["j-worker-1"]
    assert (rec["total"], rec["recent"]) == (1, 1)
    assert kube.status("j")["replicaStatuses"]["worker"]["recreated"] == 1
    op.stop()  # an operator restart forgets nothing: the back-off is in the status
    kube.finish_pod("j-worker-1", "Failed", 1, "worker OOM again")
    start_operator(kube.ns)
    third = kube.wait_until(
        lambda: (
            (p := kube.trainer_pods("j").get("j-worker-1"))
            and p["metadata"]["uid"] not in (first, second)
            and p["status"].get("phase") == "Running"
            and p
        ),
        timeout=40,
        interval=0.5,
        what="worker-1 recreated again",
    )
    # Created no sooner than 10 s after the first recreation that the status recorded (both in whole
    # seconds), whatever time the test itself took between the two failures.
    created = datetime.fromisoformat(third["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert created >= datetime.fromisoformat(rec["last"].replace("Z", "+00:00")) + timedelta(seconds=10)
    assert kube.status("j")["recreations"]["j-worker-1"]["total"] == 2


def test_an_unbound_claim_and_an_image_pull_failure_say_why_the_job_waits(kube, operator):
    body = job_body("c")
    body["spec"]["storage"] = {"volumeClaimTemplate": {"size": "1Gi", "storageClassName": "none-such"}}
    kube.create_job(body)
    started = time.monotonic()
    kube.wait_until(lambda: kube.status("c").get("reason") == "UnboundClaim", timeout=30, what="reason UnboundClaim")
    waited = time.monotonic() - started
    waiting = kube.condition("c", "Waiting")
    assert waiting["status"] == "True" and "not scheduled" in waiting["message"] and "unbound" in waiting["message"]
    kube.wait_until(lambda: "UnboundClaim" in kube.event_reasons("c"), timeout=10, what="UnboundClaim event")
    print(f"UnboundClaim reported {waited:.1f}s after the job was created")

    kube.create_job(job_body("j", chief_template=KWOK_HANDS_OFF))
    kube.wait_until(
        lambda: kube.trainer_pods("j").get("j-chief-0", {}).get("spec", {}).get("nodeName"),
        timeout=30,
        what="chief scheduled",
    )
    pod = kube.core.read_namespaced_pod("j-chief-0", kube.ns)
    kube.core.patch_namespaced_pod_status(
        "j-chief-0",
        kube.ns,
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "image": pod.spec.containers[0].image,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": f'Back-off pulling image "{pod.spec.containers[0].image}"',
                            }
                        },
                    }
                ],
            }
        },
    )
    kube.wait_until(
        lambda: kube.status("j").get("reason") == "ImagePullBackOff", timeout=20, what="reason ImagePullBackOff"
    )
    assert (
        "j-chief-0 cannot start: ImagePullBackOff: Back-off pulling image" in kube.condition("j", "Waiting")["message"]
    )
    kube.wait_until(lambda: "ImagePullBackOff" in kube.event_reasons("j"), timeout=10, what="ImagePullBackOff event")


def test_a_missing_claim_holds_the_export_preflight_and_the_job_says_why_once(kube, operator, kubectl):
    """As a new user meets it: the job's claim does not exist, so its export pre-flight pod cannot be
    scheduled (the scheduler is real). The job says so in kubectl get, a condition and one Event, and
    stops saying it once the claim exists and the pod is placed. kwok then completes the pre-flight pod
    (a Job's pod) with no report, so the job trains anyway and says that the pre-flight gave no verdict."""
    body = job_body("m", claim="lost", export=True, export_spec={"preflight": True})
    kube.create_job(body)
    started = time.monotonic()
    kube.wait_until(lambda: kube.status("m").get("reason") == "ClaimNotFound", timeout=30, what="reason ClaimNotFound")
    print(f"ClaimNotFound reported {time.monotonic() - started:.1f}s after the job was created")
    waiting = kube.condition("m", "Waiting")
    assert waiting["status"] == "True" and waiting["reason"] == "ClaimNotFound", waiting
    assert waiting["message"].startswith("export pre-flight (Job m-preflight): m-preflight-"), waiting
    assert 'persistentvolumeclaim "lost" not found' in waiting["message"], waiting
    row = kubectl("get", "psjob", "m", "-n", kube.ns, "--no-headers").stdout.split()
    assert row[:2] == ["m", "Pending"] and "ClaimNotFound" in row, row
    kube.wait_until(lambda: "ClaimNotFound" in kube.event_reasons("m"), timeout=10, what="ClaimNotFound event")
    time.sleep(6)  # passes go on (the pod's status, the resync): still one Event
    assert [e["reason"] for e in kube.events("m")].count("ClaimNotFound") == 1
    assert kube.trainer_pods("m") == {}

    kube.bound_claim("lost")
    try:
        kube.wait_until(
            lambda: (c := kube.condition("m", "Waiting")) and c["status"] == "False" and c,
            timeout=60,
            what="Waiting cleared once the claim exists",
        )
        assert kube.status("m").get("reason") != "ClaimNotFound"
        kube.wait_until(
            lambda: (c := kube.condition("m", "ExportPreflight")) and c["reason"] == "PreflightDidNotRun",
            timeout=60,
            what="the pre-flight's pod completed without a verdict",
        )
        kube.wait_until(lambda: len(kube.trainer_pods("m")) == 4, timeout=60, what="the training pods")
        assert [e["reason"] for e in kube.events("m")].count("ClaimNotFound") == 1
    finally:
        kube.core.delete_persistent_volume(f"{kube.ns}-lost")  # cluster-scoped: the namespace does not take it
