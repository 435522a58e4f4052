"""The one-line failure reason every trainer process reports, and the exceptions that carry it.

A failing trainer prints ONE line to stderr (``tfps-trainer <role>: <reason>``) and writes the
same reason to the container termination log, so the operator can show it in the job status. When
the failure came from the user's code, its traceback is printed to the log first and its last lines
go into the termination log above the reason. Exit codes: :mod:`tfps_trainer.exitcodes`.
"""

from __future__ import annotations

import os
import sys
import traceback

from . import exitcodes
from .config import DEFAULT_TERMINATION_LOG, TERMINATION_LOG_ENV

EXIT_OK = exitcodes.OK
EXIT_INTERNAL = exitcodes.INTERNAL
EXIT_CONFIG = exitcodes.CONFIG
EXIT_CONTRACT = exitcodes.CONTRACT
EXIT_NUMERICS = exitcodes.NUMERICS
EXIT_LOST_CLUSTER = exitcodes.LOST_CLUSTER
EXIT_PREEMPTED = exitcodes.PREEMPTED
EXIT_INFRASTRUCTURE = exitcodes.INFRASTRUCTURE

TERMINATION_MESSAGE_LIMIT = 4096
"""Kubernetes keeps at most 4096 bytes of a termination message."""
TRACEBACK_LINES = 20
"""Lines of the user's traceback kept in the termination message (the log has all of it)."""


class TrainerError(Exception):
    """A failure with a one-line reason and the process exit code it maps to."""

    def __init__(self, reason: str, code: int = EXIT_INTERNAL) -> None:
        super().__init__(reason)
        self.reason = one_line(reason)
        self.code = code


class ConfigError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, EXIT_CONFIG)


class ContractFailure(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, EXIT_CONTRACT)


class NumericsError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, EXIT_NUMERICS)


class LostClusterError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, EXIT_LOST_CLUSTER)


class PreemptedError(TrainerError):
    """SIGTERM: the work up to the reason's step is saved; the operator restarts the job elsewhere."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, EXIT_PREEMPTED)


class InfrastructureError(TrainerError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, EXIT_INFRASTRUCTURE)


def one_line(text: str, limit: int = 1000) -> str:
    """Collapse ``text`` to a single line of at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def write_termination_log(reason: str, environ: dict[str, str] | None = None) -> None:
    """Write ``reason`` to the termination log; silently skip when it cannot be written."""
    env = os.environ if environ is None else environ
    path = env.get(TERMINATION_LOG_ENV, DEFAULT_TERMINATION_LOG)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(reason + "\n")
    except OSError:
        pass


def user_traceback(error: BaseException) -> str:
    """The traceback of the exception behind ``error`` (its ``__cause__``), or "" when there is none."""
    cause = error.__cause__
    if cause is None:
        return ""
    return "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))


def termination_text(line: str, trace: str) -> str:
    """The termination message: the traceback's last lines (when any), then the one-line reason, within
    Kubernetes' 4096 bytes; the reason is always the last line."""
    if not trace:
        return line
    budget = TERMINATION_MESSAGE_LIMIT - len(line.encode()) - 64
    kept = trace.rstrip("\n").splitlines()[-TRACEBACK_LINES:]
    while kept and len("\n".join(kept).encode()) > budget:
        kept.pop(0)
    return "\n".join(kept + [line]) if kept else line


def report_failure(role: str, error: TrainerError) -> int:
    """Write the reason (under the user's traceback, if any) to the termination log and print it as
    stderr's LAST line; return the code.

    Background TensorFlow threads (the coordinator, gRPC) may still be logging when a role fails;
    after the reason is printed, stdout and stderr are pointed at /dev/null so the reason stays the
    last line. Call this only right before the process exits.
    """
    line = f"tfps-trainer {role}: {error.reason}"
    trace = user_traceback(error)
    write_termination_log(termination_text(line, trace))
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
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass
