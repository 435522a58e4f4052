"""The chief: ParameterServerStrategy + ClusterCoordinator training loop with checkpoints.

Keras 3 ``model.fit`` refuses ParameterServerStrategy datasets, so this is a custom loop: the chief
schedules training closures (``steps_per_closure`` steps each, :mod:`.closures`) on the workers as
fast as the coordinator's queue takes them; a reader thread fetches a sample of their losses for
progress. Before a checkpoint it joins (so the saved state is exactly ``step`` updates and every loss
up to it was checked).
"""

from __future__ import annotations

import collections
import os
import queue
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tfps_wire.job_settings import DataServiceSettings, JobSettings
from tfps_wire.termination import format_stopped, format_success
from tfps_wire.uri import is_uri

from . import (
    checkpoints,
    data_service,
    initializers,
    modelio,
    optimizer_step,
    partitioning,
    sharding,
    tensorboard_scalars,
)
from .closures import NUMERICS_TAG, TrainClosures, closure_size
from .cluster import read_tf_config, startup_timeout, wait_for_addresses
from .contract import ModelContract
from .errors import ContractFailure, InfrastructureError, LostClusterError, NumericsError, PreemptedError, TrainerError
from .status_server import Progress
from .step_rate import StepRate

IN_FLIGHT_PER_WORKER = 32
"""Steps scheduled ahead of the workers, per worker: enough to keep each busy, few enough that a stop
(SIGTERM) finishes them in moments. The coordinator's own queue holds 262,144 closures."""
MIN_CLOSURES_PER_WORKER = 4
"""Closures scheduled ahead per worker at least, however many steps each runs."""
IN_FLIGHT_CHECK_EVERY = 8
"""Every how many scheduled steps the chief waits for the oldest closure beyond the window."""
SAMPLE_SECONDS = 0.5
"""How often a scheduled closure's loss is sampled (fetched off the main thread) for progress."""
_NUMERICS_OP = re.compile(r'Detected Infinity or NaN in output \d+ of (?:graph )?op "[^"]+"')
_PS_TASK = re.compile(r"/job:ps/replica:\d+/task:(\d+)")


