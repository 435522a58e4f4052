"""The exceptions that carry a trainer process's one-line failure reason, and how it is reported.

A failing trainer prints ONE line to stderr (``tfps-trainer <role>: <reason>``) and writes the
same line to its termination message (:mod:`tfps_wire.termination`), so the operator can show it
in the job status. When the failure came from the user's code, its traceback is printed to the log
first and its last lines go into the termination message above the reason. Exit codes:
:mod:`tfps_wire.exitcodes`.
"""

from __future__ import annotations

import os
import sys
import traceback

from tfps_wire import exitcodes
from tfps_wire.termination import failure_text, one_line, termination_line, write_termination_log


class TrainerError(Exception):
    """A failure with a one-line reason and the process exit code it maps to."""

    def __init__(self, reason: str, code: int = exitcodes.INTERNAL) -> None:
        super().__init__(reason)
        self.reason = one_line(reason)
        self.code = code


class ConfigError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, exitcodes.CONFIG)


class ContractFailure(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, exitcodes.CONTRACT)


class NumericsError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, exitcodes.NUMERICS)


class LostClusterError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, exitcodes.LOST_CLUSTER)


class PreemptedError(TrainerError):
    """SIGTERM: the work up to the reason's step is saved; the operator restarts the job elsewhere."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, exitcodes.PREEMPTED)


class InfrastructureError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, exitcodes.INFRASTRUCTURE)


def user_traceback(error: BaseException) -> str:
    """The traceback of the exception behind ``error`` (its ``__cause__``), or "" when there is none."""
    cause = error.__cause__
    if cause is None:
        return ""
    return "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))


def report_failure(role: str, error: TrainerError) -> int:
    """Write the reason (under the user's traceback, if any) to the termination log, print it as stderr's
    LAST line, and return the code.

    Background TensorFlow threads (the coordinator, gRPC) may still be logging when a role fails;
    after the reason is printed, stdout and stderr are pointed at /dev/null so the reason stays the
    last line. Call this only right before the process exits.
    """
    line = termination_line(role, error.reason)
    trace = user_traceback(error)
    write_termination_log(failure_text(line, trace))
    try:
        sys.stdout.flush()
        if trace:
            print(trace, file=sys.stderr, end="")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    print(line, file=sys.stderr, flush=True)
    _mute_output()
    return error.code


def _mute_output() -> None:
    """Points fds 1 and 2 at /dev/null, and ``sys.stderr``'s own descriptor where it has one of its own
    (:meth:`~tfps_trainer.logfilter.StderrFilter.close` after a failed run)."""
    try:
        fds = {1, 2}
        try:
            fds.add(sys.stderr.fileno())
        except (AttributeError, OSError, ValueError):
            pass
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in fds:
            os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
