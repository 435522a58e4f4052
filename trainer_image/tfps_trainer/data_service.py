"""The job's tf.data service (docs/data-service.md): the dispatcher's and the data workers' processes, and
the chief's side, which registers the model module's dataset once and has every training worker read it.

The dispatcher runs in fault-tolerant mode with its journal under the job's storage, so a dispatcher that
is recreated restores the registered dataset and the iteration's progress (the splits already handed out
stay handed out). Jobs are never garbage-collected: the iteration lives as long as the job, and a training
cluster that restarts joins it where it stood.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from tfps_wire.job_settings import DataServiceSettings, JobSettings
from tfps_wire.uri import is_uri

from .cluster import STARTUP_TIMEOUT_ENV, TaskConfig, wait_for_addresses
from .errors import ConfigError, InfrastructureError

NEVER = -1
"""``job_gc_timeout_ms``: the dispatcher never drops the job's iteration while nobody reads it (a restart)."""


def _settings(settings: JobSettings, role: str) -> DataServiceSettings:
    if settings.data_service is None:
        raise ConfigError(f"TFPS_JOB.data_service: unset, but this process is the tf.data service's {role}")
    return settings.data_service


def _port(task: TaskConfig) -> int:
    return int(task.address.rpartition(":")[2])


def _check_journal(work_dir: str) -> None:
    """The journal's directory exists and takes a file, or the dispatcher cannot start: a configuration
    error naming it (permanent: every attempt would fail the same way). On a volume this is checked before
    TensorFlow loads, so a job whose service cannot start fails in moments."""
    probe = f"{work_dir.rstrip('/')}/.tfps-write-probe"
    try:
        if not is_uri(work_dir):
            os.makedirs(work_dir, exist_ok=True)
            with open(probe, "w") as f:
                f.write("ok")
            os.remove(probe)
            return
        import tensorflow as tf

        try:
            tf.io.gfile.makedirs(work_dir)
            with tf.io.gfile.GFile(probe, "w") as g:
                g.write("ok")
            tf.io.gfile.remove(probe)
        except tf.errors.PermissionDeniedError as exc:
            raise ConfigError(f"tf.data service dispatcher: its journal {work_dir} cannot be written: {exc}") from None
        except tf.errors.OpError as exc:
            raise InfrastructureError(
                f"tf.data service dispatcher: its journal {work_dir} cannot be written: {exc}"
            ) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"tf.data service dispatcher: its journal {work_dir} cannot be written: {reason}") from None


def _serve_until_stopped(name: str, what: str, server: Any) -> int:
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"tfps-trainer {name}: {what}", flush=True)
    while not stop.wait(1.0):  # a Python-level wait so the signal handler runs
        pass
    print(f"tfps-trainer {name}: stopping", flush=True)
    del server
    return 0


def run_dispatcher(task: TaskConfig, settings: JobSettings) -> int:
    """Serve the dispatcher on this task's port until SIGTERM."""
    ds = _settings(settings, "dispatcher")
    _check_journal(ds.work_dir)
    import tensorflow as tf

    config = tf.data.experimental.service.DispatcherConfig(
        port=_port(task), work_dir=ds.work_dir, fault_tolerant_mode=True, job_gc_timeout_ms=NEVER
    )
    try:
        server = tf.data.experimental.service.DispatchServer(config)
    except tf.errors.OpError as exc:
        raise ConfigError(f"tf.data service dispatcher cannot start on {task.address}: {exc.message}") from None
    return _serve_until_stopped(
        task.name, f"tf.data service dispatcher on {task.address}, journal in {ds.work_dir}", server
    )


def run_worker(task: TaskConfig, settings: JobSettings) -> int:
    """Serve a data worker on this task's port until SIGTERM; it registers with the dispatcher under its
    own address, which the training workers read from."""
    import tensorflow as tf

    ds = _settings(settings, "data worker")
    timeout = float(os.environ.get(STARTUP_TIMEOUT_ENV, "600"))
    if wait_for_addresses([ds.dispatcher], timeout):
        raise InfrastructureError(f"tf.data service dispatcher {ds.dispatcher} not reachable after {timeout:g}s")
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=ds.dispatcher, worker_address=task.address, port=_port(task)
    )
    try:
        server = tf.data.experimental.service.WorkerServer(config)
    except tf.errors.OpError as exc:
        raise InfrastructureError(f"tf.data service worker cannot start on {task.address}: {exc.message}") from None
    return _serve_until_stopped(
        task.name, f"tf.data service worker on {task.address} (dispatcher {ds.dispatcher})", server
    )


def sharding_policy(ds: DataServiceSettings) -> Any:
    import tensorflow as tf

    policy = tf.data.experimental.service.ShardingPolicy
    return policy.DYNAMIC if ds.processing_mode == "dynamic" else policy.OFF


def registered_dataset_fn(ds: DataServiceSettings, dataset: Any) -> Callable[[Any], Any]:
    """Register ``dataset`` (the module's whole dataset) with the dispatcher under the job's dataset id and
    return the per-worker dataset function that reads it: every training worker reads the one iteration."""
    import tensorflow as tf

    service = tf.data.experimental.service
    dataset_id = service.register_dataset(ds.target, dataset, dataset_id=ds.dataset_id)
    element_spec = dataset.element_spec
    policy = sharding_policy(ds)

    def dataset_fn(_input_context: Any) -> Any:
        return service.from_dataset_id(
            processing_mode=policy,
            service=ds.target,
            dataset_id=dataset_id,
            element_spec=element_spec,
            job_name=ds.iteration,
        )

    return dataset_fn
