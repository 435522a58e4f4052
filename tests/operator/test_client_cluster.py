"""The Python client and ``tfps get|describe|wait|logs|artifacts`` against the real API server with the
operator running (kwok runs the pods; the tests play kubelet as in test_operator_lifecycle.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from operator_harness import job_body

from tfps_operator.tools.cli import main as tfps
from tfps_operator.tools.client import (
    AlreadyExists,
    ApiError,
    InvalidJob,
    JobFailed,
    LogsUnavailable,
    NoExports,
    NotFound,
    TFPSClient,
    WaitTimeout,
    build_job,
)
from tfps_wire.export_result import ArtifactResult, ExportSucceeded, FormatFailure, encode

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0", "j-worker-1"]
KWOK_HANDS_OFF = {"metadata": {"annotations": {"kwok.x-k8s.io/status": "custom"}}}


@pytest.fixture
def client(kubeconfig, kube) -> TFPSClient:
    return TFPSClient(kubeconfig=kubeconfig, namespace=kube.ns)


@pytest.fixture
def cli(kubeconfig, kube, capsys):
    """``cli(*args) -> (exit code, stdout, stderr)`` of ``tfps`` in this process, on the test's namespace."""

    def run(*args: str, namespace: str | None = None):
        code = tfps([*args, "--kubeconfig", kubeconfig, "-n", namespace or kube.ns])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def _spec(**kw):
    return job_body("j", **kw)["spec"]


def test_submit_validates_client_side_and_creates_nothing_when_invalid(client, kube):
    bad = _spec()
    bad["replicas"]["ps"]["replicas"] = 0
    with pytest.raises(InvalidJob) as e:
        client.submit(
            {"apiVersion": "tfps.dev/v1alpha1", "kind": "PSTrainingJob", "metadata": {"name": "j"}, "spec": bad}
        )
    assert str(e.value) == "spec.replicas.ps.replicas: must be ≥ 1: a job needs a parameter server"
    assert e.value.source == "client-side validation"
    assert client.list() == []


def test_api_server_refusals_are_typed_with_its_message(client, kube):
    client.submit(build_job("j", _spec()))
    with pytest.raises(AlreadyExists) as e:
        client.submit(build_job("j", _spec()))
    assert e.value.status == 409 and 'pstrainingjobs.tfps.dev "j" already exists' in e.value.message
    with pytest.raises(NotFound) as e:
        client.submit(build_job("j", _spec()), namespace=f"{kube.ns}-missing")
    assert f'namespaces "{kube.ns}-missing" not found' in e.value.message and e.value.exit_code == 3


def test_submit_get_wait_and_the_cli_tables(client, kube, operator, cli):
    job = client.submit(build_job("j", _spec()))
    assert job.metadata.namespace == kube.ns and job.metadata.uid
    running = client.wait("j", phase="Running", timeout=30)
    assert running.status.phase == "Running"
    kube.wait_pods_running("j", TRAINERS)
    client.wait("j", condition="Running", timeout=30)

    code, out, _ = cli("get")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["NAME", "PHASE", "STEP"] and row.split()[:3] == ["j", "Running", "-/10"]
    code, out, _ = cli("get", "j", "-o", "json")
    assert code == 0 and json.loads(out)["metadata"]["name"] == "j" and json.loads(out)["status"]["phase"] == "Running"
    code, out, _ = cli("get", "-o", "yaml")
    assert code == 0 and [i["metadata"]["name"] for i in yaml.safe_load(out)["items"]] == ["j"]

    kube.wait_until(lambda: client.status("j").workers == "2/2", timeout=20, what="workers 2/2")
    code, out, _ = cli("describe", "j")
    assert code == 0
    for text in ("Phase:       Running", "Conditions:", "Children:", "Events:"):
        assert text in out, out
    assert re.search(r"^Pod\s+j-chief-0\s+Running$", out, re.M) and re.search(r"^Service\s+j\s+headless$", out, re.M), (
        out
    )
    assert re.search(r"^Running\s+True\s", out, re.M), out  # the Running condition
    # the operator's per-job series, as the chart's dashboard queries them
    ids = f'job_namespace="{kube.ns}",phase="Running",pstrainingjob="j"'
    operator.wait_metrics(
        f"tfps_job_phase{{{ids}}} 1.0", f'tfps_job_target_steps{{job_namespace="{kube.ns}",pstrainingjob="j"}} 10.0'
    )
    kids = {(k.kind, k.name) for k in client.children("j")}
    assert {("Pod", p) for p in TRAINERS} | {("Service", "j")} <= kids


