"""The job's tf.data service (docs/data-service.md): the dispatcher's and the data workers' processes, and
the chief's side, which registers the model module's dataset once and has every training worker read it.

The dispatcher runs in fault-tolerant mode with its journal under the job's storage, so a dispatcher that
is recreated restores the registered dataset and the iteration's progress (the splits already handed out
stay handed out). Jobs are never garbage-collected: the iteration lives as long as the job, and a training
cluster that restarts joins it where it stood.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from tfps_wire.job_settings import DataServiceSettings, JobSettings
from tfps_wire.termination import termination_line, write_termination_log
from tfps_wire.uri import is_uri

from .cluster import TaskConfig, startup_timeout, wait_for_addresses
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


def _registered_within(build: Callable[[], Any], deadline: float, role: str, reason: str) -> Any:
    """``build()`` (a ``WorkerServer``) under a kernel alarm that ends the process at ``deadline``.

    Starting a ``WorkerServer`` registers it with the dispatcher and retries, for an hour, while the
    dispatcher does not answer, holding the GIL: no Python timer runs meanwhile. SIGALRM's default action
    ends the process whatever it holds (a signal's exit, retried like one); ``reason`` is in the termination
    log beforehand, so the kill is reported with it."""
    print(f"tfps-trainer {role}: registering with the dispatcher (giving up in {deadline - time.monotonic():.0f}s)",
          flush=True)  # fmt: skip
    write_termination_log(termination_line(role, reason))
    previous = signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, math.ceil(deadline - time.monotonic())))
    try:
        return build()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        write_termination_log("")


def run_worker(task: TaskConfig, settings: JobSettings) -> int:
    """Serve a data worker on this task's port until SIGTERM; it registers with the dispatcher under its
    own address, which the training workers read from. Reaching the dispatcher and registering with it
    share one startup timeout (``TFPS_STARTUP_TIMEOUT``): a data worker that cannot fails with the reason
    (and is recreated), it never waits forever."""
    import tensorflow as tf

    ds = _settings(settings, "data worker")
    timeout = startup_timeout()
    deadline = time.monotonic() + timeout
    if wait_for_addresses([ds.dispatcher], timeout):
        raise InfrastructureError(f"tf.data service dispatcher {ds.dispatcher} not reachable after {timeout:g}s")
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=ds.dispatcher, worker_address=task.address, port=_port(task)
    )
    reason = f"tf.data service dispatcher {ds.dispatcher} did not register this data worker within {timeout:g}s"
    try:
        server = _registered_within(
            lambda: tf.data.experimental.service.WorkerServer(config), deadline, task.name, reason
        )
    except tf.errors.OpError as exc:
        raise InfrastructureError(f"tf.data service worker cannot start on {task.address}: {exc.message}") from None
    return _serve_until_stopped(
        task.name, f"tf.data service worker on {task.address} (dispatcher {ds.dispatcher})", server
    )


def sharding_policy(ds: DataServiceSettings) -> Any:
    import tensorflow as tf

    policy = tf.data.experimental.service.ShardingPolicy
    return policy.DYNAMIC if ds.processing_mode == "dynamic" else policy.OFF


def _reader(ds: DataServiceSettings, dataset_id: Any, element_spec: Any, job_name: str) -> Any:
    import tensorflow as tf

    return tf.data.experimental.service.from_dataset_id(
        processing_mode=sharding_policy(ds),
        service=ds.target,
        dataset_id=dataset_id,
        element_spec=element_spec,
        job_name=job_name,
    )


def registered_dataset_fn(ds: DataServiceSettings, dataset: Any) -> Callable[[Any], Any]:
    """Register ``dataset`` (the module's whole dataset) with the dispatcher under the job's dataset id and
    return the per-worker dataset function that reads it: every training worker reads the one iteration."""
    import tensorflow as tf

    dataset_id = tf.data.experimental.service.register_dataset(ds.target, dataset, dataset_id=ds.dataset_id)
    element_spec = dataset.element_spec
    return lambda _input_context: _reader(ds, dataset_id, element_spec, ds.iteration)


PROBE_SUFFIX = "-probe"
"""The job name of the chief's probe read: an iteration of its own, so it takes nothing from training's."""


def answers_within(ds: DataServiceSettings, element_spec: Any, timeout: float) -> bool:
    """Whether a read of the registered dataset through the service gets an answer (an element, or the end of
    the dataset) within ``timeout``; an error of the read is raised.

    A data worker listens before it has registered with the dispatcher, and a reader waits for registered
    workers without end, so this is the one check that the service serves. The read takes one element in an
    iteration of its own (``<iteration>-probe``, shared by every chief run: a finite dataset can run out
    there after many restarts, and the end of it is an answer too), in a thread: TensorFlow releases the GIL
    while it waits, and a read that never returns is left behind with the process."""
    ended = threading.Event()
    failure: list[Exception] = []

    def read() -> None:
        try:
            for _ in _reader(ds, ds.dataset_id, element_spec, ds.iteration + PROBE_SUFFIX).take(1):
                pass
        except Exception as exc:  # raised in the caller's thread
            failure.append(exc)
        ended.set()

    threading.Thread(target=read, name="tfps-data-service-probe", daemon=True).start()
    if not ended.wait(timeout):
        return False
    if failure:
        raise failure[0]
    return True
