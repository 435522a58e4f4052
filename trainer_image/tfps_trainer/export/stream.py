"""Stream an export out of object storage as a tar on stdout, for ``tfps artifacts --download`` of a job
whose storage is ``gs://``: the client's reader pod runs ``python -m tfps_trainer.export.stream`` with the
chief's storage settings (credentials, proxy, CA) and the client unpacks and checks the tar against its
``manifest.json`` exactly as it does a volume's ``tar``.

    python -m tfps_trainer.export.stream cat URI   the object's bytes
    python -m tfps_trainer.export.stream tar URI   every object under the prefix URI/, names relative to it

A missing object or an empty prefix exits 1 with ``No such file: URI`` on stderr (the words the client
looks for, as with ``tar`` on a volume).
"""

from __future__ import annotations

import io
import sys
import tarfile
from typing import BinaryIO

import tensorflow as tf


def _read(uri: str) -> bytes:
    with tf.io.gfile.GFile(uri, "rb") as fh:
        data: bytes = fh.read()
        return data


def files_under(prefix: str) -> list[str]:
    """Paths of every object under ``prefix/``, relative to it, sorted."""
    root = prefix.rstrip("/")
    out = []
    for directory, _, files in tf.io.gfile.walk(root):
        rel = directory.rstrip("/")[len(root) :].lstrip("/")
        out += [f"{rel}/{f}" if rel else f for f in files]
    return sorted(out)


def write_tar(prefix: str, out: BinaryIO) -> int:
    """A tar of every object under ``prefix/`` (regular files, mode 0644) on ``out``; the count."""
    names = files_under(prefix)
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for name in names:
            data = _read(f"{prefix.rstrip('/')}/{name}")
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return len(names)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("cat", "tar"):
        print("usage: python -m tfps_trainer.export.stream cat|tar URI", file=sys.stderr)
        return 2
    verb, uri = args
    if verb == "cat":
        if not tf.io.gfile.exists(uri):
            print(f"No such file: {uri}", file=sys.stderr)
            return 1
        sys.stdout.buffer.write(_read(uri))
    elif write_tar(uri, sys.stdout.buffer) == 0:
        print(f"No such file: {uri}/ holds no object", file=sys.stderr)
        return 1
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