def test_unknown_job_wrong_namespace_and_timeout_have_clear_messages_and_exit_codes(
    client, kube, operator, cli, make_namespace, kubeconfig
):
    with pytest.raises(NotFound) as e:
        client.get("nope")
    assert f'pstrainingjob "nope" in namespace "{kube.ns}"' in str(e.value)
    code, _, err = cli("get", "nope")
    assert code == 3 and 'pstrainingjob "nope"' in err and "not found" in err
    client.submit(build_job("j", _spec()))
    other = make_namespace()
    code, _, err = cli("describe", "j", namespace=other)
    assert code == 3 and f'in namespace "{other}"' in err
    code, _, err = cli("wait", "j", "--for", "phase=Succeeded", "--timeout", "2s")
    assert code == 4 and "timed out after 2s waiting for" in err and "Succeeded" in err
    with pytest.raises(WaitTimeout):
        client.wait("j", condition="Stalled", timeout=1)
    # the installed entry point exits with the same code
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("tfps")), "get", "nope", "--kubeconfig", kubeconfig, "-n", kube.ns],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3 and "not found" in proc.stderr


def test_wait_follows_the_job_to_success_and_reports_a_failure(client, kube, operator, cli):
    client.submit(build_job("j", _spec(export=False)))
    kube.wait_pods_running("j", TRAINERS)
    kube.finish_pod("j-chief-0", "Succeeded", 0)
    code, out, _ = cli("wait", "j", "--timeout", "60")
    assert code == 0 and out.strip() == "pstrainingjob/j: Succeeded"

    client.submit(build_job("k", job_body("k", run_policy={"backoffLimit": 0})["spec"]))
    kube.wait_pods_running("k", ["k-chief-0", "k-ps-0", "k-worker-0", "k-worker-1"])
    kube.finish_pod("k-ps-0", "Failed", 1, "ps crashed")
    with pytest.raises(JobFailed, match="BackoffLimitExceeded"):
        client.wait("k", phase="Succeeded", timeout=60)
    code, out, _ = cli("wait", "k")
    assert code == 5 and "Failed" in out


def test_suspend_resume_events_and_delete(client, kube, operator):
    client.submit(build_job("j", _spec()))
    kube.wait_pods_running("j", TRAINERS)
    client.suspend("j")
    client.wait("j", phase="Suspended", timeout=30)
    kube.wait_until(lambda: not kube.trainer_pods("j"), timeout=20, what="pods deleted")
    client.resume("j")
    kube.wait_pods_running("j", TRAINERS)
    client.wait("j", phase="Running", timeout=30)
    kube.wait_until(
        lambda: {"JobSuspended", "JobResumed"} <= {e.reason for e in client.events("j")},
        timeout=15,
        what="suspend/resume events",
    )
    ev = next(e for e in client.events("j") if e.reason == "JobSuspended")
    assert ev.object == "PSTrainingJob/j" and ev.time is not None
    client.delete("j", wait=True, timeout=30)
    with pytest.raises(NotFound):
        client.get("j")
    with pytest.raises(NotFound):
        client.suspend("j")


def test_logs_say_why_the_api_server_has_none(client, kube, operator, cli):
    client.submit(build_job("j", _spec()))
    kube.wait_pods_running("j", TRAINERS)
    # kwok runs no kubelet: the API server cannot reach the node's kubelet port for logs.
    with pytest.raises(LogsUnavailable) as e:
        client.logs("j", role="chief")
    assert 'logs of pod "j-chief-0"' in str(e.value) and ":10250/containerLogs/" in str(e.value), str(e.value)
    code, _, err = cli("logs", "j", "--role", "worker", "--index", "1")
    assert code == 1 and 'logs of pod "j-worker-1"' in err
    code, _, err = cli("logs", "j", "-f")
    assert code == 1 and 'logs of pod "j-chief-0"' in err and ":10250/containerLogs/" in err
    code, _, err = cli("logs", "j", "--role", "worker", "--index", "7")
    assert code == 3 and "no pod j-worker-7" in err
    code, _, err = cli("logs", "nope")
    assert code == 3 and 'pstrainingjob "nope"' in err


def _exported(kube, client):
    client.submit(build_job("j", _spec(export=True, chief_template=KWOK_HANDS_OFF)))
    kube.wait_until(lambda: "j-chief-0" in kube.trainer_pods("j"), timeout=20, what="chief created")
    kube.finish_pod("j-chief-0", "Succeeded", 0)
    client.wait("j", phase="Exporting", timeout=30)
    pod = kube.wait_until(lambda: next(iter(kube.pods("job-name=j-export")), None), timeout=20, what="export pod")
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
        failed=[
            FormatFailure(
                format="tflite",
                quantization="int8",
                reason="VerificationFailed",
                message="tflite (int8): output 'y': argmax agreement 0.70 < 0.90",
            )
        ],
    )
    kube.finish_pod(pod, "Succeeded", 0, encode(result))
    client.wait("j", phase="Succeeded", timeout=30)


