"""The exporter's cancellation flag and error-line helper; its one exception type, :class:`ExportError`, is
in :mod:`tfps_wire.export_result` beside the reasons it carries."""

from __future__ import annotations

import threading

from tfps_wire.termination import one_line

CANCELLED = threading.Event()
"""Set by the SIGTERM/SIGINT handler; the pipeline checks it between steps and right before publishing."""

COMMITTING = threading.Event()
"""Set by the pipeline once it starts publishing: from then on a termination signal only sets
:data:`CANCELLED` and the export finishes, so that its result says what was published (a volume's publish
is a few renames; object storage writes the manifest last, so a kill mid-upload leaves nothing visible)."""


def error_line(exc: BaseException, limit: int = 600) -> str:
    """``Type: message`` on one line, the message shortened to ``limit`` characters: for messages built
    from library exceptions."""
    return f"{type(exc).__name__}: {one_line(str(exc), limit)}"
