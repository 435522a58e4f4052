"""Failures during real PS training: a lost worker, a lost PS, a NaN loss."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from trainer_cluster import LocalCluster, checkpoint_steps, checkpoint_tensors, make_settings, stored_step

from tfps_trainer import logfilter
from tfps_trainer.logfilter import shape
from tfps_wire import exitcodes
from tfps_wire.job_settings import CheckpointSettings

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]
np = pytest.importorskip("numpy")  # comes with the trainer extra; without it the module is skipped

STEPS = 1500


@pytest.mark.parametrize("restart", [True, False], ids=["worker-restarted", "worker-not-restarted"])
def test_killed_worker_training_still_reaches_target(tmp_path: Path, restart: bool) -> None:
    settings = make_settings(tmp_path / "job", steps=STEPS, checkpoint=CheckpointSettings(every_steps=500))
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_all()
        cluster.wait_for_step(200)
        cluster.kill("worker", 1)
        killed_at = cluster.status()["step"]
        assert killed_at < STEPS, "the run finished before the worker was killed; raise STEPS"
        if restart:
            time.sleep(2)
            cluster.start("worker", 1)  # as the operator / `tfps run` would
        assert cluster.wait(timeout=240) == 0, cluster.tail()
    assert checkpoint_steps(settings.paths.checkpoints)[-1] == STEPS
    assert stored_step(f"{settings.paths.checkpoints}/ckpt-{STEPS}") == STEPS


def test_killed_worker_mid_closure_reruns_it_and_the_final_step_stays_exact(tmp_path: Path) -> None:
    """50 steps per closure, worker killed mid-training: its closure is re-run on the other worker
    (up to 50 updates applied twice, documented), the step the chief counts and saves stays exact.
    Neither the target nor the checkpoint interval is a multiple of 50."""
    steps = 2990
    settings = make_settings(
        tmp_path / "job", steps=steps, steps_per_closure=50, checkpoint=CheckpointSettings(every_steps=730)
    )
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_all()
        cluster.wait_for_step(400)
        cluster.kill("worker", 0)
        assert cluster.status()["step"] < steps, "the run finished before the worker was killed; raise steps"
        assert cluster.wait(timeout=240) == 0, cluster.tail()
    assert checkpoint_steps(settings.paths.checkpoints)[-2:] == [2920, steps]
    assert stored_step(f"{settings.paths.checkpoints}/ckpt-{steps}") == steps
    assert f"completed step {steps}/{steps}" in cluster.termination_log("chief", 0).read_text()
    # The optimizer's own step counter (learning-rate schedules, Adam's bias correction) counted the re-run
    # steps again; the chief set it back to the global step before each checkpoint.
    saved = checkpoint_tensors(f"{settings.paths.checkpoints}/ckpt-{steps}")
    assert int(saved["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"]) == steps


def test_killed_ps_stops_the_chief_with_a_clear_reason(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "job", steps=100_000, checkpoint=CheckpointSettings(every_steps=100))
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_all()
        cluster.wait_for_step(250)
        cluster.kill("ps", 1)
        code = cluster.wait(timeout=120)
        log = cluster.log("chief", 0).read_text()
    assert code == exitcodes.LOST_CLUSTER, log[-3000:]
    last_line = log.strip().splitlines()[-1]
    assert last_line.startswith("tfps-trainer chief/0: lost parameter server ps/1"), last_line
    assert "restart the job to resume" in last_line and "latest checkpoint is step" in last_line
    assert cluster.termination_log("chief", 0).read_text().strip() == last_line
    latest = checkpoint_steps(settings.paths.checkpoints)[-1]
    assert latest >= 200 and f"latest checkpoint is step {latest} " in last_line


def test_nan_loss_with_check_numerics_fails_without_checkpointing_the_bad_state(tmp_path: Path) -> None:
    nan_at = 150  # per-worker batch index from which labels are NaN
    settings = make_settings(
        tmp_path / "job",
        steps=5000,
        check_numerics=True,
        checkpoint=CheckpointSettings(every_steps=25, keep=1000),
        model_args={"nan_at_batch": nan_at},
    )
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_all()
        code = cluster.wait(timeout=180)
        log = cluster.log("chief", 0).read_text()
    assert code == exitcodes.NUMERICS, log[-3000:]
    last_line = log.strip().splitlines()[-1]
    assert "non-finite loss (NaN or Inf)" in last_line and "without checkpointing the bad state" in last_line
    assert cluster.termination_log("chief", 0).read_text().strip() == last_line
    steps = checkpoint_steps(settings.paths.checkpoints)
    # Training ran up to the NaN: 2 workers consumed nan_at batches each, at most 2*nan_at steps.
    assert steps and nan_at - 25 <= steps[-1] <= 2 * nan_at, steps
    for step in steps:  # every checkpoint that exists holds finite weights
        for name, value in checkpoint_tensors(f"{settings.paths.checkpoints}/ckpt-{step}").items():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert np.isfinite(value).all(), f"ckpt-{step}: {name} is not finite"


def test_unreachable_ps_at_startup_is_a_clear_failure(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "job", steps=50)
    with LocalCluster(tmp_path / "procs", settings, extra_env={"TFPS_STARTUP_TIMEOUT": "2"}) as cluster:
        cluster.start("chief", 0)  # no ps / worker processes at all
        code = cluster.wait(timeout=120)
        last_line = cluster.log("chief", 0).read_text().strip().splitlines()[-1]
    assert code == exitcodes.LOST_CLUSTER
    assert last_line.startswith("tfps-trainer chief/0: parameter server(s) ps/0 (127.0.0.1:"), last_line
    assert "ps/1" in last_line and "not reachable after 2s" in last_line
    assert checkpoint_steps(settings.paths.checkpoints) == []


def test_checkpoint_of_a_different_model_is_a_contract_error(tmp_path: Path) -> None:
    first = make_settings(tmp_path / "job", steps=30, model_args={"features": 8})
    with LocalCluster(tmp_path / "run1", first) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
    changed = first.model_copy(update={"steps": 60, "model_args": {"features": 4}})  # same storage
    with LocalCluster(tmp_path / "run2", changed) as cluster:
        cluster.start_all()
        code = cluster.wait()
        last_line = cluster.log("chief", 0).read_text().strip().splitlines()[-1]
    assert code == exitcodes.CONTRACT, last_line
    assert "ckpt-30 does not match the model built by 'tfps_trainer.examples.linear'" in last_line
    assert checkpoint_steps(changed.paths.checkpoints) == [30]


def test_sigterm_on_the_chief_saves_the_scheduled_steps_and_the_next_run_resumes_there(tmp_path: Path) -> None:
    """Preemption: SIGTERM mid-training (no checkpoint due for a long while). The chief finishes the
    steps it scheduled, saves them, exits with the preempted code; the next run resumes at that step."""

    settings = make_settings(tmp_path / "job", steps=1_000_000, checkpoint=CheckpointSettings(every_steps=500_000))
    with LocalCluster(tmp_path / "run1", settings) as cluster:
        cluster.start_all()
        cluster.wait_for_step(300)
        reported = cluster.status()["step"]
        signalled = time.monotonic()
        cluster.procs[("chief", 0)].send_signal(signal.SIGTERM)
        code = cluster.wait(timeout=60)
        stop_seconds = time.monotonic() - signalled
        reason = cluster.termination_log("chief", 0).read_text().strip().splitlines()[-1]
    assert code == exitcodes.PREEMPTED, cluster.tail()
    saved = checkpoint_steps(settings.paths.checkpoints)
    assert len(saved) == 1 and saved[0] >= reported, (saved, reported)
    assert stored_step(f"{settings.paths.checkpoints}/ckpt-{saved[0]}") == saved[0]
    assert f"preempted (SIGTERM) at step {saved[0]}" in reason and f"checkpoint step {saved[0]} saved" in reason
    print(
        f"preemption: progress reported step {reported}, saved step {saved[0]} "
        f"({saved[0] - reported} scheduled after the last report), chief stopped {stop_seconds:.1f}s after SIGTERM"
    )

    resumed = settings.model_copy(update={"steps": saved[0] + 100})
    with LocalCluster(tmp_path / "run2", resumed) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
        log = cluster.log("chief", 0).read_text()
    assert f"resumed from checkpoint step {saved[0]}" in log
    assert checkpoint_steps(settings.paths.checkpoints)[-1] == saved[0] + 100


def test_a_preprocessing_layer_built_outside_the_scope_ends_with_a_hint_and_a_readable_log(tmp_path: Path) -> None:
    """The PS tutorial's pattern at module level: the layer's lookup table lives on the chief, the workers'
    dataset cannot reach it ("unknown device", by the thousand). The run ends with the cause named."""
    import os

    models = Path(__file__).parent / "models"
    settings = make_settings(tmp_path / "job", steps=2000, model_module="outside_scope_model")
    env = {"PYTHONPATH": f"{models}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with LocalCluster(tmp_path / "procs", settings, extra_env=env) as cluster:
        cluster.start_all()
        code = cluster.wait(timeout=240)
        log = cluster.log("chief", 0).read_text(errors="replace")
    lines = log.splitlines()
    assert code == exitcodes.CONTRACT, log[-3000:]  # whether the flood or the error in the main thread came first
    assert "hint: a resource used by the training step" in lines[-1] and "strategy.scope()" in lines[-1], lines[-1]
    assert "training cannot proceed" in lines[-1], lines[-1]
    device_lines = [ln for ln in lines if "unknown device" in ln and not ln.startswith("[tfps]")]
    print(
        f"outside scope: exit {code}, chief log {len(lines)} lines, {len(device_lines)} 'unknown device' lines kept; "
        f"last: {lines[-1][:300]}"
    )
    # The bound follows from the limiter's counts, not from how long the flood lasted: no line in full more
    # than BURST times, and per line one summary at each power of ten of its count and one at the end.
    full = Counter(shape(ln) for ln in lines[:-1] if not ln.startswith("[tfps]"))
    assert max(full.values()) <= logfilter.BURST, full.most_common(3)
    summaries = Counter(shape(ln.split(": ", 1)[1]) for ln in lines if ln.startswith("[tfps]"))
    for key, n in summaries.items():
        held = max(int(ln.split()[1]) for ln in lines if ln.startswith("[tfps]") and shape(ln.split(": ", 1)[1]) == key)
        assert full[key] == logfilter.BURST and n <= logfilter.most_lines(held + logfilter.BURST) - logfilter.BURST
