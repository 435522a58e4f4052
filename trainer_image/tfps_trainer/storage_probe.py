"""The probe of :mod:`tfps_wire.storage_check`, run in a child process (``python -m tfps_trainer.storage_probe
ROOT``): writes, reads back and deletes one object under ROOT with TensorFlow's GCS filesystem and prints the
verdict in that module's line protocol (``imported``, then ``ok`` or ``<kind>: <message>``)."""

from __future__ import annotations

import os
import secrets
import sys

from tfps_wire.storage_check import READY, StorageProblem
from tfps_wire.uri import bucket, join


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def probe(root: str) -> None:
    """In this process: the bucket exists, and an object written under ``root`` reads back the same and is
    deleted. Raises :class:`StorageProblem`."""
    import tensorflow as tf

    print(READY, flush=True)  # the parent's deadline starts now

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
        print("usage: python -m tfps_trainer.storage_probe gs://BUCKET[/PREFIX]", file=sys.stderr)
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
