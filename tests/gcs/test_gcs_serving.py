"""TF Serving's layout in object storage: ``exports/serving/<version>/`` published by the exporter's own
ObjectPublisher on gs:// (the local emulator of tests/support/gcs.py), then read the two ways a server gets
it: straight from gs:// as TensorFlow Serving's file-system source walks a model base path, and as KServe's
storage initializer copies a gs:// URI (every object under the prefix to its relative path) before TF
Serving reads the copy. No ``tensorflow_model_server`` binary is installed here: the version TF Serving
would pick is found by its rule (tests/support/serving.py) and loaded with TensorFlow's SavedModel loader.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.gcs import GcsEmulator
from tfps_wire.job_settings import ExportSettings, JobSettings, Paths

pytestmark = pytest.mark.tf

_PUBLISH = r"""
import json, sys, tempfile
from pathlib import Path
import tensorflow as tf
from tfps_trainer.export.objects import ObjectPublisher

root = sys.argv[1]

class M(tf.Module):
    def __init__(self, bias):
        self.bias = tf.Variable(bias)
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(self, x):
        return {"y": x + self.bias}

def stage(tmp, bias, complete):
    s = Path(tmp) / f"stage-{bias}"
    m = M(bias)
    tf.saved_model.save(m, str(s / "savedmodel"), signatures={"serving_default": m.serve})
    (s / "manifest.json").write_text(json.dumps({"complete": complete}))
    return s

pub = ObjectPublisher(root)
removed = pub.clean_incomplete()
with tempfile.TemporaryDirectory() as tmp:
    pub.publish(stage(tmp, 300.0, True), 300, serving=True)
    pub.publish(stage(tmp, 500.0, True), 500, serving=True)
    pub.publish(stage(tmp, 900.0, False), 900, serving=False)  # a required format failed: not served
print(json.dumps({"removed": removed, "versions": pub.serving_versions()}))
"""

_SERVE = r"""
import json, sys
import tensorflow as tf
sys.path.insert(0, sys.argv[2])
from support.serving import servable_version

version, path = servable_version(sys.argv[1])
inputs = {k: tf.constant(v, tf.float32) for k, v in json.loads(sys.argv[3]).items()}
out = tf.saved_model.load(path).signatures["serving_default"](**inputs)
print(json.dumps({"version": version, "path": path, "y": next(iter(out.values())).numpy().tolist()}))
"""


X = json.dumps({"x": [1.0, 2.0]})


def _python(script: str, *args: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _copy_like_the_storage_initializer(gcs: GcsEmulator, bucket: str, prefix: str, out: Path) -> list[str]:
    """What KServe's storage initializer does with ``gs://<bucket>/<prefix>``: list the objects under
    ``<prefix>/`` and write each at its name relative to the prefix (objects ending in ``/`` are skipped)."""
    names = sorted(gcs.objects(bucket, prefix.rstrip("/") + "/"))
    for name in names:
        rel = name[len(prefix) :].lstrip("/")
        if rel and not rel.endswith("/"):
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(gcs.get(bucket, name))
    return names


def test_serving_layout_on_gs_is_a_model_base_path_for_tf_serving_and_kserve(
    gcs: GcsEmulator, bucket: str, tmp_path: Path
) -> None:
    prefix = "jobs/ns/job/exports"
    # an interrupted export of step 700: a serving version without saved_model.pb and no manifest
    gcs.put(bucket, f"{prefix}/serving/700/variables/variables.index", b"torn")
    gcs.put(bucket, f"{prefix}/700/savedmodel/variables/variables.index", b"torn")
    root = f"gs://{bucket}/jobs/ns/job"
    published = _python(_PUBLISH, root, env=gcs.env())
    assert sorted(published["removed"]) == ["700", "serving/700"]
    assert published["versions"] == ["300", "500"]

    listing = gcs.listing(bucket, f"{prefix}/")
    version = {n: int(item["generation"]) for n, item in listing.items() if n.startswith(f"{prefix}/serving/500/")}
    assert {n.rsplit("/500/", 1)[1] for n in version} >= {"saved_model.pb", "variables/variables.index"}
    assert not any(n.endswith("/") for n in listing), "no directory placeholder objects"
    # within the version saved_model.pb comes last, and the step's manifest after the whole version
    pb = version[f"{prefix}/serving/500/saved_model.pb"]
    assert pb == max(version.values())
    assert int(listing[f"{prefix}/500/manifest.json"]["generation"]) > pb
    # every served object is the export's own file, byte for byte
    for name in version:
        rel = name.split("/serving/500/", 1)[1]
        assert gcs.get(bucket, name) == gcs.get(bucket, f"{prefix}/500/savedmodel/{rel}"), rel

    repo_tests = str(Path(__file__).resolve().parents[1])
    direct = _python(_SERVE, f"{root}/exports/serving", repo_tests, X, env=gcs.env())
    assert (direct["version"], direct["y"]) == (500, [501.0, 502.0])

    copied = tmp_path / "mnt" / "models"
    copied.mkdir(parents=True)
    _copy_like_the_storage_initializer(gcs, bucket, f"{prefix}/serving", copied)
    assert sorted(p.name for p in copied.iterdir()) == ["300", "500"]
    local = _python(_SERVE, str(copied), repo_tests, X, env=gcs.env())
    assert (local["version"], local["y"]) == (500, [501.0, 502.0])


_TRAIN = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from checkpoints import train_and_checkpoint
print(train_and_checkpoint(Path(sys.argv[1]), "tfps_trainer.examples.linear", {"features": 8, "hidden": 16}, steps=5))
"""


def test_the_exporter_publishes_the_serving_version_of_a_gs_job(gcs: GcsEmulator, bucket: str, tmp_path: Path) -> None:
    """``python -m tfps_trainer.export`` on a gs:// job root: the step's SavedModel also lands in
    ``exports/serving/<step>/``, and that base path serves the step."""
    tests = Path(__file__).resolve().parents[1]
    local = tmp_path / "job"
    trained = subprocess.run(
        [sys.executable, "-c", _TRAIN, str(local), str(tests / "export")], capture_output=True, text=True, timeout=600
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    step = int(trained.stdout.strip().splitlines()[-1])
    for path in (local / "checkpoints").rglob("*"):
        if path.is_file():
            gcs.put(bucket, f"jobs/ns/job/{path.relative_to(local).as_posix()}", path.read_bytes())
    root = f"gs://{bucket}/jobs/ns/job"
    job = JobSettings(
        job_name="job",
        namespace="ns",
        model_module="tfps_trainer.examples.linear",
        model_args={"features": 8, "hidden": 16},
        steps=step,
        batch_size=32,
        paths=Paths(root=root),
        export=ExportSettings(formats=("savedmodel",), verify_samples=8),
    )
    env = {**gcs.env(), "TFPS_JOB": job.to_env(), "TFPS_TERMINATION_LOG": str(tmp_path / "termination.log")}
    env.pop("TFPS_LINEAGE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tfps_trainer.export"], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    objects = gcs.objects(bucket, "jobs/ns/job/exports/")
    assert f"jobs/ns/job/exports/serving/{step}/saved_model.pb" in objects
    assert json.loads(gcs.get(bucket, f"jobs/ns/job/exports/{step}/manifest.json"))["complete"] is True
    served = _python(
        _SERVE, f"{root}/exports/serving", str(tests), json.dumps({"features": [[0.5] * 8]}), env=gcs.env()
    )
    assert served["version"] == step and os.path.basename(served["path"]) == str(step)
    assert len(served["y"]) == 1 and all(abs(v) < 1e6 for v in served["y"][0])
