"""The check at start that object storage is usable, before any training: bucket, permission, endpoint;
the parent's side, and the line protocol between it and the probe.

TensorFlow's GCS filesystem retries a failing request ten times (about 195 s) and a ``makedirs`` in a
bucket that does not exist forever. So the check runs TensorFlow in a child process
(``python -m tfps_trainer.storage_probe ROOT``) with ``GCS_RETRY_CONFIG_MAX_RETRIES`` lowered and a
deadline: the training process keeps the default retries, the check fails in seconds with the bucket
named. This module is TF-free (the local runner and the chief call :func:`check`); TensorFlow loads in the
child only.

The child prints ``imported`` once TensorFlow is loaded (the deadline counts from there), then one line:
``ok`` or ``<kind>: <message>`` where kind is ``MissingBucket``,
``PermissionDenied`` or ``Unreachable``.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from typing import IO

from .uri import bucket, is_uri

CHECK_RETRIES = 2
"""``GCS_RETRY_CONFIG_MAX_RETRIES`` in the check's process (TensorFlow's default: 10)."""
CHECK_TIMEOUT_S = 120.0
"""Deadline of the probe, counted once TensorFlow is imported in the child (the probe takes well under
10 s even when the endpoint is unreachable, with two retries)."""
IMPORT_TIMEOUT_S = 900.0
"""Deadline of TensorFlow's import in the child: seconds on an idle machine, minutes on a starved one."""
READY = "imported"
"""The probe's first line, once TensorFlow is imported: its deadline counts from there."""
KINDS = ("MissingBucket", "PermissionDenied", "Unreachable")
PERMANENT = ("MissingBucket", "PermissionDenied")
"""Kinds a restart does not fix."""


class StorageProblem(Exception):
    """The job's storage cannot be used; ``kind`` is one of :data:`KINDS`, the message names the bucket."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


def check(root: str, timeout: float = CHECK_TIMEOUT_S, python: str = sys.executable) -> None:
    """Raise :class:`StorageProblem` when ``root`` (a ``gs://`` URI) cannot be written and read back;
    a local path is not checked here (the trainer's own errors name the OS reason)."""
    if not is_uri(root):
        return
    env = {**os.environ, "GCS_RETRY_CONFIG_MAX_RETRIES": str(CHECK_RETRIES), "TF_CPP_MIN_LOG_LEVEL": "2"}
    where = f"bucket {bucket(root)!r} ({root})"
    proc = subprocess.Popen(
        [python, "-m", "tfps_trainer.storage_probe", root],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    err: list[str] = []
    threading.Thread(target=_pump_into, args=(proc.stderr, err), daemon=True).start()
    try:
        first = lines.get(timeout=IMPORT_TIMEOUT_S)
        line = lines.get(timeout=timeout) if first == READY else first
    except queue.Empty:
        proc.kill()
        raise StorageProblem("Unreachable", f"{where}: no answer within {timeout:.0f}s") from None
    finally:
        if proc.poll() is None:  # the verdict is in (or the deadline passed): the child's teardown is not waited for
            proc.kill()
            proc.wait()
    if line == "ok":
        return
    kind, _, message = (line or "").partition(": ")
    if kind not in KINDS:
        tail = " ".join("".join(err).strip().splitlines()[-3:])[-400:]
        raise StorageProblem("Unreachable", f"{where}: the check failed (exit {proc.returncode}): {tail or line}")
    raise StorageProblem(kind, message)


def _pump(stream: IO[str] | None, out: queue.Queue[str | None]) -> None:
    assert stream is not None
    for raw in stream:
        out.put(raw.strip())
    out.put(None)


def _pump_into(stream: IO[str] | None, out: list[str]) -> None:
    assert stream is not None
    out.extend(stream)
