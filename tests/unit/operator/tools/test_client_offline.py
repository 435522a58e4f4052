"""The Python client's pure parts: job loading with tfps validate's messages, the download's checks
against manifest.json, the reader pod, the tables, and CLI usage errors (no API server needed)."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tfps_operator.api.validate import validate_documents
from tfps_operator.manifests.artifact_reader import READER_LABEL, exports_dir, reader_pod
from tfps_operator.manifests.labels import JOB_NAME
from tfps_operator.tools.cli import main as tfps
from tfps_operator.tools.client import ChecksumMismatch, ClientError, InvalidJob, NoExports, build_job, load_job
from tfps_operator.tools.client.artifacts import check_export, unpack
from tfps_operator.tools.client.render import age, describe, get_table, manifest_table
from tfps_wire.export_manifest import digest

REPO = Path(__file__).resolve().parents[4]

BAD = """
apiVersion: tfps.dev/v1alpha1
kind: PSTrainingJob
metadata: {name: bad}
spec:
  model: {module: tfps_trainer.examples.linear}
  training: {steps: 0}
  replicas: {ps: {replicas: 0}}
"""


def test_load_job_reports_what_tfps_validate_reports(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(BAD)
    with pytest.raises(InvalidJob) as e:
        load_job(f)
    ((_, expected),) = list(validate_documents(BAD))
    assert e.value.errors == expected and e.value.exit_code == 2
    assert "spec.training.steps: must be ≥ 1" in str(e.value)


def test_load_job_refuses_a_missing_file_and_a_file_without_a_job(tmp_path):
    with pytest.raises(InvalidJob, match="cannot read"):
        load_job(tmp_path / "nope.yaml")
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(InvalidJob, match="no PSTrainingJob document found"):
        load_job(tmp_path / "cm.yaml")


def test_build_job_from_parts_validates_and_leaves_the_namespace_to_the_client():
    job = build_job("lin", {"model": {"module": "tfps_trainer.examples.linear"}, "training": {"steps": 20}})
    assert job.spec.training.steps == 20 and "namespace" not in job.metadata.model_fields_set
    with pytest.raises(InvalidJob, match="spec.training: Required value|spec.training"):
        build_job("lin", {"model": {"module": "m"}})


def _export(tmp_path: Path) -> tuple[Path, dict]:
    d = tmp_path / "exports" / "10"
    (d / "savedmodel" / "variables").mkdir(parents=True)
    (d / "savedmodel" / "saved_model.pb").write_bytes(b"pb" * 100)
    (d / "savedmodel" / "variables" / "variables.index").write_bytes(b"idx")
    (d / "model.onnx").write_bytes(b"onnx-bytes")
    arts = []
    for fmt, rel in (("savedmodel", "savedmodel"), ("onnx", "model.onnx")):
        size, sha, files = digest(d / rel)
        a = {
            "format": fmt,
            "path": rel,
            "bytes": size,
            "sha256": sha,
            "quantization": None,
            "verification": {
                "samples": 8,
                "maxAbsError": 1e-7,
                "maxRelError": 1e-8,
                "argmaxAgreement": None,
                "tolerance": {"maxAbs": 1e-5, "maxRel": 1e-5},
                "passed": True,
                "outputs": [],
            },
        }
        if files is not None:
            a["files"] = files
        arts.append(a)
    manifest = {"checkpoint": {"step": 10}, "complete": True, "samples": {"count": 8}, "artifacts": arts, "failed": []}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d, manifest


def _tar(d: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(d, arcname=".")
    return buf.getvalue()


def test_check_export_names_every_file_that_differs_from_the_manifest(tmp_path):
    d, manifest = _export(tmp_path)
    assert check_export(d, manifest) == []
    (d / "model.onnx").write_bytes(b"onnx-bytez")
    (d / "savedmodel" / "variables" / "variables.index").unlink()
    (d / "savedmodel" / "extra.txt").write_text("x")
    problems = check_export(d, manifest)
    assert any(p.startswith("onnx: model.onnx: sha256") for p in problems), problems
    assert "savedmodel: savedmodel/variables/variables.index is missing" in problems
    assert "savedmodel: savedmodel/extra.txt is not in manifest.json" in problems


def test_unpack_moves_a_matching_copy_into_place_and_keeps_nothing_of_a_bad_one(tmp_path):
    d, _ = _export(tmp_path)
    good = _tar(d)
    out = unpack(good, tmp_path / "dl" / "10")
    assert (out / "model.onnx").read_bytes() == b"onnx-bytes" and (out / "savedmodel" / "saved_model.pb").exists()
    (d / "model.onnx").write_bytes(b"tampered!!")
    with pytest.raises(ChecksumMismatch, match="onnx: model.onnx"):
        unpack(_tar(d), tmp_path / "dl2" / "10")
    assert not (tmp_path / "dl2" / "10").exists() and list((tmp_path / "dl2").iterdir()) == []


def test_unpack_refuses_members_outside_the_directory_and_tars_without_manifest(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ClientError, match="refusing the copy"):
        unpack(buf.getvalue(), tmp_path / "dl" / "1")
    assert not (tmp_path / "escape.txt").exists()
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    with pytest.raises(NoExports, match="no manifest.json"):
        unpack(empty.getvalue(), tmp_path / "dl" / "2")


def _job(**status):
    job = load_job(
        {
            "apiVersion": "tfps.dev/v1alpha1",
            "kind": "PSTrainingJob",
            "metadata": {"name": "lin", "namespace": "ml", "uid": "u-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "model": {"module": "tfps_trainer.examples.linear"},
                "training": {"steps": 300},
                "storage": {"claimName": "data", "mountPath": "/vol"},
            },
        }
    )
    return job.model_copy(update={"status": job.model_validate({**job.to_wire(), "status": status}).status})


def test_reader_pod_mounts_the_claim_read_only_and_is_never_taken_for_a_trainer():
    pod = reader_pod(_job(), "lin-artifacts-abc", "trainer:1", 120)
    spec = pod["spec"]
    assert spec["volumes"] == [{"name": "storage", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}}]
    assert spec["containers"][0]["volumeMounts"][0] == {"name": "storage", "mountPath": "/vol", "readOnly": True}
    assert spec["activeDeadlineSeconds"] == 120 and spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert JOB_NAME not in pod["metadata"]["labels"] and pod["metadata"]["labels"][READER_LABEL] == "lin"
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner["uid"] == "u-1" and owner["controller"] is False
    assert exports_dir(_job()) == "/vol/ml/lin/exports"


def test_reader_pod_is_scheduled_like_the_chief():
    """Where the claim can be mounted is where the chief ran: a tainted pool, a node-bound volume."""
    wire = _job().to_wire()
    toleration = {"key": "pool", "operator": "Exists", "effect": "NoSchedule"}
    wire["spec"]["replicas"] = {
        "chief": {
            "template": {
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [toleration],
                    "imagePullSecrets": [{"name": "reg"}],
                    "priorityClassName": "high",
                }
            }
        }
    }
    spec = reader_pod(load_job(wire), "x", "img", 60)["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu"} and spec["tolerations"] == [toleration]
    assert spec["imagePullSecrets"] == [{"name": "reg"}]
    assert "priorityClassName" not in spec and "affinity" not in spec
    assert "nodeSelector" not in reader_pod(_job(), "x", "img", 60)["spec"]


def test_reader_pod_refuses_a_job_without_a_persistent_volume():
    job = _job()
    job = job.model_copy(
        update={
            "spec": job.spec.model_copy(update={"storage": job.spec.storage.model_copy(update={"claim_name": None})})
        }
    )
    with pytest.raises(ValueError, match="no persistent volume"):
        reader_pod(job, "x", "img", 60)


def test_get_table_shows_progress_and_checkpoint_age():
    now = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    job = _job(
        phase="Running",
        workers="2/2",
        restarts=1,
        progress={"step": 120, "loss": 0.0312, "stepsPerSecond": 41.5},
        checkpoint={"step": 100, "time": (now - timedelta(seconds=95)).isoformat()},
    )
    lines = get_table([job], now=now).splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "STEP", "LOSS", "STEPS/S", "CHECKPOINT", "WORKERS", "RESTARTS", "AGE"]
    assert lines[1].split() == ["lin", "Running", "120/300", "0.0312", "41.5", "100", "(95s", "ago)", "2/2", "1", "10m"]
    assert age(now - timedelta(hours=50), now) == "2d"


def test_describe_and_manifest_table_hold_conditions_and_figures(tmp_path):
    now = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    job = _job(
        phase="Failed",
        conditions=[
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "ps-0 failed 4 times",
                "lastTransitionTime": "2026-01-01T00:59:00Z",
            }
        ],
    )
    text = describe(job, [], [], now=now)
    assert "BackoffLimitExceeded" in text and "ps-0 failed 4 times" in text and "Phase:       Failed" in text
    _, manifest = _export(tmp_path)
    table = manifest_table(manifest)
    assert "savedmodel" in table and "1e-07" in table and "passed" in table


def test_describe_shows_the_runs_size_and_the_last_resize_with_its_cost():
    now = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    job = _job(
        phase="Running",
        workers="3/3 (want 4)",
        clusterSize={"ps": 1, "worker": 3},
        workersLeftOut=1,
        resizes=2,
        resize={
            "from": {"ps": 1, "worker": 4},
            "to": {"ps": 1, "worker": 3},
            "method": "Restart",
            "reason": "WorkersPending",
            "completed": "2026-01-01T00:58:00Z",
            "resumedFrom": 800,
            "stepsLost": 0,
        },
    )
    text = describe(job, [], [], now=now)
    assert "Workers running/in the run: 3/3 (want 4)" in text
    assert "Run size:    3 worker(s), 1 ps, 1 worker(s) left out" in text
    assert (
        "Last resize: workers 4 → 3, ps 1 → 1 (Restart, WorkersPending, done 2m ago; resumed from step 800, "
        "0 step(s) lost); resizes so far: 2"
    ) in text
    assert get_table([job], now=now).splitlines()[1].split()[6:9] == ["3/3", "(want", "4)"]


def test_cli_usage_errors_exit_2_before_contacting_a_cluster(capsys):
    assert tfps(["wait", "j", "--for", "colour=blue", "--kubeconfig", "/nonexistent"]) == 2
    assert "use phase=PHASE or condition=TYPE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        tfps(["logs", "j", "--role", "boss"])
    assert e.value.code == 2


def test_cli_without_a_usable_kubeconfig_says_so(capsys, tmp_path):
    assert tfps(["get", "--kubeconfig", str(tmp_path / "none")]) == 1
    assert f"cannot use kubeconfig {tmp_path / 'none'}" in capsys.readouterr().err


def test_events_of_a_job_are_those_of_its_own_children_only():
    from tfps_operator.tools.client.jobs import _is_child

    assert (
        _is_child("j", "Pod", "j-chief-0")
        and _is_child("j", "Pod", "j-export-x7k2p")
        and _is_child("j", "Job", "j-export")
    )
    assert _is_child("j", "Service", "j") and _is_child("j", "PersistentVolumeClaim", "j-storage")
    assert not _is_child("j", "Pod", "j-2-chief-0") and not _is_child("j", "Pod", "j-ps-chief-0")
    assert not _is_child("j", "PSTrainingJob", "j-2") and not _is_child("j", "Service", "j-2")
