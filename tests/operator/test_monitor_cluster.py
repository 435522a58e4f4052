"""Checkpoint monitoring against the real control plane: the trainer's own progress server stands in
for the chief on the chief pod's kwok-assigned loopback IP; the operator pulls it into the job status,
marks the job Stalled when checkpoints stop, and clears it when they resume.

All traffic stays on 127.0.0.0/8: kwok pod IPs are 127.1.N.M (hack/README.md).
"""

from __future__ import annotations

import ipaddress
import sys
import time

import pytest
from operator_harness import free_port, job_body

from tfps_trainer.status_server import CheckpointInfo, Progress, ProgressServer, now_iso

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

MONITOR_SECONDS = 1
STALL_SECONDS = 6


def checkpoint_step(kube, name):
    return (kube.status(name).get("checkpoint") or {}).get("step")


def test_checkpoint_follows_the_chief_and_stalled_comes_and_goes(kube, start_operator, kubectl):
    port = free_port()
    op = start_operator(
        kube.ns, extra_env={"TFPS_MONITOR_SECONDS": str(MONITOR_SECONDS), "TFPS_PROGRESS_PORT": str(port)}
    )
    name = "mon"
    kube.create_job(
        job_body(name, ps=1, workers=1, training={"steps": 1000}, run_policy={"stallSeconds": STALL_SECONDS})
    )
    pods = kube.wait_pods_running(name, ["mon-chief-0", "mon-ps-0", "mon-worker-0"], timeout=60)
    ip = pods["mon-chief-0"]["status"]["podIP"]
    assert ipaddress.ip_address(ip).is_loopback, f"chief pod IP {ip} is not loopback: refusing to listen there"
    kube.wait_phase(name, "Running", timeout=60)

    progress = Progress(role="chief", target_steps=1000, job=name)
    server = ProgressServer(progress, ip, port).start()
    try:
        # --- checkpoints reach status.checkpoint --------------------------------------------------
        latencies = []
        for step in (10, 20, 30, 40):
            progress.update(
                step=step + 2,
                loss=1.0 / step,
                steps_per_second=12.5,
                checkpoint=CheckpointInfo(step, f"/data/checkpoints/ckpt-{step}", now_iso()),
            )
            written = time.monotonic()
            kube.wait_until(
                lambda step=step: checkpoint_step(kube, name) == step,
                timeout=30,
                interval=0.05,
                what=f"status.checkpoint.step == {step}",
            )
            latencies.append(time.monotonic() - written)
            time.sleep(0.5)
        st = kube.status(name)
        assert st["checkpoint"]["path"] == "/data/checkpoints/ckpt-40"
        assert st["progress"]["step"] == 42 and st["progress"]["stepsPerSecond"] == 12.5
        assert st["progress"]["loss"] == pytest.approx(1 / 40)
        stalled = kube.condition(name, "Stalled")
        assert stalled is None or stalled["status"] == "False", stalled
        table = kubectl("get", "psjob", name, "-n", kube.ns).stdout
        header, row = table.splitlines()[:2]
        assert header.split()[:3] == ["NAME", "PHASE", "STEP"] and row.split()[:3] == [name, "Running", "40"], table
        sys.stderr.write(
            f"\ncheckpoint -> status.checkpoint latency (s, interval {MONITOR_SECONDS}s): "
            f"{', '.join(f'{x:.2f}' for x in latencies)}\n"
        )

        # --- no new checkpoint: Stalled (and a Warning event), by timer ------------------------------
        stopped_at = time.monotonic()
        cond = kube.wait_until(
            lambda: (c := kube.condition(name, "Stalled")) and c["status"] == "True" and c,
            timeout=STALL_SECONDS + 30,
            interval=0.2,
            what="Stalled=True",
        )
        sys.stderr.write(
            f"Stalled=True {time.monotonic() - stopped_at:.1f}s after the last checkpoint (bound {STALL_SECONDS}s)\n"
        )
        assert cond["reason"] == "NoNewCheckpoint" and "step 40" in cond["message"], cond
        kube.wait_until(lambda: "Stalled" in kube.event_reasons(name), timeout=15, interval=0.2, what="a Stalled event")
        # Nothing moves while stalled: the chief answers every second, yet the job is not rewritten.
        before = kube.job(name)["metadata"]["resourceVersion"]
        time.sleep(3 * MONITOR_SECONDS + 0.5)
        assert kube.job(name)["metadata"]["resourceVersion"] == before

        # --- checkpoints resume: Stalled False ------------------------------------------------------
        progress.update(step=52, checkpoint=CheckpointInfo(50, "/data/checkpoints/ckpt-50", now_iso()))
        cond = kube.wait_until(
            lambda: (c := kube.condition(name, "Stalled")) and c["status"] == "False" and c,
            timeout=30,
            interval=0.2,
            what="Stalled=False after a new checkpoint",
        )
        assert cond["reason"] == "CheckpointWritten"
        assert checkpoint_step(kube, name) == 50
        polls = op.metrics()
        assert (
            'tfps_progress_polls_total{result="ok"}' in polls
            and 'tfps_progress_polls_total{result="unchanged"}' in polls
        )

        # --- the job leaves Running: polling stops (the chief still answers), the checkpoint stays ----
        kube.finish_pod("mon-chief-0", "Succeeded", 0)
        kube.wait_phase(name, "Succeeded", timeout=30)
        # A poll already in flight (or queued before the operator wrote Succeeded) may still land, later on a
        # busy machine; after it none: the count stays put for three poll intervals, within a safety net.
        quiet_for = 3 * MONITOR_SECONDS + 0.5

        def no_poll_for_a_while() -> bool:
            before = poll_count(op)
            time.sleep(quiet_for)
            return poll_count(op) == before

        kube.wait_until(
            no_poll_for_a_while,
            timeout=30,
            interval=0,
            what=f"no progress poll for {quiet_for}s: the monitor still polls a job that is no longer Running",
        )
        assert checkpoint_step(kube, name) == 50
    finally:
        server.stop()


def poll_count(op) -> float:
    """All progress polls the operator made so far (every result)."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in op.metrics().splitlines()
        if line.startswith("tfps_progress_polls_total{")
    )


def test_unreachable_chief_is_counted_and_harmless_and_the_job_stalls_without_checkpoints(kube, start_operator):
    port = free_port()
    op = start_operator(
        kube.ns, extra_env={"TFPS_MONITOR_SECONDS": str(MONITOR_SECONDS), "TFPS_PROGRESS_PORT": str(port)}
    )
    name = "quiet"
    kube.create_job(job_body(name, ps=1, workers=1, run_policy={"stallSeconds": 3}))
    kube.wait_phase(name, "Running", timeout=60)
    cond = kube.wait_until(
        lambda: (c := kube.condition(name, "Stalled")) and c["status"] == "True" and c,
        timeout=40,
        interval=0.2,
        what="Stalled=True with no chief endpoint at all",
    )
    assert cond["reason"] == "NoNewCheckpoint" and "no checkpoint" in cond["message"]
    assert "checkpoint" not in kube.status(name)
    kube.wait_until(
        lambda: 'tfps_progress_polls_total{result="unreachable"}' in op.metrics(),
        timeout=15,
        interval=0.5,
        what="unreachable polls counted",
    )
    assert kube.status(name)["phase"] == "Running"
    assert op.proc.poll() is None
