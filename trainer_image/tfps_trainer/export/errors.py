"""The one exception type of the exporter: a reason (see :mod:`.result`) and a one-line message."""

from __future__ import annotations

import threading

from ..exitcodes import EXPORT_CODE_BY_REASON
from ..termination import one_line
from .result import ExportFailed, Reason


class ExportError(Exception):
    """Export failed for ``reason``; ``message`` names the component, the value and the limit."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message

    @property
    def exit_code(self) -> int:
        return EXPORT_CODE_BY_REASON[self.reason]

    def to_result(self) -> ExportFailed:
        return ExportFailed(reason=self.reason, message=self.message)


CANCELLED = threading.Event()
"""Set by the SIGTERM/SIGINT handler; the pipeline checks it between steps and right before publishing."""


def error_line(exc: BaseException, limit: int = 600) -> str:
    """``Type: message`` on one line, the message shortened to ``limit`` characters: for messages built
    from library exceptions."""
    return f"{type(exc).__name__}: {one_line(str(exc), limit)}"
