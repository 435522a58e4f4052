"""The check at start that object storage is usable, before any training: bucket, permission, endpoint.

TensorFlow's GCS filesystem retries a failing request ten times (about 195 s) and a ``makedirs`` in a
bucket that does not exist forever. So the check runs TensorFlow in a child process
(``python -m tfps_trainer.storage_check ROOT``) with ``GCS_RETRY_CONFIG_MAX_RETRIES`` lowered and a
deadline: the training process keeps the default retries, the check fails in seconds with the bucket
named. TF-free at import (the local runner imports :func:`check`); TensorFlow loads in the child only.

The child prints ``imported`` once TensorFlow is loaded (the deadline counts from there), then one line:
``ok`` or ``<kind>: <message>`` where kind is ``MissingBucket``,
``PermissionDenied`` or ``Unreachable``.
"""

from __future__ import annotations

import os
import queue
import secrets
import subprocess
import sys
import threading
from typing import IO

from .uri import bucket, is_uri, join

CHECK_RETRIES = 2
"""``GCS_RETRY_CONFIG_MAX_RETRIES`` in the check's process (TensorFlow's default: 10)."""
CHECK_TIMEOUT_S = 120.0
"""Deadline of the probe, counted once TensorFlow is imported in the child (the probe takes well under
10 s even when the endpoint is unreachable, with two retries)."""
IMPORT_TIMEOUT_S = 900.0
"""Deadline of TensorFlow's import in the child: seconds on an idle machine, minutes on a starved one."""
_READY = "imported"
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
        [python, "-m", "tfps_trainer.storage_check", root],
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
        line = lines.get(timeout=timeout) if first == _READY else first
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


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def probe(root: str) -> None:
    """In this process: the bucket exists, and an object written under ``root`` reads back the same and is
    deleted. Raises :class:`StorageProblem`."""
    import tensorflow as tf

    print(_READY, flush=True)  # the parent's deadline starts now

    name = bucket(root)
    where = f"bucket {name!r} ({root})"
    try:
        if not tf.io.gfile.exists(f"gs://{name}"):
            raise StorageProblem("MissingBucket", f"{where} does not exist; create it or fix spec.storage.uri")
        path = join(root, f".tfps-check-{secrets.token_hex(4)}")
        payload = secrets.token_bytes(64)
        with tf.io.gfile.GFile(path, "wb") as fh:
            fh.write(payload)
        with tf.io.gfile.GFile(path, "rb") as fh:
            back = fh.read()
        tf.io.gfile.remove(path)
    except StorageProblem:
        raise
    except tf.errors.PermissionDeniedError as exc:
        raise StorageProblem("PermissionDenied", f"{where}: {_first_line(exc)}") from None
    except tf.errors.NotFoundError as exc:
        raise StorageProblem("MissingBucket", f"{where}: {_first_line(exc)}") from None
    except (tf.errors.OpError, OSError) as exc:
        raise StorageProblem("Unreachable", f"{where}: {type(exc).__name__}: {_first_line(exc)}") from None
    if back != payload:
        raise StorageProblem("Unreachable", f"{where}: an object written there read back different bytes")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tfps_trainer.storage_check gs://BUCKET[/PREFIX]", file=sys.stderr)
        return 2
    try:
        probe(argv[0])
    except StorageProblem as exc:
        print(f"{exc.kind}: {exc.message}", flush=True)
        return 1
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # TensorFlow's interpreter teardown is slow and adds nothing here
