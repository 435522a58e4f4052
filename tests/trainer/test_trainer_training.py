"""Real multi-process PS training on loopback: 1 chief, 2 PS, 2 workers (+ evaluator)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from trainer_cluster import LocalCluster, checkpoint_steps, make_settings, scalar_events, stored_step

from tfps_wire.job_settings import CheckpointSettings

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]


def test_trains_checkpoints_on_schedule_and_evaluates(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "job", steps=300, checkpoint=CheckpointSettings(every_steps=100, keep=5))
    with LocalCluster(tmp_path / "procs", settings, evaluator=1) as cluster:
        cluster.start_all()
        snap = cluster.wait_for_step(1)
        assert snap["state"] == "running" and snap["target_steps"] == 300 and snap["role"] == "chief"
        metrics = cluster.metrics_text()
        assert metrics is not None and "tfps_target_steps" in metrics and 'state="running"' in metrics
        # A checkpoint is reported while training still runs. Which one the poll sees first depends
        # on the machine's speed (100 steps take about a second), so accept either scheduled step.
        snap = cluster.wait_for_status(lambda s: s.get("checkpoint") is not None, "a reported checkpoint")
        ckpt = snap["checkpoint"]
        assert snap["state"] == "running", snap
        assert ckpt["step"] in (100, 200) and ckpt["step"] <= snap["step"], snap
        assert ckpt["path"].endswith(f"ckpt-{ckpt['step']}") and ckpt["time"].endswith("+00:00"), snap
        assert cluster.wait() == 0, cluster.tail()
        assert cluster.wait("evaluator", timeout=120) == 0, cluster.tail("evaluator")

    ckpt_dir = settings.paths.checkpoints
    assert checkpoint_steps(ckpt_dir) == [100, 200, 300]
    for step in (100, 200, 300):
        assert stored_step(f"{ckpt_dir}/ckpt-{step}") == step
    assert "completed step 300/300" in cluster.termination_log("chief", 0).read_text()
    assert "evaluated final checkpoint step 300" in cluster.termination_log("evaluator", 0).read_text()

    losses = scalar_events(Path(settings.paths.tensorboard) / "chief", "loss")
    assert len(losses) >= 3 and max(losses) == 300
    first, last = losses[min(losses)], losses[max(losses)]
    assert last < first / 5, f"loss did not decrease: {first} -> {last}"
    assert scalar_events(Path(settings.paths.tensorboard) / "chief", "steps_per_second")
    eval_loss = scalar_events(Path(settings.paths.tensorboard) / "eval", "loss")
    assert 300 in eval_loss and eval_loss[300] < first


def test_restarting_the_cluster_resumes_from_the_latest_checkpoint(tmp_path: Path) -> None:
    first = make_settings(tmp_path / "job", steps=100, checkpoint=CheckpointSettings(every_steps=50))
    with LocalCluster(tmp_path / "run1", first) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
    assert checkpoint_steps(first.paths.checkpoints) == [50, 100]

    # Same job storage, more steps, a fresh cluster on new ports (as after a full restart).
    second = first.model_copy(update={"steps": 160})
    with LocalCluster(tmp_path / "run2", second) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
        log = cluster.log("chief", 0).read_text()
    assert "resumed from checkpoint step 100" in log
    assert checkpoint_steps(second.paths.checkpoints)[-2:] == [150, 160]
    assert stored_step(f"{second.paths.checkpoints}/ckpt-160") == 160
    # The restarted chief's own event file starts after step 100 and ends at 160.
    run2 = scalar_events(Path(second.paths.tensorboard) / "chief", "loss", newest_file_only=True)
    assert min(run2) > 100 and max(run2) == 160


def test_legacy_tf_keras_model_trains(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "job",
        steps=200,
        model_module="tfps_trainer.examples.linear_tf_keras",
        checkpoint=CheckpointSettings(every_steps=100),
    )
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
    assert checkpoint_steps(settings.paths.checkpoints) == [100, 200]
    losses = scalar_events(Path(settings.paths.tensorboard) / "chief", "loss")
    assert losses[max(losses)] < losses[min(losses)] / 5


def test_chief_started_before_its_servers_waits_for_them(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "job", steps=50)
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        chief = cluster.start("chief", 0)  # pods start in any order
        time.sleep(15)
        assert chief.poll() is None, cluster.tail()
        cluster.start_servers()
        assert cluster.wait() == 0, cluster.tail()
    assert checkpoint_steps(settings.paths.checkpoints) == [50]


@pytest.mark.parametrize("k", [1, 7], ids=["one-step-per-closure", "7-steps-per-closure"])
def test_checkpoint_boundaries_and_target_are_exact_whatever_the_steps_per_closure(tmp_path: Path, k: int) -> None:
    """Neither the target (230) nor the checkpoint interval (75) is a multiple of 7: shorter
    closures before each boundary keep every checkpoint and the final step exact."""
    settings = make_settings(
        tmp_path / "job", steps=230, steps_per_closure=k, checkpoint=CheckpointSettings(every_steps=75, keep=10)
    )
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
    ckpt_dir = settings.paths.checkpoints
    assert checkpoint_steps(ckpt_dir) == [75, 150, 225, 230]
    for step in (75, 150, 225, 230):
        assert stored_step(f"{ckpt_dir}/ckpt-{step}") == step
    assert "completed step 230/230" in cluster.termination_log("chief", 0).read_text()
    losses = scalar_events(Path(settings.paths.tensorboard) / "chief", "loss")
    assert max(losses) == 230 and losses[230] < losses[min(losses)] / 5


def test_a_learning_rate_schedule_sees_the_global_step_at_the_end_of_training(tmp_path: Path) -> None:
    """Keras 3 Adam under a schedule that records the step it is given (the optimizer's counter, which
    under PS training loses increments when workers race): at the last update it is within one closure
    (20 steps) of the target, and the counter needed no correction at any checkpoint."""
    import os

    from trainer_cluster import checkpoint_tensors

    models = Path(__file__).parent / "models"
    steps = 1200
    settings = make_settings(
        tmp_path / "job",
        steps=steps,
        steps_per_closure=20,
        model_module="step_probe_model",
        checkpoint=CheckpointSettings(every_steps=500),
    )
    env = {"PYTHONPATH": f"{models}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with LocalCluster(tmp_path / "procs", settings, extra_env=env) as cluster:
        cluster.start_all()
        assert cluster.wait() == 0, cluster.tail()
        log = cluster.log("chief", 0).read_text()
    tensors = checkpoint_tensors(f"{settings.paths.checkpoints}/ckpt-{steps}")
    (seen,) = [int(v) for k, v in tensors.items() if k.endswith("/seen/.ATTRIBUTES/VARIABLE_VALUE")]
    assert steps - 20 <= seen < steps, seen
    assert int(tensors["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"]) == steps
    assert "optimizer step" not in log, log[-2000:]
