"""Real checkpoints for export tests: train a contract module a few steps in-process and save with
the trainer's layout, ``tf.train.Checkpoint(model=, optimizer=, step=)`` + ``CheckpointManager``
(``checkpoint_name="ckpt"``, numbered by step)."""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

from tfps_trainer.contract import load


def train_and_checkpoint(
    root: Path,
    module: str,
    args: dict,
    steps: int = 30,
    batch_size: int = 32,
    checkpoint_every: int | None = None,
    seed: int | None = None,
) -> int:
    """Train ``steps`` more steps (resuming from the latest checkpoint); save at the end (and every
    ``checkpoint_every``); return the last step. ``seed``: the same initial weights on every run."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    contract = load(module)
    model = contract.build_model(args)
    opt = contract.optimizer(args)
    step = tf.Variable(0, dtype=tf.int64, name="step")
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt, step=step)
    manager = tf.train.CheckpointManager(ckpt, str(root / "checkpoints"), max_to_keep=3, checkpoint_name="ckpt")
    if manager.latest_checkpoint:  # resume like the trainer does: the next checkpoint continues the step count
        ckpt.restore(manager.latest_checkpoint)
    it = iter(contract.dataset(None, batch_size, args))
    for _ in range(steps):
        features, labels = next(it)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(contract.loss(labels, model(features, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        step.assign_add(1)
        if checkpoint_every and int(step) % checkpoint_every == 0:
            manager.save(checkpoint_number=int(step))
    if manager.latest_checkpoint != str(root / "checkpoints" / f"ckpt-{int(step)}"):
        manager.save(checkpoint_number=int(step))
    return int(step)
