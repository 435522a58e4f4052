"""The one exception type of the exporter: a reason (see :mod:`.result`) and a one-line message."""

from __future__ import annotations

import threading

from .result import EXIT_CODES, ExportFailed, Reason


class ExportError(Exception):
    """Export failed for ``reason``; ``message`` names the component, the value and the limit."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message

    @property
    def exit_code(self) -> int:
        return int(EXIT_CODES[self.reason])

    def to_result(self) -> ExportFailed:
        return ExportFailed(reason=self.reason, message=self.message)


CANCELLED = threading.Event()
"""Set by the SIGTERM/SIGINT handler; the pipeline checks it between steps and right before publishing."""


def one_line(exc: BaseException, limit: int = 600) -> str:
    """``Type: message`` on one line, shortened: for messages built from library exceptions."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:limit]}"
