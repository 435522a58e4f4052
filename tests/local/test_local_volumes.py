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