class Trainer:
    """Builds the strategy, model, optimizer and checkpoint; runs the loop to ``settings.steps``."""

    def __init__(
        self, settings: JobSettings, contract: ModelContract, progress: Progress, stop: threading.Event | None = None
    ) -> None:
        self.settings = settings
        self.stop = stop or threading.Event()
        """Set by SIGTERM: finish the scheduled steps, save a checkpoint, exit as preempted."""
        self.contract = contract
        self.progress = progress
        args = dict(settings.model_args)
        if settings.seed is not None:
            tf.random.set_seed(settings.seed)
        if settings.check_numerics:
            tf.debugging.enable_check_numerics()
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        partitioner = sharding.partitioner(settings.partitioner)
        self.strategy = tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)
        workers = len(resolver.cluster_spec().as_dict().get("worker", [])) or 1
        k = settings.steps_per_closure
        self.closures_ahead = workers * max(MIN_CLOSURES_PER_WORKER, -(-IN_FLIGHT_PER_WORKER // k))
        self.check_every = max(1, IN_FLIGHT_CHECK_EVERY // k)
        if partitioner is not None:
            initializers.install()  # each PS draws only its shards' initial values
        with self.strategy.scope():
            self.model = modelio.build(contract, args)
            self.train_vars = sharding.optimizer_variables(self.model.trainable_variables)
            self.optimizer, updates = modelio.make_optimizer(contract, args, self.train_vars)
            self.optimizer_step = optimizer_step.count_atomically(self.optimizer)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        print(f"tfps-trainer chief: {updates}", flush=True)
        split = sharding.make_checkpointable(self.model.weights)
        if settings.partitioner is not None:
            how = partitioning.describe_partitioner(settings.partitioner)
            print(f"tfps-trainer chief: {how}: {split} of {len(self.model.weights)} model variables split", flush=True)
        for line in sharding.describe(self.model.weights):
            print(f"tfps-trainer chief: partitioned: {line}", flush=True)
        # In object storage only this process reaches the job's files (parameter servers get neither the
        # credentials nor the endpoint settings): every checkpoint file is written from here.
        io_device = (
            f"/job:{resolver.task_type}/replica:0/task:{resolver.task_id}/device:CPU:0"
            if is_uri(settings.paths.checkpoints)
            else None
        )
        self.checkpointer = checkpoints.Checkpointer(
            checkpoints.make_checkpoint(self.model, self.optimizer, self.step),
            settings.paths.checkpoints,
            settings.checkpoint.keep,
            io_device=io_device,
        )
        self.last_checkpoint: checkpoints.CheckpointInfo | None = None
        self.optimizer_step_before_sync: int | None = None
        """The optimizer's step counter at the last checkpoint, before it was set to the global step."""
        self.writer = tf.summary.create_file_writer(os.path.join(settings.paths.tensorboard, "chief"))
        self.closures = TrainClosures(
            self.strategy,
            self.model,
            self.optimizer,
            self.train_vars,
            contract.loss,
            steps_per_closure=k,
            check_numerics=settings.check_numerics,
        )
        batch_size = settings.batch_size

        def own_pipeline(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
            return prefetched(contract.dataset(input_context, batch_size, args))

        dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset] = own_pipeline
        try:
            if settings.data_service is not None:
                dataset_fn = self._through_the_service(settings.data_service, batch_size, args)
            distributed = self.strategy.distribute_datasets_from_function(dataset_fn)
            self.iterator = iter(self.coordinator.create_per_worker_dataset(distributed))
        except TrainerError:
            raise
        except Exception as exc:
            raise ContractFailure(
                f"model module {contract.module_name!r}: dataset() failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _through_the_service(
        self, ds: DataServiceSettings, batch_size: int, args: dict[str, Any]
    ) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
        """The module's whole dataset (one input pipeline), registered once with the job's tf.data service;
        every training worker reads the job's one iteration of it (docs/data-service.md)."""
        whole = modelio.call(
            self.contract, "dataset", self.contract.dataset, tf.distribute.InputContext(1, 0, 1), batch_size, args
        )
        try:
            read = data_service.registered_dataset_fn(ds, whole)
        except tf.errors.OpError as exc:
            raise LostClusterError(
                f"cannot register the dataset with the tf.data service at {ds.dispatcher}: {_first_line(exc)[:300]}"
            ) from None
        timeout = startup_timeout()
        try:
            answered = data_service.answers_within(ds, whole.element_spec, timeout)
        except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError) as exc:
            raise LostClusterError(
                f"the tf.data service at {ds.dispatcher} failed a first read: {_first_line(exc)[:300]}"
            ) from None
        if not answered:
            names = ", ".join(f"dataworker/{i} ({a})" for i, a in enumerate(ds.data_workers))
            raise LostClusterError(
                f"the tf.data service at {ds.dispatcher} served no element within {timeout:g}s: no data worker "
                f"registered with it ({names}; their logs say why)"
            )
        mode = "dynamic sharding" if ds.processing_mode == "dynamic" else "no sharding (processingMode Off)"
        print(
            f"tfps-trainer chief: dataset {ds.dataset_id!r} registered with the tf.data service at {ds.dispatcher}; "
            f"training workers read iteration {ds.iteration!r} with {mode}",
            flush=True,
        )
        return lambda input_context: prefetched(read(input_context))

    # ---- the loop -------------------------------------------------------------------------

    def restore(self) -> int:
        try:
            path = self.checkpointer.restore_latest()
        except (AssertionError, ValueError) as exc:  # the latest checkpoint does not fit this model
            raise ContractFailure(
                f"checkpoint {self.checkpointer.manager.latest_checkpoint} does not match the model built by "
                f"{self.contract.module_name!r} (changed model code or args?): {_first_line(exc)[:300]}"
            ) from None
        start = int(self.step.numpy())
        self._sync_optimizer_step(start)
        if path:
            self._check_restored_shapes(path)
            self.last_checkpoint = checkpoints.info_for(path)
            self.progress.update(
                step=start, checkpoint=self.last_checkpoint, message=f"resumed from checkpoint step {start}"
            )
            print(f"tfps-trainer chief: resumed from checkpoint step {start} ({path})", flush=True)
        else:
            print("tfps-trainer chief: no checkpoint found, starting at step 0", flush=True)
        return start

    def _check_restored_shapes(self, path: str) -> None:
        """Fail clearly when the checkpoint's tensors do not have the model's shapes.

        A restore into PS variables assigns whatever the checkpoint holds; a model whose shapes
        changed would otherwise fail later in the first step with an opaque graph error. The check
        asks each PS for its variables' shapes (no data moves).
        """
        for v in self.model.weights:
            tv = sharding.backing(v)
            for part in getattr(tv, "variables", None) or [tv]:
                with tf.device(part.device):
                    actual = tf.raw_ops.VariableShape(input=part.handle, out_type=tf.int64).numpy().tolist()
                if actual != part.shape.as_list():
                    raise ContractFailure(
                        f"checkpoint {path} does not match the model built by {self.contract.module_name!r} "
                        f"(changed model code or args?): {getattr(v, 'path', v.name)} has shape {actual} in the "
                        f"checkpoint, {part.shape.as_list()} in the model"
                    )

    def run(self) -> int:
        """Train to ``settings.steps``; return the final step. Raises :class:`TrainerError`.

        The main thread only schedules closures of ``steps_per_closure`` steps (shorter ones so that
        every checkpoint boundary and the target are hit exactly), like a bare coordinator loop: it
        blocks when it is :data:`IN_FLIGHT_PER_WORKER` steps (at least :data:`MIN_CLOSURES_PER_WORKER`
        closures) per worker ahead, waiting on the oldest of those, which leaves the GIL to the
        coordinator's worker threads. A :class:`_ProgressReader` thread fetches a
        sample of results for progress and TensorBoard. On SIGTERM (``self.stop``) it schedules no
        more, waits for the scheduled steps, saves them and raises :class:`PreemptedError`.

        The global step counts scheduled training steps that completed. The coordinator runs each
        scheduled closure at least once (a closure whose worker died is re-run elsewhere, so up to
        ``steps_per_closure`` updates may be applied twice) and reports it once, so the step is counted
        here on the chief, not incremented on the PS.
        """
        target = self.settings.steps
        assert target is not None  # __main__ runs a model module only with a target step
        reader = _ProgressReader(self)
        try:
            done = self.restore()
            reader.reset(done)
            reader.start()
            policy = checkpoints.Policy.from_settings(self.settings.checkpoint, done)
            scheduled = done
            count = 0  # closures scheduled
            rv = None
            window: collections.deque[Any] = collections.deque()
            while scheduled < target and not self.stop.is_set():
                boundary = policy.next_step_boundary(scheduled)
                end = target if boundary is None else min(target, boundary)
                next_sample = time.monotonic() + SAMPLE_SECONDS
                while scheduled < end and not self.stop.is_set():
                    n = closure_size(scheduled, end, self.settings.steps_per_closure)
                    rv = self.closures.schedule(self.coordinator, self.iterator, n)
                    scheduled += n
                    count += 1
                    if count % self.check_every == 0:
                        window.append(rv)
                        if len(window) * self.check_every > self.closures_ahead:
                            _wait_for(window.popleft())  # bound the steps scheduled ahead of the workers
                    now = time.monotonic()
                    if now >= next_sample:
                        next_sample = now + SAMPLE_SECONDS
                        reader.submit(scheduled, rv)
                        if policy.every_seconds is not None and policy.due(scheduled, now):
                            break
                if policy.due(scheduled) or scheduled >= target or self.stop.is_set():
                    self._checkpoint(scheduled, rv, reader)
                    policy.saved(scheduled)
            if self.stop.is_set() and scheduled < target:
                raise self._preempted(scheduled, done)
            return scheduled
        except tf.errors.OpError as exc:
            raise self.translate(exc) from None
        finally:
            reader.stop()
            self.writer.flush()

    def _checkpoint(self, scheduled: int, rv: Any, reader: _ProgressReader) -> None:
        """Wait for every scheduled step, then save them all (once per step)."""
        if self.last_checkpoint is not None and self.last_checkpoint.step == scheduled:
            return
        self.coordinator.join()  # every step <= scheduled done, every loss checked
        reader.drain()
        if rv is not None:
            reader.report_now(scheduled, float(rv.fetch()))
        self.step.assign(scheduled)
        self._sync_optimizer_step(scheduled)
        self._save(scheduled)

    def _sync_optimizer_step(self, step: int) -> None:
        """Set the optimizer's step counter to the global step (they differ after a closure was re-run)."""
        before = optimizer_step.sync(self.optimizer_step, step)
        self.optimizer_step_before_sync = before
        if before is not None and before != step:
            print(f"tfps-trainer chief: optimizer step {before} set to the global step {step}", flush=True)

    def _preempted(self, scheduled: int, resumed_at: int) -> PreemptedError:
        saved = self.last_checkpoint is not None and self.last_checkpoint.step == scheduled
        path = self.last_checkpoint.path if saved and self.last_checkpoint is not None else None
        return PreemptedError(format_stopped(scheduled, resumed_at, path, self._resume_hint()))

    def translate(self, exc: tf.errors.OpError) -> TrainerError:
        """A TensorFlow error from the cluster as a one-line trainer failure."""
        text = str(exc)
        if isinstance(exc, tf.errors.InvalidArgumentError):
            if NUMERICS_TAG in text or "Detected Infinity or NaN" in text:
                return self._numerics_error(exc)
            return TrainerError(f"training step failed: InvalidArgumentError: {_first_line(exc)[:300]}")
        return self._cluster_error(exc)

    def _report(self, step: int, loss: float, rate: float | None) -> None:
        self.progress.update(step=step, loss=loss, steps_per_second=rate)
        with self.writer.as_default():
            tensorboard_scalars.scalar("loss", loss, step)
            if rate is not None:
                tensorboard_scalars.scalar("steps_per_second", rate, step)

    def _save(self, step: int) -> None:
        try:
            self.last_checkpoint = self.checkpointer.save(step)
        except _CLUSTER_ERRORS:
            raise  # a PS lost while its variables were read: reported as a lost PS
        except (tf.errors.OpError, OSError) as exc:
            directory = self.settings.paths.checkpoints
            raise InfrastructureError(
                f"cannot write checkpoint step {step} to {directory}: {_storage_problem(directory)}"
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            ) from None
        self.progress.update(step=step, checkpoint=self.last_checkpoint)
        print(f"tfps-trainer chief: checkpoint step {step} -> {self.last_checkpoint.path}", flush=True)

    def _resume_hint(self) -> str:
        """The checkpoint a restart resumes from: the newest complete one on disk, which is newer than the
        last save this run recorded when a failure (a PS lost) interrupted a save after its files were
        complete."""
        newest = self.last_checkpoint
        try:
            on_disk = self.checkpointer.candidates()
        except OSError:
            on_disk = []
        if on_disk and (newest is None or checkpoints.step_of(on_disk[0]) > newest.step):
            newest = checkpoints.info_for(on_disk[0])
        if newest is None:
            return "no checkpoint was written yet"
        return f"latest checkpoint is step {newest.step} ({newest.path})"

    def _numerics_error(self, exc: Exception) -> NumericsError:
        where = _NUMERICS_OP.search(str(exc))
        detail = f" ({where.group(0)})" if where else ""
        return NumericsError(
            f"non-finite loss (NaN or Inf) in a training step after step {self.progress.snapshot()['step']}{detail}: "
            f"training stopped without checkpointing the bad state; {self._resume_hint()}"
        )

    def _cluster_error(self, exc: Exception) -> LostClusterError:
        match = _PS_TASK.search(str(exc))
        who = f"parameter server ps/{match.group(1)}" if match else "a parameter server"
        return LostClusterError(
            f"lost {who} ({type(exc).__name__}: {_first_line(exc)[:200]}): restart the job to resume; "
            f"{self._resume_hint()}"
        )


class _ProgressReader(threading.Thread):
    """Fetches sampled step results off the main thread: step, loss and steps/s for progress and TensorBoard.

    Errors are ignored here: the coordinator raises them to the main thread (schedule/join).
    """

    def __init__(self, trainer: Trainer) -> None:
        super().__init__(name="tfps-progress-reader", daemon=True)
        self.trainer = trainer
        self.queue: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.rate = StepRate()
        self.rate.reset(time.monotonic(), 0)
        self.last_step = 0

    def reset(self, step: int) -> None:
        self.rate.reset(time.monotonic(), step)
        self.last_step = step

    def submit(self, step: int, remote_value: Any) -> None:
        self.queue.put((step, remote_value))

    def drain(self) -> None:
        self.queue.join()

    def stop(self) -> None:
        if self.is_alive():
            self.queue.put(None)
            self.join(timeout=5)

    def report_now(self, step: int, loss: float) -> None:
        with self.lock:
            if step > self.last_step:
                rate = self.rate.add(time.monotonic(), step)
                self.trainer._report(step, loss, rate)
                self.last_step = step

    def run(self) -> None:
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    return
                step, remote_value = item
                if not self.queue.empty():
                    continue  # behind: skip to the newest sample
                try:
                    loss = float(remote_value.fetch())
                except Exception:
                    continue
                self.report_now(step, loss)
            finally:
                self.queue.task_done()


_CLUSTER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.DeadlineExceededError,
)


def _wait_for(remote_value: Any) -> None:
    """Wait until a scheduled closure has run. Its failure is not raised here: the coordinator raises what
    matters (a lost PS) at the next schedule or join, and the result of a step that ran on a worker that
    died since cannot be fetched at all (the coordinator counts it done).

    The coordinator's RemoteValue sets an event when its closure has finished (or was aborted); waiting on
    it costs nothing, while ``fetch()`` copies the result from the worker to the chief, a remote call per
    wait. ``fetch()`` stays the fallback should TensorFlow's value lose that event.
    """
    finished = getattr(remote_value, "_status_available_event", None)
    if isinstance(finished, threading.Event):
        finished.wait()
        return
    try:
        remote_value.fetch()
    except Exception:
        pass


def prefetched(dataset: Any) -> Any:
    """``dataset`` ending in a ``prefetch(AUTOTUNE)``, so a worker's next batch is ready when its step
    asks (a dataset that already ends in a prefetch is left as it is)."""
    if not isinstance(dataset, tf.data.Dataset) or type(dataset).__name__.lstrip("_") == "PrefetchDataset":
        return dataset
    return dataset.prefetch(tf.data.AUTOTUNE)


def _storage_problem(directory: str) -> str:
    """The OS-level reason a directory cannot take a checkpoint, when it can be told ("" otherwise)."""
    if is_uri(directory):
        return ""
    try:
        st = os.statvfs(directory)
    except OSError as exc:
        return f"{exc.strerror}; "
    if st.f_flag & os.ST_RDONLY:
        return "Read-only file system; "
    if st.f_bavail == 0:
        return "No space left on device; "
    if not os.access(directory, os.W_OK):
        return "Permission denied; "
    return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def wait_for_parameter_servers(progress: Progress, stop: threading.Event | None = None) -> None:
    task = read_tf_config()
    timeout = startup_timeout()
    progress.update(message="waiting for parameter servers")
    missing = wait_for_addresses(task.cluster["ps"], timeout, stop=stop)
    if stop is not None and stop.is_set():
        raise PreemptedError("preempted (SIGTERM) while waiting for the parameter servers; nothing to save")
    if missing:
        names = ", ".join(f"ps/{task.cluster['ps'].index(a)} ({a})" for a in missing)
        raise LostClusterError(f"parameter server(s) {names} not reachable after {timeout:g}s")
    progress.update(message="")


def wait_for_data_service(settings: JobSettings, progress: Progress, stop: threading.Event | None = None) -> None:
    """A job with a tf.data service waits for its dispatcher as for its parameter servers; one that never
    comes up fails the chief with its address, not a hang."""
    ds = settings.data_service
    if ds is None:
        return
    timeout = startup_timeout()
    progress.update(message="waiting for the tf.data service dispatcher")
    missing = wait_for_addresses([ds.dispatcher], timeout, stop=stop)
    if stop is not None and stop.is_set():
        raise PreemptedError("preempted (SIGTERM) while waiting for the tf.data service; nothing to save")
    if missing:
        raise LostClusterError(f"tf.data service dispatcher {ds.dispatcher} not reachable after {timeout:g}s")
    progress.update(message="")


def stop_on_sigterm() -> threading.Event:
    """An event set by SIGTERM (the kubelet's stop: preemption, drain, eviction, suspend, deletion), so the
    chief can save its last steps instead of dying; the pod's terminationGracePeriodSeconds bounds it."""
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        if not stop.is_set():
            print(
                f"tfps-trainer chief: {signal.Signals(signum).name}: finishing the scheduled steps, then saving "
                "a checkpoint",
                flush=True,
            )
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    return stop


def run(settings: JobSettings, contract: ModelContract, progress: Progress) -> str:
    """Train; return a one-line success summary."""
    assert settings.steps is not None  # __main__ runs a model module only with a target step
    stop = stop_on_sigterm()
    wait_for_parameter_servers(progress, stop)
    wait_for_data_service(settings, progress, stop)
    try:
        trainer = Trainer(settings, contract, progress, stop)
    except tf.errors.OpError as exc:
        raise LostClusterError(
            f"cannot set up training on the cluster ({type(exc).__name__}: {_first_line(exc)[:300]})"
        ) from None
    final = trainer.run()
    ck = trainer.last_checkpoint
    return format_success(final, settings.steps, ck.path if ck else None)
