"""The export journal: which artifact the worker was converting or verifying when it died (TF-free).

The worker appends ``<label>\\t<phase>`` (phase ``convert`` or ``verify``) to the file named by env
:data:`JOURNAL_ENV` before each step that runs a converter or a runtime; :mod:`.__main__` reads the
last line when the worker dies without a result.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfps_wire.export_result import FormatFailure, artifact_label

JOURNAL_ENV = "TFPS_EXPORT_JOURNAL"


class Journal:
    def __init__(self, path: str | None = None) -> None:
        self.path = path if path is not None else os.environ.get(JOURNAL_ENV)

    def begin(self, fmt: str, quantization: str | None, phase: str) -> None:
        if self.path:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(f"{artifact_label(fmt, quantization)}\t{phase}\n")


def last_begun(path: Path) -> tuple[str, str] | None:
    """(label, phase) of the last step begun, or None."""
    try:
        lines = [ln.split("\t") for ln in path.read_text(encoding="utf-8").splitlines() if "\t" in ln]
    except OSError:
        return None
    return (lines[-1][0], lines[-1][1]) if lines else None


def crash_failure(label: str, phase: str, how: str) -> FormatFailure:
    """The outcome of an artifact whose converter or runtime killed the worker."""
    fmt, _, rest = label.partition(" (")
    quantization = rest.rstrip(")") or ("none" if fmt == "tflite" else None)
    reason = "ConversionFailed" if phase == "convert" else "VerificationFailed"
    doing = "converting it" if phase == "convert" else "running it in its runtime"
    return FormatFailure(
        format=fmt,
        quantization=quantization,
        reason=reason,
        message=f"{label}: the exporter process crashed ({how}) while {doing}; the other "
        "formats were exported by a fresh process",
    )
