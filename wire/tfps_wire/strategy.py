"""Which task leads a training cluster, for the operator and for the trainer alike.

The lead is the chief when the cluster has one, else worker 0: TensorFlow's own rule for the collective
strategies (MultiWorkerMirroredStrategy's worker 0 acts as chief when there is none: it writes the model and
the checkpoints others only mirror). The lead reports progress, and its success ends training under the default
success policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Any


def lead_task(cluster: Mapping[Any, int | Sized]) -> tuple[str, int]:
    """``(task_type, index)`` of the lead of ``cluster`` (role → replica count, or TF_CONFIG's address lists)."""

    def count(role: str) -> int:
        n = cluster.get(role, 0)
        return n if isinstance(n, int) else len(n)

    if count("chief") > 0:
        return "chief", 0
    if count("worker") > 0:
        return "worker", 0
    raise ValueError("the training cluster has neither a chief nor a worker")
