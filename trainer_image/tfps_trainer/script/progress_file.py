"""``report(step, loss)``: a script-mode program's optional progress, read by the wrapper (TF-free).

Writes one small JSON document to ``$TFPS_PROGRESS_FILE`` (replaced atomically). Outside tfps (the
variable unset) it does nothing, so a program can call it unconditionally.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from .env import PROGRESS_FILE_ENV


def report(step: int, loss: float | None = None, **metrics: float) -> None:
    """Tell the wrapper the program's current global step, and optionally its loss and other scalars."""
    path = os.environ.get(PROGRESS_FILE_ENV)
    if not path:
        return
    doc: dict[str, Any] = {"step": int(step)}
    if loss is not None and math.isfinite(float(loss)):
        doc["loss"] = float(loss)
    clean = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
    if clean:
        doc["metrics"] = clean
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # progress is best effort; training goes on


def read_report(path: str) -> dict[str, Any] | None:
    """The last report written to ``path`` (None if none or unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("step"), int) else None
