"""ps and worker tasks: a gRPC ``tf.distribute.Server`` that serves until SIGTERM/SIGINT."""

from __future__ import annotations

import signal
import threading

from .cluster import TaskConfig


def run(task: TaskConfig) -> int:
    import tensorflow as tf

    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    tf.distribute.Server(
        tf.train.ClusterSpec(task.cluster),
        job_name=task.task_type,
        task_index=task.task_index,
        protocol="grpc",
        start=True,
    )
    print(f"tfps-trainer {task.name}: serving on {task.address}", flush=True)
    while not stop.wait(1.0):  # a Python-level wait so the signal handler runs
        pass
    print(f"tfps-trainer {task.name}: stopping", flush=True)
    return 0