def test_artifacts_without_an_export_exit_6(client, kube, operator, cli):
    client.submit(build_job("j", _spec()))
    code, _, err = cli("artifacts", "j")
    assert code == 6 and 'pstrainingjob "j"' in err and "has no export" in err
    with pytest.raises(NoExports):
        client.download_artifacts("j", dest="/tmp/never-written")


def test_artifacts_table_and_a_download_that_cannot_exec_leaves_no_pod(client, kube, operator, cli, tmp_path):
    _exported(kube, client)
    operator.wait_metrics(
        *(
            f'tfps_export_artifacts_total{{format="{fmt}",result="{result}"}} 1.0'
            for fmt, result in (("savedmodel", "passed"), ("onnx", "passed"), ("tflite", "failed"))
        )
    )
    code, out, _ = cli("artifacts", "j")
    assert code == 0
    assert "export of step 10 at exports/10" in out
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert (
        "50.0 KiB" in rows["savedmodel"] and "2e-07" in rows["onnx"] and "FAILED VerificationFailed" in rows["tflite"]
    )
    code, out, _ = cli("artifacts", "j", "--open")
    assert out.strip().endswith(
        "/tfps/" + f"{kube.ns}/j/exports/10/report.html (on the job's volume; --download DIR --open for a local copy)"
    )
    # The reader pod starts (kwok makes it Running) but kwok serves no exec: the API server's answer is
    # the error, and the pod is deleted whatever happened.
    dest = tmp_path / "download"
    with pytest.raises(ApiError) as e:
        client.download_artifacts("j", dest=dest, timeout=30)
    assert 'exec in reader pod "j-artifacts-' in str(e.value)
    assert ":10250/exec/" in e.value.message, e.value.message  # the API server could not reach a kubelet
    kube.wait_until(lambda: not kube.pods("tfps.dev/artifact-reader=j"), timeout=20, what="reader pod deleted")
    assert not dest.exists()
    code, _, err = cli("artifacts", "j", "--download", str(dest), "--timeout", "30")
    assert code == 1 and "exec in reader pod" in err
    kube.wait_until(lambda: not kube.pods("tfps.dev/artifact-reader=j"), timeout=20, what="reader pod deleted")


def test_tensorboard_pod_mounts_the_claim_read_only_is_owned_and_goes_on_ctrl_c(client, kube, operator, kubeconfig):
    """`tfps tensorboard` on the real API server: the pod it makes (kwok runs it; no kubelet serves the
    port-forward here, the real node tier fetches through it) mounts the job's claim read-only, is owned by
    the job, has a deadline, and is deleted when the command gets SIGINT."""
    import signal

    from tfps_operator.manifests.tensorboard_pod import TENSORBOARD_LABEL

    client.submit(build_job("j", _spec()))
    cmd = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())"]
    cmd += ["tensorboard", "j", "--image", "tfps-trainer:test", "--lifetime", "10m", "--timeout", "60"]
    tb = subprocess.Popen(
        [*cmd, "--kubeconfig", kubeconfig, "-n", kube.ns], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = tb.stdout.readline()
        assert line.startswith("TensorBoard at http://127.0.0.1:") and f" in {kube.ns};" in line, (line, tb.poll())
        (pod,) = kube.pods(f"{TENSORBOARD_LABEL}=j")
        body = kube.core.read_namespaced_pod(pod, kube.ns).to_dict()
        spec, (c,) = body["spec"], body["spec"]["containers"]
        assert f"pod {pod} " in line
        (claim,) = [v["persistent_volume_claim"] for v in spec["volumes"] if v.get("persistent_volume_claim")]
        assert claim == {"claim_name": "data", "read_only": True}, spec["volumes"]
        (mount,) = [m for m in c["volume_mounts"] if m["mount_path"].startswith("/tfps/claims/")]
        assert mount["read_only"] is True
        assert f"--logdir_spec=j:/tfps/claims/data/{kube.ns}/j/tensorboard" in c["command"]
        assert spec["active_deadline_seconds"] == 600 and spec["restart_policy"] == "Never"
        (owner,) = body["metadata"]["owner_references"]
        job = kube.job("j")
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "PSTrainingJob",
            "j",
            job["metadata"]["uid"],
            False,
        )
    finally:
        tb.send_signal(signal.SIGINT)
        _, err = tb.communicate(timeout=60)
    assert tb.returncode == 0, err
    kube.wait_until(lambda: not kube.pods(f"{TENSORBOARD_LABEL}=j"), timeout=20, what="TensorBoard pod deleted")
