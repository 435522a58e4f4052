"""Publishing an export to object storage (``gs://``), where there is no rename.

Layout under the job root, the same names as on a volume (:mod:`.publish`)::

    exports/
      <step>/              each artifact written straight here, then read back and checked (SHA-256)
        manifest.json      written LAST, read back too: the commit marker of the step
      serving/<step>/      TF Serving's layout: the files of <step>/savedmodel as objects of their own
                           (saved_model.pb, variables/...), for a complete export with a SavedModel;
                           written before the step's manifest, saved_model.pb last
      LATEST               the highest complete step as text, rewritten after the manifest

A reader trusts a ``<step>/`` only when it holds a ``manifest.json`` (:func:`.publish.manifest_complete`:
the same rule as on a volume), and a ``serving/<step>/`` only when that manifest does: both are written
before it. An interrupted export leaves a prefix without one, which readers ignore and the next export
deletes (its ``serving/<step>/`` too). Within a version ``saved_model.pb`` comes last, so a server polling
``exports/serving`` while it is uploaded finds no SavedModel in it (TensorFlow's loader refuses the
version with NotFound), never one with part of its variables. There is no ``latest`` link (object stores
have no links): ``LATEST`` is the pointer.

``gs://<bucket>/<root>/exports/serving`` is a model base path as TensorFlow Serving reads it
(``<base>/<version>/saved_model.pb``, version = step), and as KServe's storage initializer copies it
(every object under the prefix, at its path relative to it).

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

from .publish import LATEST_FILE, MANIFEST, SAVED_MODEL_PB, SAVEDMODEL, SERVING_DIR, manifest_complete

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
        self.serving = join(self.exports, SERVING_DIR)
        self.stale_removed: list[str] = []

    def step_prefixes(self) -> list[str]:
        return [n for n in _children(self.exports) if n.isdigit()]

    def serving_versions(self) -> list[str]:
        return [n for n in _children(self.serving) if n.isdigit()]

    def clean_incomplete(self) -> list[str]:
        """Delete what an interrupted export left: step prefixes without a manifest, and serving versions
        whose step has no complete manifest. Returns their names relative to ``exports/``."""
        removed = []
        for name in self.step_prefixes():
            prefix = join(self.exports, name)
            if not tf.io.gfile.exists(join(prefix, MANIFEST)):
                tf.io.gfile.rmtree(prefix)
                removed.append(name)
        complete = {str(n) for n in self.complete_steps()}
        for name in self.serving_versions():
            if name not in complete:
                tf.io.gfile.rmtree(join(self.serving, name))
                removed.append(f"{SERVING_DIR}/{name}")
        self.stale_removed = removed
        return removed

    def _upload(self, local: Path, uri: str) -> None:
        tf.io.gfile.copy(str(local), uri, overwrite=True)
        want, got = _sha256_local(local), _sha256_remote(uri)
        if want != got:
            raise ExportError(
                "PublishFailed", f"{uri} read back differs from what was written (sha256 {got[:12]} != {want[:12]})"
            )

    def _upload_tree(self, local: Path, uri: str, last: str | None = None, skip: str | None = None) -> None:
        """Every file under ``local`` (but ``skip``) to ``uri/<relative path>``, ``last`` after the others."""
        files = sorted(
            (p.relative_to(local).as_posix(), p)
            for p in local.rglob("*")
            if p.is_file() and not p.is_symlink() and p.name != ".lock"
        )
        for rel, path in sorted(files, key=lambda f: f[0] == last):
            if rel != skip:
                self._upload(path, join(uri, rel))

    def publish(self, stage: Path, step: int, serving: bool = False) -> str:
        """Upload the verified ``stage`` to ``exports/<step>/``: every file, each read back; with ``serving``
        its SavedModel to ``serving/<step>/`` (``saved_model.pb`` last); then the manifest, then ``LATEST``.
        Returns the step's URI. An earlier export of the same step is deleted first, its serving version
        before it (from that moment neither has a manifest to vouch for it)."""
        if not (stage / MANIFEST).is_file():
            raise ExportError("PublishFailed", f"{stage} has no {MANIFEST}; refusing to publish it")
        final, version = join(self.exports, str(step)), join(self.serving, str(step))
        try:
            if tf.io.gfile.exists(join(final, MANIFEST)):  # first: no reader trusts what is deleted next
                tf.io.gfile.remove(join(final, MANIFEST))
            for prefix in (version, final):
                if tf.io.gfile.exists(prefix):
                    tf.io.gfile.rmtree(prefix)
            self._upload_tree(stage, final, skip=MANIFEST)
            if serving:
                self._upload_tree(stage / SAVEDMODEL, version, last=SAVED_MODEL_PB)
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
