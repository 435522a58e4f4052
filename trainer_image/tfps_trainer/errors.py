"""Exit codes and the one-line failure reason every trainer process reports.

A failing trainer prints ONE line to stderr (``tfps-trainer <role>: <reason>``) and writes the
same reason to the container termination log, so the operator can show it in the job status.

Exit codes (documented in trainer_image/README.md):

====  =====================================================================
0     success (chief: final checkpoint at ``steps`` written; evaluator: final checkpoint evaluated)
1     unexpected internal error (a bug; the reason names the exception)
2     configuration error: TF_CONFIG or TFPS_JOB missing or malformed
3     model contract error: module not importable, function missing, or a contract function failed
4     numerics: a NaN/Inf loss was detected (checkNumerics); no checkpoint of the bad state was written
5     lost the cluster: a parameter server became unavailable; restart the job to resume from checkpoint
====  =====================================================================
"""

from __future__ import annotations

import os
import sys

from .config import DEFAULT_TERMINATION_LOG, TERMINATION_LOG_ENV

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_CONTRACT = 3
EXIT_NUMERICS = 4
EXIT_LOST_CLUSTER = 5


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


def report_failure(role: str, error: TrainerError) -> int:
    """Write the one-line reason to the termination log and print it as stderr's LAST line; return the code.

    Background TensorFlow threads (the coordinator, gRPC) may still be logging when a role fails;
    after the reason is printed, stdout and stderr are pointed at /dev/null so the reason stays the
    last line. Call this only right before the process exits.
    """
    line = f"tfps-trainer {role}: {error.reason}"
    write_termination_log(line)
    try:
        sys.stdout.flush()
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
