"""Checkpoints: model + optimizer state + global step under ``<root>/checkpoints``.

Layout (TensorFlow's): ``ckpt-<step>.index`` / ``ckpt-<step>.data-*`` plus the ``checkpoint`` state
file, written atomically by ``tf.train.CheckpointManager`` (the state file is replaced only after
the shards are complete). Every file operation goes through ``tf.io.gfile``, so ``<root>`` may be a
directory or a ``gs://`` URI (there a "rename" is a copy then a delete, object by object: the state
file still names only complete checkpoints, and a torn one is skipped on restore). Keys: ``model``,
``optimizer``, ``step``; the exporter and the evaluator restore ``model`` (and ``step``) only, with
``expect_partial``. With sharded variables ``optimizer`` is saved in a layout that restores into any
shard count (:mod:`.optimizer_state`); a checkpoint of the earlier layout still restores (same shards).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import tensorflow as tf

from tfps_wire.job_settings import CheckpointSettings

from . import optimizer_state
from .status_server import CheckpointInfo

CHECKPOINT_NAME = "ckpt"


@dataclass(frozen=True)
class Layouts:
    """What a checkpoint saves (``current``), and what restores one of the earlier optimizer layout."""

    current: tf.train.Checkpoint
    earlier: tf.train.Checkpoint | None = None

    def for_path(self, path: str) -> tf.train.Checkpoint:
        if self.earlier is None or optimizer_state.saved_layout(path) == "by_model_variable":
            return self.current
        return self.earlier


def make_checkpoint(model: Any, optimizer: Any, step: tf.Variable) -> Layouts:
    by_variable = optimizer_state.state(optimizer, model.trainable_variables)
    plain = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    if by_variable is None:
        return Layouts(plain)
    return Layouts(tf.train.Checkpoint(model=model, optimizer=by_variable, step=step), earlier=plain)


def step_of(path: str) -> int:
    """The step encoded in a checkpoint prefix ``.../ckpt-<step>``."""
    return int(path.rsplit("-", 1)[1])


def info_for(path: str) -> CheckpointInfo:
    """Step, path and write time (ISO 8601, UTC) of an existing checkpoint prefix."""
    mtime = tf.io.gfile.stat(path + ".index").mtime_nsec / 1e9
    when = datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds")
    return CheckpointInfo(step=step_of(path), path=path, time=when)


def _numbered(path: str) -> bool:
    return path.rsplit("-", 1)[-1].isdigit()


def latest(directory: str) -> str | None:
    """The latest complete checkpoint prefix in ``directory`` (None when there is none)."""
    return tf.train.latest_checkpoint(directory, latest_filename=None) if tf.io.gfile.isdir(directory) else None


@dataclass
class Policy:
    """When to save: every N steps and/or every S seconds (either suffices); always at the end."""

    every_steps: int | None
    every_seconds: float | None
    last_step: int
    last_time: float

    @classmethod
    def from_settings(cls, s: CheckpointSettings, start_step: int) -> Policy:
        return cls(s.every_steps, s.every_seconds, start_step, time.monotonic())

    def next_step_boundary(self, step: int) -> int | None:
        """The next step at which a step-based save is due (None: no step policy)."""
        if self.every_steps is None:
            return None
        return (step // self.every_steps + 1) * self.every_steps

    def due(self, step: int, now: float | None = None) -> bool:
        if step <= self.last_step:
            return False
        if self.every_steps is not None and step // self.every_steps > self.last_step // self.every_steps:
            return True
        now = time.monotonic() if now is None else now
        return self.every_seconds is not None and now - self.last_time >= self.every_seconds

    def saved(self, step: int, now: float | None = None) -> None:
        self.last_step = step
        self.last_time = time.monotonic() if now is None else now


class Checkpointer:
    """A ``CheckpointManager`` that numbers checkpoints by global step.

    ``io_device`` (a device name such as ``/job:chief/replica:0/task:0/device:CPU:0``) runs every file
    operation there: TensorFlow otherwise writes each variable's shard on the task holding the variable,
    i.e. on the parameter servers."""

    def __init__(
        self, checkpoint: tf.train.Checkpoint | Layouts, directory: str, keep: int, io_device: str | None = None
    ) -> None:
        self.layouts = checkpoint if isinstance(checkpoint, Layouts) else Layouts(checkpoint)
        checkpoint = self.layouts.current
        self.checkpoint = checkpoint
        self.manager = tf.train.CheckpointManager(
            checkpoint, directory=directory, max_to_keep=keep, checkpoint_name=CHECKPOINT_NAME
        )
        self.options = tf.train.CheckpointOptions(experimental_io_device=io_device)

    def candidates(self) -> list[str]:
        """Checkpoint prefixes to resume from, newest first: those in the state file and on disk
        (``.index`` present), so a checkpoint deleted or never completed is skipped."""
        directory = self.manager.directory
        listed = set(self.manager.checkpoints)
        pattern = f"{directory.rstrip('/')}/{CHECKPOINT_NAME}-*.index"
        on_disk = {p[: -len(".index")] for p in tf.io.gfile.glob(pattern)} if tf.io.gfile.isdir(directory) else set()
        found = [p for p in listed | on_disk if _numbered(p) and tf.io.gfile.exists(p + ".index")]
        return sorted(found, key=step_of, reverse=True)

    def restore_latest(self) -> str | None:
        """Restore the newest intact checkpoint, if any; return its path.

        A newest checkpoint that is missing or unreadable (deleted under the trainer, a torn copy)
        is skipped with a note on stdout, falling back to the next newest.
        """
        for path in self.candidates():
            try:
                layout = self.layouts.for_path(path)
                layout.restore(path, options=self.options).assert_existing_objects_matched()
            except (tf.errors.NotFoundError, tf.errors.DataLossError) as exc:
                print(f"tfps-trainer: skipping unreadable checkpoint {path}: {type(exc).__name__}", flush=True)
                continue
            return path
        listed = self.manager.latest_checkpoint
        if listed:
            print(f"tfps-trainer: the newest listed checkpoint {listed} is missing; starting from step 0", flush=True)
        return None

    def save(self, step: int) -> CheckpointInfo:
        path = self.manager.save(checkpoint_number=step, options=self.options)
        return info_for(path)
