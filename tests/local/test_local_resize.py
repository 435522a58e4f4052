"""Resizing a running ParameterServer job with real TensorFlow processes (``tfps run --resize``, which
takes the operator's rules: :meth:`TrainingStrategy.resize_method`, :func:`reconcile.resize.in_effect`).

One run is resized 2 → 4 workers (the chief stops and saves; every process restarts at 4 from that
checkpoint), 4 → 1 (the highest-index workers leave live; the chief trains on) and then to 2 parameter
servers (a restart: the partitioned variables' checkpoint restores onto a different PS count). The
run reaches its target step, every restart resumes from exactly the step the chief saved when it was
stopped, and the model it exports is verified.
"""

from __future__ import annotations

import re

import pytest
import yaml

from support.local_procs import tfps_run

pytestmark = [pytest.mark.tf, pytest.mark.timeout(900)]  # two restarts of every TF process: ~1 min each when loaded

STEPS = 3000
JOB = {
    "apiVersion": "tfps.dev/v1alpha1",
    "kind": "PSTrainingJob",
    "metadata": {"name": "elastic"},
    "spec": {
        "model": {
            "module": "tfps_trainer.examples.linear",
            "args": {"features": 64, "hidden": 256, "learning_rate": 0.002},
        },
        "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 2, "minReplicas": 1, "maxReplicas": 4}},
        "training": {
            "steps": STEPS,
            "batchSize": 32,
            "checkpoint": {"everySteps": 500, "keep": 10},
            "variablePartitioner": {"minShardBytes": 16384, "maxShards": 2},
        },
        "export": {"formats": ["savedmodel", "onnx"]},
    },
}


def test_a_job_resized_2_to_4_to_1_workers_and_to_2_ps_trains_on_with_a_continuous_step_count(tmp_path):
    job = tmp_path / "elastic.yaml"
    job.write_text(yaml.safe_dump(JOB))
    work = tmp_path / "work"
    proc = tfps_run(job, work, "--resize", "600=4", "--resize", "1500=1", "--resize", "2200=1:2", timeout=840)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    resized = re.findall(r"resized \((Live|Restart)\): workers (\d) → (\d), ps (\d) → (\d)", out)
    assert resized == [("Restart", "2", "4", "1", "1"), ("Live", "4", "1", "1", "1"), ("Restart", "1", "1", "1", "2")]

    chief_log = (work / "default" / "elastic" / "logs" / "chief-0.log").read_text(errors="replace")
    saved_on_stop = [
        int(s) for s in re.findall(r"preempted \(SIGTERM\) at step (\d+) .*?: checkpoint step \1 saved", chief_log)
    ]
    resumed = [int(s) for s in re.findall(r"resumed from checkpoint step (\d+)", chief_log)]
    # two restarts, each resuming from exactly what the stopped chief saved: no step lost or repeated
    assert len(saved_on_stop) == 2 and resumed == saved_on_stop, (saved_on_stop, resumed)
    assert 600 <= saved_on_stop[0] < 1500 and 2200 <= saved_on_stop[1] < STEPS
    assert f"completed step {STEPS}/{STEPS}" in chief_log
    # the variables' two shards lived on the one parameter server, and after the last restart on both
    placed = re.findall(r"partitioned: hidden/kernel \[[^]]*\] .*? -> 2 shards \[[^]]*\] rows on (\S+)", chief_log)
    assert placed == ["ps/0,ps/0", "ps/0,ps/0", "ps/0,ps/1"], placed
    assert f"exported step {STEPS}" in out and "verified" in out
