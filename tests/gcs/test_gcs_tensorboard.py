"""``tfps tensorboard gs://...``: TensorBoard reads a job's event files straight out of object storage
(through TensorFlow's GCS filesystem; here the local emulator of tests/support/gcs.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from support.gcs import GcsEmulator

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]


def test_tensorboard_serves_scalars_read_from_gs(gcs: GcsEmulator, bucket: str, tmp_path: Path) -> None:
    import tensorflow as tf

    local = tmp_path / "tb" / "chief"
    with tf.summary.create_file_writer(str(local)).as_default():
        for step, loss in ((10, 0.9), (20, 0.5), (30, 0.25)):
            tf.summary.scalar("loss", loss, step=step)
    (events,) = local.glob("events.out.tfevents.*")
    gcs.put(bucket, f"jobs/ml/j/tensorboard/chief/{events.name}", events.read_bytes())

    cmd = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())"]
    tb = subprocess.Popen(
        [*cmd, "tensorboard", f"gs://{bucket}/jobs/ml/j", "--timeout", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gcs.env(),
    )
    try:
        line = tb.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("TensorBoard at http://127.0.0.1:"), (line, tb.poll())
        assert f"j=gs://{bucket}/jobs/ml/j/tensorboard" in line, line
        url = line.split()[2]
        query = urllib.parse.urlencode({"run": "j/chief", "tag": "loss"})
        served: list[list[float]] = []
        for _ in range(60):  # TensorBoard loads the files on its own reload loop, after it starts serving
            try:
                with urllib.request.urlopen(f"{url}data/plugin/scalars/scalars?{query}", timeout=30) as r:
                    served = json.load(r)
            except urllib.error.HTTPError as e:  # 404 "No scalar data" until its reload loop has read the run
                assert e.code == 404, e
                served = []
            if len(served) == 3:
                break
            subprocess.run(["sleep", "1"], check=True)
        assert [(s, round(v, 6)) for _, s, v in served] == [(10, 0.9), (20, 0.5), (30, 0.25)], served
    finally:
        tb.send_signal(signal.SIGINT)
        _, err = tb.communicate(timeout=30)
    assert tb.returncode == 0, err
