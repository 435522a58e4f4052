"""Lineage in a real export: the export Job's TFPS_LINEAGE, built by the operator's own code from a job and
its status, handed to the real exporter with the code mounted as a ConfigMap volume lays it out; the
manifest says what produced the model."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from conftest import run_export, settings

pytestmark = pytest.mark.tf

tf = pytest.importorskip("tensorflow")
from checkpoints import train_and_checkpoint  # noqa: E402  (imports TensorFlow)

from support.operator_helpers import CFG, make_job, status  # noqa: E402
from tfps_operator.manifests.export_job import export_job, with_lineage  # noqa: E402
from tfps_operator.reconcile.lineage import for_export  # noqa: E402
from tfps_wire.lineage import LINEAGE_ENV, spec_sha256  # noqa: E402

LINEAR = "tfps_trainer.examples.linear"
ARGS = {"features": 8, "hidden": 16}
IMAGE_ID = "registry.local/tfps-trainer@sha256:" + "f" * 64
CODE = {"train.py": "print('train')\n", "lib/util.py": "X = 1\n"}


def _configmap_volume(top: Path) -> Path:
    """The code as kubelet mounts a ConfigMap with items: the files in a timestamped directory, ``..data``
    linked to it, each top-level entry a link through ``..data``."""
    stamp = top / "..2026_12_06_00_00_00.000000001"
    for rel, text in CODE.items():
        (stamp / rel).parent.mkdir(parents=True, exist_ok=True)
        (stamp / rel).write_text(text)
    os.symlink(stamp.name, top / "..data")
    os.symlink("..data/train.py", top / "train.py")
    os.symlink("..data/lib", top / "lib")
    return top


def test_the_exporter_writes_what_produced_the_model_into_the_manifest(tmp_path, testmodels_on_path):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, LINEAR, ARGS, steps=5)
    job = make_job(
        ps=1,
        workers=1,
        model={"module": LINEAR, "args": ARGS, "source": {"configMap": "mnist-code"}},
        training={"steps": step},
    )
    st = status(
        phase="Exporting",
        checkpoint={"step": step, "path": f"checkpoints/ckpt-{step}"},
        progress={"step": step - 1, "loss": 0.5, "stepsPerSecond": 20.0, "updated": "2026-12-06T00:00:00Z"},
        export={
            "jobName": "mnist-export",
            "lineage": {"specSha256": spec_sha256(job.spec.to_wire()), "imageId": IMAGE_ID, "pod": "mnist-chief-0"},
        },
    )
    manifest = with_lineage(export_job(job, CFG), for_export(job, st))
    env = {e["name"]: e["value"] for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
    code = _configmap_volume(tmp_path / "tfps-code")
    job_settings = settings(root, LINEAR, ARGS, formats=("savedmodel",), verify_samples=8)
    run = run_export(job_settings.model_copy(update={"code_dir": str(code)}), env={LINEAGE_ENV: env[LINEAGE_ENV]})
    assert run.rc == 0, run.stderr[-3000:]

    doc = json.loads((root / "exports" / str(step) / "manifest.json").read_text())
    lineage = doc["lineage"]
    assert lineage["producer"] == "operator"
    assert lineage["spec"]["value"] == job.spec.to_wire()
    assert lineage["spec"]["sha256"] == spec_sha256(lineage["spec"]["value"]) == spec_sha256(job.spec.to_wire())
    assert lineage["image"]["digest"] == "sha256:" + "f" * 64 and lineage["image"]["pod"] == "mnist-chief-0"
    listing = "".join(f"{hashlib.sha256(CODE[rel].encode()).hexdigest()}  {rel}\n" for rel in sorted(CODE))
    assert lineage["code"] == {
        "configMap": "mnist-code",
        "sha256": hashlib.sha256(listing.encode()).hexdigest(),
        "files": 2,
        "bytes": sum(len(t) for t in CODE.values()),
    }
    assert lineage["training"] == {
        "step": step,
        "targetSteps": step,
        "finalCheckpoint": f"checkpoints/ckpt-{step}",
        "loss": 0.5,
        "stepsPerSecond": 20.0,
        "reportedStep": step - 1,
        "reportedAt": "2026-12-06T00:00:00+00:00",
    }
    assert doc["checkpoint"] == {"step": step, "path": f"checkpoints/ckpt-{step}"}
    assert doc["versions"]["tensorflow"] == tf.__version__
    for dist in ("keras", "tf2onnx", "onnx", "ai-edge-litert", "protobuf", "tfps-operator"):
        assert doc["versions"][dist], dist
