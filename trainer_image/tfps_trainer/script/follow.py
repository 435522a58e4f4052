"""Following the checkpoints a script-mode program writes, for ``status.checkpoint`` and ``Stalled``.

The program's ``tf.train.CheckpointManager`` / ``tf.train.Checkpoint.save`` replaces the ``checkpoint``
state file in its directory once a checkpoint's shards are complete; its ``model_checkpoint_path``
names the latest one. The step is read from the checkpoint's variables (:func:`step_key`), never from
its file name. TensorFlow is imported on the first checkpoint only.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ..status_server import CheckpointInfo

STATE_FILE = "checkpoint"
_LATEST = re.compile(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"\s*$', re.M)
_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
STEP_NAMES = ("step", "global_step")
"""Variables that hold the global step, in order of preference (at the top level or under any object)."""
ITERATION_NAMES = ("iter", "_iterations", "iterations")
"""An optimizer's update counter (tf_keras: ``iter``, Keras 3: ``_iterations``): the step when no step
variable exists."""


def latest_prefix(directory: str) -> str | None:
    """The checkpoint prefix the state file names as latest (absolute), if its ``.index`` exists."""
    try:
        text = Path(directory, STATE_FILE).read_text(errors="replace")
    except OSError:
        return None
    m = _LATEST.search(text)
    if not m:
        return None
    name = m.group(1).encode().decode("unicode_escape")
    path = name if os.path.isabs(name) else os.path.join(directory, name)
    if not os.path.exists(path + ".index"):
        # a state file copied from another mount point: the same name in this directory
        path = os.path.join(directory, os.path.basename(name))
    return path if os.path.exists(path + ".index") else None


def step_key(keys: list[str]) -> str | None:
    """The checkpoint key holding the global step: a ``step``/``global_step`` variable (shallowest
    first), else an optimizer's ``iter``/``iterations``; None when there is neither."""

    def name_of(key: str) -> tuple[str, int]:
        core = key[: -len(_SUFFIX)] if key.endswith(_SUFFIX) else key
        parts = core.split("/")
        return parts[-1], len(parts)

    for names in (STEP_NAMES, ITERATION_NAMES):
        found = [(depth, names.index(n), k) for k in keys for n, depth in [name_of(k)] if n in names]
        if found:
            return min(found)[2]
    return None


def checkpoint_step(prefix: str) -> tuple[int, str] | None:
    """(step, key) read from the checkpoint at ``prefix``; None when it holds no step variable."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    key = step_key([k for k, d in dtypes.items() if d.is_integer and reader.get_variable_to_shape_map()[k] == []])
    if key is None:
        return None
    return int(reader.get_tensor(key)), key


class CheckpointFollower:
    """Reports each new latest checkpoint of a directory once."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.last_prefix: str | None = None
        self._last_seen: tuple[str, int] | None = None
        """(prefix, its index file's mtime in ns) of the last checkpoint read: a program that saves
        under one name every time (Keras' ``ModelCheckpoint`` with a fixed filepath) replaces it in place."""
        self.latest: CheckpointInfo | None = None
        self.notes: list[str] = []
        self._unreadable: set[str] = set()

    def poll(self) -> CheckpointInfo | None:
        """The latest checkpoint if it is new since the last call (None otherwise)."""
        prefix = latest_prefix(self.directory)
        if prefix is None:
            return None
        try:
            seen = (prefix, os.stat(prefix + ".index").st_mtime_ns)
        except OSError:
            return None
        if seen == self._last_seen:
            return None
        try:
            found = checkpoint_step(prefix)
        except Exception as exc:
            if os.path.exists(prefix + ".index") and prefix not in self._unreadable:
                self._unreadable.add(prefix)
                self.notes.append(
                    f"cannot read checkpoint {prefix}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                )
            return None  # tried again on the next poll: the state file may name a newer one by then
        previous, self.last_prefix, self._last_seen = self.last_prefix, prefix, seen
        if found is None:
            if previous == prefix:  # said once per name
                return None
            self.notes.append(
                f"checkpoint {prefix} has no step variable ({', '.join(STEP_NAMES + ITERATION_NAMES)}); "
                "its step is unknown: checkpoint a tf.Variable named step, or the optimizer"
            )
            return None
        when = datetime.fromtimestamp(seen[1] / 1e9, UTC).isoformat(timespec="seconds")
        self.latest = CheckpointInfo(step=found[0], path=prefix, time=when)
        return self.latest
