"""Publishing an export to object storage (``gs://``), where there is no rename.

Layout under the job root, the same names as on a volume (:mod:`.publish`)::

    exports/
      <step>/              each artifact written straight here, then read back and checked (SHA-256)
        manifest.json      written LAST, read back too: the commit marker
      LATEST               the highest complete step as text, rewritten after the manifest

A reader trusts a ``<step>/`` only when it holds a ``manifest.json`` (:func:`.publish.manifest_complete`:
the same rule as on a volume); an interrupted export leaves a prefix without one, which readers ignore
and the next export deletes. There is no ``latest`` symlink and no ``serving/`` tree (object stores have
no links): TensorFlow Serving takes ``exports/<step>/savedmodel`` directly.

The exporter builds and verifies everything in a local staging directory first (as on a volume), so
only verified files are uploaded. An upload is checked by reading the object back: a store (or an
emulator) that acknowledged a cut upload as an empty object is caught here, not by a later reader.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import tensorflow as tf

from tfps_wire.export_result import ExportError
from tfps_wire.uri import join

from .publish import LATEST_FILE, MANIFEST, manifest_complete

log = logging.getLogger(__name__)
_CHUNK = 8 << 20


def _sha256_local(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _sha256_remote(uri: str) -> str:
    h = hashlib.sha256()
    with tf.io.gfile.GFile(uri, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _children(uri: str) -> list[str]:
    """Names directly under ``uri`` (sub-prefixes without their trailing slash); [] when there is none."""
    if not tf.io.gfile.isdir(uri):
        return []
    return sorted({name.rstrip("/") for name in tf.io.gfile.listdir(uri)})


def _read_text(uri: str) -> str | None:
    try:
        with tf.io.gfile.GFile(uri, "r") as fh:
            text: str = fh.read()
            return text
    except tf.errors.NotFoundError:
        return None


class ObjectPublisher:
    """Owns ``<root>/exports`` in object storage for one export."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self.exports = join(self.root, "exports")
        self.stale_removed: list[str] = []

    def step_prefixes(self) -> list[str]:
        return [n for n in _children(self.exports) if n.isdigit()]

    def clean_incomplete(self) -> list[str]:
        """Delete the step prefixes an interrupted export left (no manifest); returns their names."""
        removed = []
        for name in self.step_prefixes():
            prefix = join(self.exports, name)
            if not tf.io.gfile.exists(join(prefix, MANIFEST)):
                tf.io.gfile.rmtree(prefix)
                removed.append(name)
        self.stale_removed = removed
        return removed

    def _upload(self, local: Path, uri: str) -> None:
        tf.io.gfile.copy(str(local), uri, overwrite=True)
        want, got = _sha256_local(local), _sha256_remote(uri)
        if want != got:
            raise ExportError(
                "PublishFailed", f"{uri} read back differs from what was written (sha256 {got[:12]} != {want[:12]})"
            )

    def publish(self, stage: Path, step: int) -> str:
        """Upload the verified ``stage`` to ``exports/<step>/``: every file, each read back, then the manifest,
        then ``LATEST``. Returns the step's URI. An earlier export of the same step is deleted first (its
        prefix has no manifest from that moment, so no reader trusts a mix of the two)."""
        if not (stage / MANIFEST).is_file():
            raise ExportError("PublishFailed", f"{stage} has no {MANIFEST}; refusing to publish it")
        final = join(self.exports, str(step))
        files = sorted(p for p in stage.rglob("*") if p.is_file() and not p.is_symlink() and p.name != ".lock")
        try:
            if tf.io.gfile.exists(final):
                tf.io.gfile.rmtree(final)
            for path in files:
                rel = path.relative_to(stage).as_posix()
                if rel != MANIFEST:
                    self._upload(path, join(final, rel))
            self._upload(stage / MANIFEST, join(final, MANIFEST))
            self.update_latest()
        except tf.errors.OpError as exc:
            raise ExportError("PublishFailed", f"cannot publish {final}: {type(exc).__name__}: {exc.message}") from None
        return final

    def complete_steps(self) -> list[int]:
        """Steps whose manifest exists and says complete (the rule readers share, :func:`manifest_complete`)."""
        return sorted(
            int(n) for n in self.step_prefixes() if manifest_complete(_read_text(join(self.exports, n, MANIFEST)))
        )

    def update_latest(self) -> int | None:
        """Write ``LATEST`` (one object, replaced whole) with the highest complete step; returns it."""
        steps = self.complete_steps()
        if not steps:
            return None
        with tf.io.gfile.GFile(join(self.exports, LATEST_FILE), "w") as fh:
            fh.write(f"{steps[-1]}\n")
        return steps[-1]
