"""The local GCS rig itself: TensorFlow's own GCS filesystem saves and restores a checkpoint on gs://
through hack/lib/gcsproxy.py and fake-gcs-server (tests/support/gcs.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.gcs import GcsEmulator

pytestmark = pytest.mark.tf

_CHECKPOINT_ROUND_TRIP = r"""
import json, sys, time
import tensorflow as tf

root = sys.argv[1]
t0 = time.monotonic()
v = tf.Variable(tf.zeros([256, 256]))
ckpt = tf.train.Checkpoint(v=v, step=tf.Variable(0, dtype=tf.int64))
mgr = tf.train.CheckpointManager(ckpt, root + "/checkpoints", max_to_keep=2)
saves = []
for step in (1, 2, 3):
    v.assign(tf.fill([256, 256], float(step)))
    ckpt.step.assign(step)
    s = time.monotonic()
    mgr.save(checkpoint_number=step)
    saves.append(time.monotonic() - s)
fresh = tf.train.Checkpoint(v=tf.Variable(tf.zeros([256, 256])), step=tf.Variable(0, dtype=tf.int64))
latest = tf.train.latest_checkpoint(root + "/checkpoints")
s = time.monotonic()
fresh.restore(latest).assert_consumed()
restore = time.monotonic() - s
print(json.dumps({
    "latest": latest,
    "step": int(fresh.step.numpy()),
    "value": float(fresh.v.numpy()[0, 0]),
    "listing": sorted(tf.io.gfile.listdir(root + "/checkpoints")),
    "save_s": saves, "restore_s": restore,
}))
"""


def test_checkpoint_saves_and_restores_on_gs_through_the_emulator(gcs: GcsEmulator, bucket: str) -> None:
    root = f"gs://{bucket}/rig"
    proc = subprocess.run(
        [sys.executable, "-c", _CHECKPOINT_ROUND_TRIP, root], env=gcs.env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["latest"] == f"{root}/checkpoints/ckpt-3"
    assert (out["step"], out["value"]) == (3, 3.0)
    # max_to_keep=2: ckpt-1 was deleted, on the emulator too (seen through its own API, not TensorFlow's)
    objects = gcs.objects(bucket, "rig/checkpoints/")
    assert "rig/checkpoints/checkpoint" in objects
    assert any(n.startswith("rig/checkpoints/ckpt-3.data-") for n in objects)
    assert not any(n.startswith("rig/checkpoints/ckpt-1.") for n in objects)
    # the 256x256 float32 variable is really stored: its data shard holds at least 256 KiB
    assert max(size for n, size in objects.items() if n.startswith("rig/checkpoints/ckpt-3.data-")) >= 256 * 1024


def test_the_export_stream_tars_a_prefix_and_names_a_missing_object(gcs: GcsEmulator, bucket: str) -> None:
    """`python -m tfps_trainer.export.stream` (what `tfps artifacts --download` runs in its reader pod for a
    gs:// job): every object under the prefix, nested ones too, byte for byte; a missing object or prefix
    exits 1 with "No such file" (what the client turns into NoExports)."""
    import io
    import tarfile

    files = {"manifest.json": b'{"artifacts": []}', "savedmodel/saved_model.pb": b"\x08\x01" * 1000, "m.tflite": b""}
    for name, data in files.items():
        gcs.put(bucket, f"jobs/ns/j/exports/300/{name}", data)
    gcs.put(bucket, "jobs/ns/j/exports/3000/other", b"not under 300/")
    stream = [sys.executable, "-m", "tfps_trainer.export.stream"]
    root = f"gs://{bucket}/jobs/ns/j/exports"
    tar = subprocess.run([*stream, "tar", f"{root}/300"], env=gcs.env(), capture_output=True, timeout=300)
    assert tar.returncode == 0, tar.stderr[-3000:]
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        got = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert got == files
    for args in (["cat", f"{root}/LATEST"], ["tar", f"{root}/7"]):
        miss = subprocess.run([*stream, *args], env=gcs.env(), capture_output=True, text=True, timeout=300)
        assert miss.returncode == 1 and f"No such file: {args[1]}" in miss.stderr, (args, miss.stderr[-2000:])
