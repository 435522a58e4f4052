"""What the visitation tests of the tf.data service share (docs/data-service.md): the job of
``tests/local/scripts/visits_contract.py`` (each element carries its id; the model counts, in a checkpointed
variable, the ids of the elements it took a step on), reading that count from a checkpoint, and following a
``tfps run`` of it from its chief's log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.local_procs import children_by_task

CONTRACT = Path(__file__).parents[1] / "local" / "scripts" / "visits_contract.py"


def visits_job(*, ids: int, steps: int, batch: int, every: int, mode: str = "Dynamic") -> dict[str, Any]:
    """The visits job: 1 PS, 2 training workers, a dispatcher and 2 data workers; every checkpoint kept."""
    return {
        "apiVersion": "tfps.dev/v1beta1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "visits"},
        "spec": {
            "model": {"module": "visits_contract", "args": {"ids": ids}},
            "replicas": {
                "ps": {"replicas": 1},
                "worker": {"replicas": 2},
                "dispatcher": {"replicas": 1},
                "dataWorker": {"replicas": 2},
            },
            "training": {
                "steps": steps,
                "batchSize": batch,
                "stepsPerClosure": 5,
                "checkpoint": {"everySteps": every, "keep": 100},
                "dataService": {"processingMode": mode},
            },
            "export": {"enabled": False},
        },
    }


def visits(checkpoint: Path | str) -> np.ndarray:
    """``visits[id]``: how many elements with that id the checkpoint's steps trained on."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(checkpoint))
    (key,) = [k for k in reader.get_variable_to_shape_map() if "visits" in k]
    return reader.get_tensor(key)


def checkpoint_steps(log: Path) -> list[int]:
    """The steps the chief's log says it checkpointed, in order."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [int(s) for s in re.findall(r"checkpoint step (\d+) ->", text)]


def wait_for(what: str, condition: Callable[[], bool], proc: subprocess.Popen, timeout: float = 300) -> None:
    """Poll ``condition`` until it holds; fail if ``tfps run`` ends first or ``timeout`` passes. Each wait
    may span a restart of TensorFlow processes (about a minute each on a loaded 2-core machine) and a few
    hundred steps: the timeout is a safety net several times that."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"tfps run ended while waiting for {what}:\n{(out + err)[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def wait_for_checkpoints(what: str, log: Path, after: int, count: int, proc: subprocess.Popen) -> None:
    """Wait until the chief's log names ``count`` checkpoints past step ``after``."""
    wait_for(what, lambda: len([s for s in checkpoint_steps(log) if s > after]) >= count, proc)


def kill(runner: int, task: str, sig: int = signal.SIGKILL) -> None:
    """Signal one of ``tfps run``'s trainer processes (``dataworker-1``, ``chief-0``...)."""
    os.kill(children_by_task(runner)[task], sig)
