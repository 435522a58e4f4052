"""The trainer's and the exporter's termination messages, read into what the state machine acts on.

Pure, and never raises on a bad message: a message that is missing or is not what its writer sends
reads as "none" (or a string saying why). The schemas are the writers' own, from ``tfps_trainer``:
:mod:`tfps_wire.termination` (the chief's success summary), :mod:`tfps_wire.export_result`
(the exporter's result and pre-flight report) and :mod:`tfps_wire.exitcodes` (the exporter's codes).
"""

from __future__ import annotations

from tfps_wire.exitcodes import EXPORT_REASON_BY_CODE
from tfps_wire.export_result import ExportFailed, ExportSucceeded, PreflightReport, parse_any, parse_message
from tfps_wire.termination import FinalCheckpoint, parse_success

OUTPUT_TAIL = 500
"""Characters of a failed exporter's output quoted when it left no result."""


def final_checkpoint(message: str) -> FinalCheckpoint | None:
    """The step and final checkpoint of a chief's success summary; None when ``message`` is not one."""
    return parse_success(message)


def export_result(message: str) -> ExportSucceeded | ExportFailed | str:
    """The export Job's result, or a string saying why there is none."""
    if not message:
        return "no termination message"
    try:
        return parse_message(message)
    except ValueError as exc:  # pydantic's ValidationError is one
        return f"termination message is not an export result ({str(exc).splitlines()[0]})"


def preflight_report(message: str) -> ExportSucceeded | ExportFailed | PreflightReport | None:
    """The pre-flight Job's report (an :class:`ExportFailed` when it could not even build the model);
    None when it left no usable one."""
    if not message:
        return None
    try:
        return parse_any(message)
    except ValueError:
        return None


def export_failure(exit_code: int | None, message: str) -> str | None:
    """Why an export pod failed: the reason and message of its result, else the reason its exit code
    stands for, else that it died without a result; None when it has not exited."""
    result = export_result(message)
    if not isinstance(result, str) and not result.ok:
        return f"{result.reason}: {result.message}"
    if exit_code in EXPORT_REASON_BY_CODE:
        tail = f"; output: {message[-OUTPUT_TAIL:]}" if message else ""
        return f"{EXPORT_REASON_BY_CODE[exit_code]} (exit code {exit_code}){tail}"
    if exit_code is not None:
        return f"exporter died with exit code {exit_code} without a result" + (
            f": {message[-OUTPUT_TAIL:]}" if message else ""
        )
    return None
