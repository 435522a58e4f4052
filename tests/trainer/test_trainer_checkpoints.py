"""Checkpointer restore: the newest intact checkpoint wins; missing ones are skipped (in-process TF)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]


def test_restore_skips_a_deleted_newest_checkpoint(tmp_path: Path) -> None:
    import tensorflow as tf

    from tfps_trainer.checkpoints import Checkpointer

    var = tf.Variable(0.0)
    step = tf.Variable(0, dtype=tf.int64)
    saver = Checkpointer(
        tf.train.Checkpoint(model=tf.Module(), optimizer=tf.Module(), step=step), str(tmp_path), keep=5
    )
    saver.checkpoint.model.v = var
    for n in (10, 20, 30):
        var.assign(float(n))
        step.assign(n)
        saver.save(n)
    for f in tmp_path.glob("ckpt-30.*"):
        f.unlink()  # deleted under the trainer; the state file still names it

    var2, step2 = tf.Variable(-1.0), tf.Variable(-1, dtype=tf.int64)
    loader = Checkpointer(
        tf.train.Checkpoint(model=tf.Module(), optimizer=tf.Module(), step=step2), str(tmp_path), keep=5
    )
    loader.checkpoint.model.v = var2
    assert loader.manager.latest_checkpoint.endswith("ckpt-30")
    assert loader.restore_latest() == str(tmp_path / "ckpt-20")
    assert float(var2.numpy()) == 20.0 and int(step2.numpy()) == 20

    for f in tmp_path.glob("ckpt-*"):
        f.unlink()
    empty = Checkpointer(tf.train.Checkpoint(step=tf.Variable(0, dtype=tf.int64)), str(tmp_path), keep=5)
    assert empty.restore_latest() is None


def test_a_failure_names_the_newest_complete_checkpoint_on_disk(tmp_path: Path) -> None:
    """A PS lost while a save finishes: the save's files are complete but the run never recorded it. The
    failure names what a restart resumes from, the newest complete checkpoint on disk."""
    from types import SimpleNamespace

    import tensorflow as tf

    from tfps_trainer.checkpoints import Checkpointer
    from tfps_trainer.chief import Trainer

    step = tf.Variable(0, dtype=tf.int64)
    saver = Checkpointer(tf.train.Checkpoint(step=step), str(tmp_path), keep=5)
    recorded = saver.save(200)
    step.assign(300)
    saver.save(300)  # written, never recorded by the run
    trainer = SimpleNamespace(last_checkpoint=recorded, checkpointer=saver)
    assert Trainer._resume_hint(trainer) == f"latest checkpoint is step 300 ({tmp_path}/ckpt-300)"  # type: ignore[arg-type]

    (tmp_path / "ckpt-300.index").unlink()  # incomplete: no index
    assert Trainer._resume_hint(trainer) == f"latest checkpoint is step 200 ({recorded.path})"  # type: ignore[arg-type]
    none = SimpleNamespace(
        last_checkpoint=None, checkpointer=Checkpointer(tf.train.Checkpoint(), str(tmp_path / "e"), 1)
    )
    assert Trainer._resume_hint(none) == "no checkpoint was written yet"  # type: ignore[arg-type]
