"""``python -m tfps_trainer``: the entry point of every trainer pod.

Reads ``TF_CONFIG`` (cluster and task) and ``TFPS_JOB`` (:class:`tfps_wire.job_settings.JobSettings`
as JSON) and dispatches by task type: ``ps``/``worker`` serve until SIGTERM, ``chief`` trains,
``evaluator`` evaluates checkpoints, ``dispatcher``/``dataworker`` serve the job's tf.data service until
SIGTERM (also in script mode). Failures end the process with one line on stderr, the same
line in the termination log and a distinct exit code (:mod:`tfps_trainer.errors`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from tfps_wire import exitcodes
from tfps_wire.job_settings import JobSettings, SettingsError
from tfps_wire.termination import one_line, termination_line, write_termination_log

from . import hints, logfilter, tf_env
from .cluster import check_shape, read_tf_config
from .errors import ConfigError, ContractFailure, InfrastructureError, TrainerError, report_failure

FATAL_GRACE_SECONDS = 60.0
"""How long the main thread has to end the run after a hopeless flood interrupted it, before the
filter's thread reports the failure and ends the process itself."""
_REPORTING = threading.Lock()
"""Held by whichever thread reports the run's end: the main thread, or the fallback below."""


def hopeless_failure(output: logfilter.StderrFilter, error: str = "") -> ContractFailure:
    """The failure a run that cannot proceed ends with: the flood's first line, else the error that showed
    it (its hint is added when the failure is reported)."""
    fatal = output.scanner.fatal
    first = fatal[1] if fatal else error or "a flood of errors"
    return ContractFailure(f"training cannot proceed: {first[:400]}")


def stop_hopeless_run(role: str, output: logfilter.StderrFilter, grace: float = FATAL_GRACE_SECONDS) -> None:
    """Interrupt the main thread (it reports the failure); should it not end the run within ``grace``
    seconds (blocked where a signal does not reach Python), report the failure here and exit."""
    os.kill(os.getpid(), signal.SIGINT)

    def fallback() -> None:
        if not _REPORTING.acquire(blocking=False):
            return  # the main thread is reporting
        output.close(run_failed=True)
        failure = hopeless_failure(output)
        if hint := output.hint(failure.reason):
            failure.reason = one_line(f"{failure.reason}; {hint}", 1600)
        os._exit(report_failure(role, failure))

    timer = threading.Timer(grace, fallback)
    timer.daemon = True
    timer.start()


def _check_storage(root: str) -> None:
    """Object storage that cannot be used fails the chief before any training, with the bucket named."""
    from tfps_wire.storage_check import PERMANENT, StorageProblem, check

    try:
        check(root)
    except StorageProblem as exc:
        reason = f"spec.storage.uri: {exc.message}"
        raise (ConfigError(reason) if exc.kind in PERMANENT else InfrastructureError(reason)) from None


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> int:
    """Run this process's role; return the exit code (failures are reported before returning)."""
    # In a container this process is PID 1, and the kernel drops a signal PID 1 has no handler for: a
    # pod stopped while Python imports TensorFlow would wait out its whole grace period. Until a role
    # installs its own handler (the chief saves, the servers stop serving), SIGTERM ends the process.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    role = "trainer"
    progress = server = None
    failure: TrainerError | None = None
    output: logfilter.StderrFilter | None = None
    try:
        task = read_tf_config()
        role = task.name
        try:
            settings = JobSettings.from_env()
        except SettingsError as exc:
            raise ConfigError(str(exc)) from None
        check_shape(task, settings.strategy)
        tf_env.apply(os.environ, task.task_type)  # before any role imports TensorFlow
        if task.task_type == "dispatcher":
            from . import data_service

            return data_service.run_dispatcher(task, settings)
        if task.task_type == "dataworker":
            from . import data_service

            return data_service.run_worker(task, settings)
        if settings.script is not None:
            from .script import wrapper

            return wrapper.run(task, settings)
        if settings.strategy != "ParameterServer":
            raise ConfigError(f"TFPS_JOB.strategy: {settings.strategy} runs a program of one's own (script mode)")
        if settings.model_module is None or settings.steps is None:
            raise ConfigError(
                "TFPS_JOB: model_module and steps are required without a script (model_module/steps unset)"
            )
        if task.task_type in ("ps", "worker"):
            from . import server as ps_worker

            return ps_worker.run(task)

        if task.task_type == "chief":
            _check_storage(settings.paths.root)
        # TensorFlow's floods are rate-limited and scanned for known failures; one that never ends (a resource
        # outside strategy.scope()) interrupts the main thread, which then fails as the model's fault.
        output = stderr_filter = logfilter.StderrFilter(on_fatal=lambda: stop_hopeless_run(role, stderr_filter))
        from . import contract as contract_mod
        from . import status_server as progress_mod

        try:
            contract = contract_mod.load(settings.model_module)
        except contract_mod.ContractError as exc:
            raise ContractFailure(str(exc)) from exc.__cause__
        progress = progress_mod.Progress(role=task.task_type, target_steps=settings.steps, job=settings.job_name)
        server = progress_mod.serve(progress, settings.progress_port)
        print(
            f"tfps-trainer {role}: progress on http://{server.httpd.server_address[0]!s}:{server.port}/status",
            flush=True,
        )
        if task.task_type == "chief":
            from . import chief as role_mod
        else:
            from . import evaluator as role_mod  # type: ignore[no-redef]
        summary = role_mod.run(settings, contract, progress)
        progress.update(state="succeeded", message=summary)
        print(termination_line(role, summary), flush=True)
        write_termination_log(termination_line(role, summary))
        return exitcodes.OK
    except TrainerError as exc:
        failure = exc
    except KeyboardInterrupt:
        if output is not None and output.scanner.fatal is not None:
            failure = hopeless_failure(output)
        else:
            failure = TrainerError("interrupted", exitcodes.INTERRUPTED)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        if output is not None and (output.scanner.fatal is not None or hints.hopeless(error)):
            failure = hopeless_failure(output, error)  # the flood's cause, whichever error reached the main thread
        else:
            failure = TrainerError(f"internal error: {type(exc).__name__}: {exc}")
            failure.__cause__ = exc  # its traceback goes to the log and the termination message
    finally:
        _REPORTING.acquire()  # blocks for good if the fallback of stop_hopeless_run is ending the process
        if output is not None:
            output.close(run_failed=failure is not None)
            hint = output.hint(failure.reason) if failure is not None else ""
            if hint and failure is not None:
                failure.reason = one_line(f"{failure.reason}; {hint}", 1600)
        if failure is not None and progress is not None:
            progress.update(state="failed", message=failure.reason)
        if server is not None:
            server.stop()
    return report_failure(role, failure)


if __name__ == "__main__":
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    # The ClusterCoordinator keeps non-daemon threads and gRPC channels that can hang interpreter
    # shutdown (notably after a lost task); everything that matters is flushed and closed above.
    os._exit(code)
