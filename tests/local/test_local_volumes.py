"""`tfps run` gives each process its pod's volumes at their mount paths, in a mount namespace of its own:
a program that writes where its flags say (a claim mounted at /train) writes under the work directory,
never into this machine's root."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from support.local_procs import tfps_run

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]

WRITER = """
import json, os, pathlib, sys

task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
scratch = pathlib.Path("/scratch")
before = sorted(p.name for p in scratch.iterdir())
(scratch / "mine").write_text(name)
logs = pathlib.Path(sys.argv[1].split("=", 1)[1])
logs.mkdir(parents=True, exist_ok=True)
(logs / f"{name}.json").write_text(json.dumps({
    "scratch_before": before,
    "settings": pathlib.Path("/etc/app/settings.yaml").read_text(),
    "token": pathlib.Path("/etc/creds/token").read_text(),
    "config_writable": os.access("/etc/app", os.W_OK),
}))
print(f"{name} wrote {logs}", flush=True)
"""


def test_a_program_writing_to_its_claim_mount_writes_under_the_work_directory(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "writer.py").write_text(WRITER)
    template = {
        "spec": {
            "volumes": [
                {"name": "train", "persistentVolumeClaim": {"claimName": "train-pvc"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "app", "configMap": {"name": "app-config"}},
                {"name": "creds", "secret": {"secretName": "app-creds", "items": [{"key": "t", "path": "token"}]}},
            ],
            "volumeMounts": [
                {"name": "train", "mountPath": "/train"},
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "app", "mountPath": "/etc/app"},
                {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
            ],
        }
    }
    job = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "pvcwriter"},
        "spec": {
            "strategy": "MultiWorkerMirrored",
            "model": {"command": ["python", "writer.py", "--log_dir=/train/logs"]},
            "replicas": {"worker": {"replicas": 2, "template": template}},
            "export": {"enabled": False},
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-config"},
        "data": {"settings.yaml": "lr: 0.1\n"},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "app-creds"},
        "data": {"t": base64.b64encode(b"s3cret").decode()},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all([job, config, secret]))
    host_before = Path("/train/logs").exists()
    res = tfps_run(path, tmp_path / "work", "--code", str(code), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    logs = tmp_path / "work" / "volumes" / "train-pvc" / "logs"
    for name in ("worker-0", "worker-1"):
        got = json.loads((logs / f"{name}.json").read_text())
        # an emptyDir per process, empty at its start; the ConfigMap and Secret as files, read-only
        assert got["scratch_before"] == [], got
        assert got["settings"] == "lr: 0.1\n" and got["token"] == "s3cret" and got["config_writable"] is False, got
        local = tmp_path / "work" / "default" / "pvcwriter" / "local" / "emptydir" / name / "scratch" / "mine"
        assert local.read_text() == name
    assert Path("/train/logs").exists() is host_before
    assert not Path("/scratch/mine").exists() and not Path("/etc/creds").exists()


MWMS_FIT = Path(__file__).resolve().parent / "scripts" / "mwms_fit_tf_keras.py"


def test_a_tfjob_program_saving_to_its_own_directories_is_followed_and_exported_from_there(tmp_path: Path) -> None:
    """Kubeflow's MultiWorkerMirrored Keras example's shape: --checkpoint-dir and --model-dir on the claim it
    mounts at /train. spec.model.directories names them: tfps follows the checkpoints and exports the model
    from there (the exporter sees the lead's volumes read-only), and nothing lands outside the work dir."""
    epochs, per_epoch = 2, 20
    template = {
        "spec": {
            "volumes": [{"name": "training", "persistentVolumeClaim": {"claimName": "strategy-volume"}}],
            "volumeMounts": [{"name": "training", "mountPath": "/train"}],
        }
    }
    command = ["python", str(MWMS_FIT), "--epochs", str(epochs), "--steps-per-epoch", str(per_epoch)]
    command += ["--checkpoint-dir", "/train/checkpoint", "--model-dir", "/train/saved_model"]
    job = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "mwown"},
        "spec": {
            "strategy": "MultiWorkerMirrored",
            "model": {
                "command": command,
                "directories": {"checkpoints": "/train/checkpoint", "savedModel": "/train/saved_model"},
            },
            "replicas": {"worker": {"replicas": 2, "template": template}},
            "export": {"formats": ["savedmodel", "tflite"]},
        },
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    host_before = Path("/train").exists()
    res = tfps_run(path, tmp_path / "work", timeout=540)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    work = tmp_path / "work"
    root = work / "default" / "mwown"
    claim = work / "volumes" / "strategy-volume"
    steps = epochs * per_epoch
    lead_log = (root / "logs" / "worker-0.log").read_text()
    assert f"checkpoint step {steps} -> /train/checkpoint/weights" in lead_log, lead_log[-3000:]
    assert (claim / "checkpoint" / "weights.index").is_file() and (claim / "saved_model" / "saved_model.pb").is_file()
    manifest = json.loads((root / "exports" / str(steps) / "manifest.json").read_text())
    assert manifest["source"] == {"kind": "savedmodel", "directory": "/train/saved_model"}, manifest
    assert manifest["checkpoint"] == {"step": steps, "path": None, "directory": "/train/checkpoint/weights"}
    assert sorted(a["format"] for a in manifest["artifacts"]) == ["savedmodel", "tflite"], manifest
    assert all(a["verification"]["passed"] for a in manifest["artifacts"]), manifest["artifacts"]
    recorded = json.loads((root / "local" / "directories.json").read_text())
    assert recorded == {"checkpoints": str(claim / "checkpoint"), "savedModel": str(claim / "saved_model")}
    assert Path("/train").exists() is host_before
    assert not list(root.rglob("*workertemp*"))
