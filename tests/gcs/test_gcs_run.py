"""`tfps run` with the job's files in object storage (gs://, the local emulator of tests/support/gcs.py).

The quickstart trains with checkpoints on gs://, loses its parameter server, resumes from the gs://
checkpoint, and publishes a verified export by the manifest rule (artifacts, then manifest.json, then
LATEST; an earlier export's prefix without a manifest is ignored and cleaned). Bad storage input is
refused before anything starts, naming the field and the bucket.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.gcs import GcsEmulator
from support.local_procs import children_by_task

pytestmark = [pytest.mark.tf, pytest.mark.timeout(3600)]  # four TF processes twice, then an export

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
JOB = "default/quickstart"


def tfps(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())", *args]


def checkpoint_step(gcs: GcsEmulator, bucket: str, prefix: str) -> int | None:
    """The step the checkpoint state object names (None before the first checkpoint)."""
    if f"{prefix}/checkpoints/checkpoint" not in gcs.objects(bucket, f"{prefix}/checkpoints/"):
        return None
    text = gcs.get(bucket, f"{prefix}/checkpoints/checkpoint").decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("model_checkpoint_path"))
    return int(line.rsplit("-", 1)[1].rstrip('"'))


def test_quickstart_on_gs_resumes_after_a_lost_ps_and_publishes_by_manifest(
    gcs: GcsEmulator, bucket: str, tmp_path: Path
) -> None:
    prefix = f"jobs/{JOB}"
    # a failed earlier export: artifacts but no manifest. Readers must not trust it; the export removes it.
    gcs.put(bucket, f"{prefix}/exports/7/savedmodel/saved_model.pb", b"torn")
    runner = subprocess.Popen(
        tfps("run", str(QUICKSTART), "--workdir", str(tmp_path / "work"), "--steps", "600",
             "--storage", f"gs://{bucket}/jobs"),
        env=gcs.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        end = time.monotonic() + 1500
        while (kill_at := checkpoint_step(gcs, bucket, prefix)) is None:
            if runner.poll() is not None:
                pytest.fail(f"runner exited {runner.returncode} before the first checkpoint:\n{runner.communicate()}")
            assert time.monotonic() < end, "no checkpoint on gs:// in time"
            time.sleep(0.5)
        os.kill(children_by_task(runner.pid)["ps-0"], signal.SIGKILL)
        out, err = runner.communicate(timeout=2400)
    finally:
        runner.kill()
    assert runner.returncode == 0, out + err
    assert "restarting the job from the latest checkpoint (1/3)" in out, out
    resumed = [int(ln.rsplit(" ", 1)[1]) for ln in out.splitlines() if "resumed from checkpoint step" in ln]
    assert resumed and resumed[0] >= kill_at > 0, out
    assert checkpoint_step(gcs, bucket, prefix) == 600
    # nothing of the job's files on the local disk: only logs
    local = tmp_path / "work" / "default" / "quickstart"
    assert sorted(p.name for p in local.iterdir()) == ["logs"]
    assert (local / "logs" / "chief-0.log").read_text().count("===== tfps run: ") == 2
    # TensorBoard events went to gs:// too
    assert any("/tensorboard/chief/events.out.tfevents." in n for n in gcs.objects(bucket, f"{prefix}/tensorboard/"))

    exports = gcs.objects(bucket, f"{prefix}/exports/")
    assert not any(n.startswith(f"{prefix}/exports/7/") for n in exports), "the torn prefix was not cleaned"
    assert gcs.get(bucket, f"{prefix}/exports/LATEST").decode().strip() == "600"
    manifest = json.loads(gcs.get(bucket, f"{prefix}/exports/600/manifest.json"))
    assert manifest.get("complete", True) is True
    assert {a["format"] for a in manifest["artifacts"]} == {"savedmodel", "tflite", "onnx"}
    for a in manifest["artifacts"]:
        base = f"{prefix}/exports/600/{a['path']}"
        if "files" in a:  # a directory artifact (SavedModel): each file's checksum
            for f in a["files"]:
                assert hashlib.sha256(gcs.get(bucket, f"{base}/{f['path']}")).hexdigest() == f["sha256"], f["path"]
        else:
            assert hashlib.sha256(gcs.get(bucket, base)).hexdigest() == a["sha256"], a["path"]
    assert f"gs://{bucket}/{prefix}/exports/600" in out


def _run_refused(gcs: GcsEmulator, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        tfps("run", str(QUICKSTART), "--workdir", str(tmp_path / "work"), "--steps", "10", *args),
        env=env or gcs.env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    took = time.monotonic() - t0
    assert proc.returncode != 0, proc.stdout
    assert not (tmp_path / "work" / "default" / "quickstart" / "logs" / "chief-0.log").exists(), "a trainer started"
    return f"{proc.returncode}\n{proc.stderr}", took


def test_a_uri_without_a_bucket_is_refused_naming_the_field(gcs: GcsEmulator, tmp_path: Path) -> None:
    err, _ = _run_refused(gcs, tmp_path, "--storage", "gs://")
    assert err.startswith("2\n") and "spec.storage.uri: must be gs://<bucket>[/<prefix>]" in err, err


def test_a_claim_and_a_uri_together_are_refused(gcs: GcsEmulator, tmp_path: Path) -> None:
    doc = QUICKSTART.read_text().replace(
        "    volumeClaimTemplate:", "    uri: gs://some-bucket/jobs\n    volumeClaimTemplate:"
    )
    job = tmp_path / "both.yaml"
    job.write_text(doc)
    proc = subprocess.run(tfps("validate", str(job)), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "spec.storage: set exactly one of claimName, volumeClaimTemplate, uri" in proc.stdout + proc.stderr


def test_a_missing_bucket_fails_fast_before_training_naming_it(gcs: GcsEmulator, tmp_path: Path) -> None:
    err, took = _run_refused(gcs, tmp_path, "--storage", "gs://no-such-bucket-tfps/jobs")
    assert err.startswith("2\n"), err
    assert "spec.storage.uri: bucket 'no-such-bucket-tfps' (gs://no-such-bucket-tfps/jobs/default/quickstart) " \
        "does not exist" in err, err  # fmt: skip
    print(f"missing bucket refused in {took:.1f}s")


def test_an_unreachable_endpoint_fails_fast_naming_the_bucket(gcs: GcsEmulator, bucket: str, tmp_path: Path) -> None:
    env = gcs.env()
    env["HTTPS_PROXY"] = f"http://127.0.0.1:{_closed_port()}"  # nothing listens: every request is refused
    err, took = _run_refused(gcs, tmp_path, "--storage", f"gs://{bucket}/jobs", env=env)
    assert err.startswith("1\n"), err
    assert f"spec.storage.uri: bucket {bucket!r}" in err, err
    assert "Could not connect" in err, err  # the reason, after TensorFlow's bounded retries (not ~195 s of them)
    print(f"unreachable endpoint refused in {took:.1f}s")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
