"""Reading and checking TF_CONFIG (TF-free, so it fails fast before TensorFlow loads)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

TF_CONFIG_ENV = "TF_CONFIG"
STARTUP_TIMEOUT_ENV = "TFPS_STARTUP_TIMEOUT"
"""Seconds the chief waits for its parameter servers, the tf.data service's dispatcher and its first element, and
a data worker for the dispatcher to accept and register it (default 600)."""

ROLES = ("chief", "ps", "worker", "evaluator", "dispatcher", "dataworker")
DATA_SERVICE_ROLES = ("dispatcher", "dataworker")
"""The tf.data service's servers: never part of the training cluster."""


def startup_timeout() -> float:
    """:data:`STARTUP_TIMEOUT_ENV`, in seconds."""
    return float(os.environ.get(STARTUP_TIMEOUT_ENV, "600"))


@dataclass(frozen=True)
class TaskConfig:
    """This process's task and the cluster it belongs to."""

    task_type: str
    task_index: int
    cluster: dict[str, list[str]]

    @property
    def name(self) -> str:
        return f"{self.task_type}/{self.task_index}"

    @property
    def address(self) -> str:
        return self.cluster[self.task_type][self.task_index]

    def count(self, role: str) -> int:
        return len(self.cluster.get(role, []))


def read_tf_config(environ: dict[str, str] | None = None) -> TaskConfig:
    """Parse and validate ``TF_CONFIG``; raise :class:`ConfigError` with a one-line reason."""
    env = os.environ if environ is None else environ
    raw = env.get(TF_CONFIG_ENV)
    if not raw:
        raise ConfigError(f"{TF_CONFIG_ENV} is not set: every trainer process needs its cluster and task")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{TF_CONFIG_ENV} is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{TF_CONFIG_ENV} must be a JSON object with 'cluster' and 'task'")
    cluster, task = data.get("cluster"), data.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError(f"{TF_CONFIG_ENV}.cluster must be a non-empty object of role -> [host:port]")
    for role, addrs in cluster.items():
        if role not in ROLES:
            raise ConfigError(f"{TF_CONFIG_ENV}.cluster.{role}: unknown role (expected one of {', '.join(ROLES)})")
        if not isinstance(addrs, list) or not addrs or not all(_is_address(a) for a in addrs):
            raise ConfigError(f"{TF_CONFIG_ENV}.cluster.{role} must be a non-empty list of 'host:port' strings")
    if not isinstance(task, dict):
        raise ConfigError(f"{TF_CONFIG_ENV}.task must be an object with 'type' and 'index'")
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in ROLES:
        raise ConfigError(f"{TF_CONFIG_ENV}.task.type: {task_type!r} is not one of {', '.join(ROLES)}")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ConfigError(f"{TF_CONFIG_ENV}.task.index: must be a non-negative integer, got {index!r}")
    if index >= len(cluster.get(task_type, [])):
        raise ConfigError(
            f"{TF_CONFIG_ENV}.task: {task_type}/{index} is not in the cluster "
            f"({len(cluster.get(task_type, []))} {task_type} address(es))"
        )
    return TaskConfig(task_type=task_type, task_index=index, cluster={k: list(v) for k, v in cluster.items()})


def check_shape(task: TaskConfig, strategy: str) -> None:
    """The training cluster has the roles ``strategy`` needs: chief, ps and worker (ParameterServer), or
    workers, an optional chief and no ps (MultiWorkerMirrored); the evaluator and the tf.data service are
    never part of it."""
    if task.task_type not in ("chief", "ps", "worker"):
        return
    needed: tuple[str, ...]
    unwanted: tuple[str, ...]
    if strategy == "MultiWorkerMirrored":
        needed, unwanted, what = ("worker",), ("ps",), "all-reduce training needs workers and no ps"
    else:
        needed, unwanted, what = ("chief", "ps", "worker"), (), "parameter-server training needs chief, ps and worker"
    for role in needed:
        if role not in task.cluster:
            raise ConfigError(f"{TF_CONFIG_ENV}.cluster.{role}: missing; {what}")
    for role in unwanted:
        if role in task.cluster:
            raise ConfigError(f"{TF_CONFIG_ENV}.cluster.{role}: unexpected; {what}")
    if "evaluator" in task.cluster:
        raise ConfigError(f"{TF_CONFIG_ENV}.cluster.evaluator: the evaluator must not be part of the training cluster")
    for role in DATA_SERVICE_ROLES:
        if role in task.cluster:
            raise ConfigError(
                f"{TF_CONFIG_ENV}.cluster.{role}: the tf.data service must not be part of the training cluster"
            )


def _is_address(value: object) -> bool:
    if not isinstance(value, str) or ":" not in value:
        return False
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def wait_for_addresses(addresses: list[str], timeout: float, poll: float = 0.5, stop: Any = None) -> list[str]:
    """Wait until every ``host:port`` accepts a TCP connection (or ``stop``, an Event, is set); return
    those that never did.

    Pods start in any order: the chief waits for its parameter servers before creating the
    strategy, instead of failing on a PS that is still importing TensorFlow.
    """
    import socket
    import time

    pending = list(addresses)
    deadline = time.monotonic() + timeout
    while pending:
        still = []
        for addr in pending:
            host, _, port = addr.rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
                    pass
            except OSError:
                still.append(addr)
        pending = still
        if not pending or time.monotonic() >= deadline or (stop is not None and stop.is_set()):
            break
        time.sleep(poll)
    return pending
