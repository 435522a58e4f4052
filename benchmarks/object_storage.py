"""Checkpoint save/restore and export publishing on gs:// (the local emulator) next to a local directory.

    hack/netns-run .venv/bin/python benchmarks/object_storage.py [--mib 16] [--repeat 3] [--json FILE]

Starts fake-gcs-server behind hack/lib/gcsproxy.py (tests/support/gcs.py), then in one TensorFlow
process per target (a temporary directory, then gs://<bucket>/bench):

- checkpoint save: ``tf.train.CheckpointManager.save`` of ``--mib`` MiB of float32 variables, ``--repeat``
  times (max_to_keep=2, so the later saves also delete), median and max;
- checkpoint restore: ``Checkpoint.restore(latest)`` of the same, median;
- export publish: a SavedModel of the same variables plus a 1 MiB file, published the way the exporter
  does (volume: ``Publisher.commit``, rename; gs://: ``ObjectPublisher.publish``, upload + read-back
  checksum + manifest last + LATEST).

The emulator keeps objects in memory on the same machine: these figures are the filesystem layer's
overhead (TLS, HTTP, TensorFlow's GCS client), not a real bucket's latency. Prints JSON; writes it to
``--json`` when given.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.gcs import GcsEmulator  # noqa: E402

_BENCH = r"""
import json, statistics, sys, tempfile, time
from pathlib import Path
import tensorflow as tf
from tfps_trainer.export.publish import Publisher, MANIFEST
from tfps_trainer.export.objects import ObjectPublisher
from tfps_wire import export_manifest as manifest

root, mib, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = mib * (1 << 20) // 4 // 8
vs = [tf.Variable(tf.random.normal([n])) for _ in range(8)]
ckpt = tf.train.Checkpoint(vs=vs)
mgr = tf.train.CheckpointManager(ckpt, root + "/checkpoints", max_to_keep=2)
saves = []
for i in range(repeat):
    t = time.perf_counter(); mgr.save(checkpoint_number=i + 1); saves.append(time.perf_counter() - t)
restores = []
for _ in range(repeat):
    t = time.perf_counter()
    ckpt.restore(mgr.latest_checkpoint).assert_consumed()
    restores.append(time.perf_counter() - t)

class M(tf.Module):
    def __init__(self):
        self.vs = vs
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def f(self, x):
        return x + self.vs[0][0]

with tempfile.TemporaryDirectory() as scratch:
    local_root = Path(scratch) if root.startswith("gs://") else Path(root)
    with Publisher(local_root) as pub, pub.staging(7) as stage:
        tf.saved_model.save(M(), str(stage / "savedmodel"))
        (stage / "extra.bin").write_bytes(b"x" * (1 << 20))
        manifest.write(stage / MANIFEST, {"complete": True})
        t = time.perf_counter()
        if root.startswith("gs://"):
            ObjectPublisher(root).publish(stage, 7, serving=True)
        else:
            pub.commit(stage, 7)
        publish = time.perf_counter() - t
print(json.dumps({
    "save_median_s": statistics.median(saves), "save_max_s": max(saves),
    "restore_median_s": statistics.median(restores), "publish_s": publish,
}))
"""


def _run(root: str, env: dict[str, str] | None, mib: int, repeat: int) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", _BENCH, root, str(mib), str(repeat)], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"benchmark on {root} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        emu = GcsEmulator(Path(tmp) / "gcs")
        (Path(tmp) / "gcs").mkdir()
        emu.start()
        try:
            bucket = emu.create_bucket("tfps-bench")
            out = {
                "mib": a.mib,
                "volume": _run(str(Path(tmp) / "vol"), emu.env(), a.mib, a.repeat),
                "gcs_emulator": _run(f"gs://{bucket}/bench", emu.env(), a.mib, a.repeat),
            }
        finally:
            emu.stop()
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
