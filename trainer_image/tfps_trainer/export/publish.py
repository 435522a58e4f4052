"""Atomic publishing of an export directory.

Layout under the job root::

    exports/
      .lock                  flock held by the running exporter (one export at a time per job)
      .tmp-<step>-<hex>/     staging: being written; never looks complete, removed on the next start
      <step>/                complete: appeared by rename(2) after every artifact passed verification
        manifest.json        written last, fsynced with everything else before the rename
      latest -> <step>       relative symlink to the highest complete step, swapped atomically
      LATEST                 the same step as text (for volumes without symlinks and for humans)
      serving/<step>/        TF Serving's layout (``<base>/<version>/saved_model.pb`` + ``variables/``):
                             point ``tensorflow_model_server --model_base_path`` at ``exports/serving``
      <step>/kserve/         a complete export's model as each KServe runtime reads it, one version per
                             base path (tfps_wire.serving_layout): an InferenceService's storage URI

``serving/<step>`` is a real directory holding the files of ``<step>/savedmodel`` (hard links, copies
where the volume has none), for each complete step with a SavedModel: no symbolic links, so the tree
reads the same through a ``subPath`` mount of ``exports/serving`` (a relative link would point outside it)
and to a copier that does not follow links. Every commit brings ``serving/`` in line with the complete
steps (a version whose export is gone or incomplete is removed, one missing is made), so a crash between
the rename and the serving version, or a link left by an older exporter, is repaired by the next export.

"Complete" means every required format passed (``"complete": true`` in the manifest); an export whose
required format failed is still published with what passed, but ``latest`` does not move to it.

``rename(2)`` within one directory is atomic on POSIX filesystems, so a reader sees either no
``exports/<step>`` or a complete one. The ``latest`` symlink is replaced by creating
``.latest-<hex>`` and renaming it over ``latest``; ``LATEST`` by writing ``.LATEST-<hex>`` and
renaming. Both exist because some volume types (SMB/Azure Files, some FUSE CSI drivers) reject
symlinks: there the symlink step is skipped and ``LATEST`` is the pointer.

Re-exporting a step that already has a complete export replaces it: the old directory is renamed
to ``.old-<step>-<hex>`` and deleted after the new one is in place (the only moment without an
``exports/<step>`` is between two renames).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tfps_wire import serving_layout
from tfps_wire.export_result import ExportError
from tfps_wire.safepaths import inside, refuse_symlinks

MANIFEST = "manifest.json"
LATEST_LINK = "latest"
LATEST_FILE = "LATEST"
SERVING_DIR = "serving"
SAVEDMODEL = "savedmodel"
SAVED_MODEL_PB = "saved_model.pb"
_STALE = re.compile(r"^\.(tmp|old)-\d+-[0-9a-f]+$|^\.(latest|LATEST|serving)-[0-9a-f]+$")


def manifest_complete(text: str | None) -> bool:
    """The rule every reader of an export applies, on a volume and in object storage: a step is published
    only when its ``manifest.json`` exists (written last: the commit marker), parses, and does not say
    ``"complete": false``. ``text`` is the manifest's content, None when there is none."""
    if text is None:
        return False
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("complete", True) is not False


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def fsync_tree(tree: Path) -> None:
    """fsync every file, then every directory bottom-up, then the tree itself."""
    for dirpath, _dirnames, filenames in os.walk(tree, topdown=False):
        for name in filenames:
            _fsync_path(Path(dirpath) / name)
        _fsync_path(Path(dirpath))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def link_tree(src: Path, dst: Path) -> None:
    """``dst`` as a new directory tree with the files of ``src``, each a hard link (a copy where the
    filesystem refuses links); ``src`` holds no symbolic links (the staged export was checked)."""
    for dirpath, _dirnames, filenames in os.walk(src):
        target = dst / Path(dirpath).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            try:
                os.link(Path(dirpath) / name, target / name)
            except OSError:
                shutil.copy2(Path(dirpath) / name, target / name)


def lay_out_for_kserve(stage: Path, step: int) -> list[str]:
    """In the staged export, each KServe runtime's model base path holding this one version
    (:mod:`tfps_wire.serving_layout`): ``kserve/tensorflow/<step>/`` with the SavedModel's files and
    ``kserve/triton/model/{config.pbtxt,<step>/model.onnx}``, as hard links (copies where the volume has
    none). Staged before the commit, so they are published with the export and before its manifest is
    visible. Returns the runtimes laid out."""
    done = []
    savedmodel, onnx = stage / SAVEDMODEL, stage / serving_layout.ONNX_FILE
    if (savedmodel / SAVED_MODEL_PB).is_file():
        link_tree(savedmodel, Path(serving_layout.version_dir(str(stage), "tensorflow", step)))
        done.append("tensorflow")
    if onnx.is_file():
        version = Path(serving_layout.version_dir(str(stage), "onnx", step))
        version.mkdir(parents=True)
        try:
            os.link(onnx, version / serving_layout.ONNX_FILE)
        except OSError:
            shutil.copy2(onnx, version / serving_layout.ONNX_FILE)
        (version.parent / serving_layout.TRITON_CONFIG).write_text(serving_layout.triton_config())
        done.append("onnx")
    return done


def clean_stale(exports: Path) -> list[str]:
    """Remove leftovers of interrupted exports (only names this module creates)."""
    removed = []
    serving = exports / SERVING_DIR
    entries = [*exports.iterdir(), *(serving.iterdir() if serving.is_dir() and not serving.is_symlink() else [])]
    for entry in sorted(entries):
        if _STALE.match(entry.name):
            _remove(entry)
            removed.append(entry.relative_to(exports).as_posix())
    return removed


class Publisher:
    """Owns ``<root>/exports`` for the duration of one export (``with Publisher(root) as pub``)."""

    def __init__(self, root: str | Path, exports_rel: str = "exports") -> None:
        self.root = Path(os.path.realpath(root))
        self.exports = inside(self.root, exports_rel, "exports directory")
        self._lock_fd: int | None = None
        self.stale_removed: list[str] = []

    def __enter__(self) -> Publisher:
        try:
            self.exports.mkdir(parents=True, exist_ok=True)
            inside(self.root, self.exports, "exports directory", must_exist=True)
            self._lock_fd = os.open(self.exports / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ExportError("PublishFailed", f"another exporter holds {self.exports / '.lock'}") from None
            self.stale_removed = clean_stale(self.exports)
        except OSError as exc:
            self._unlock()
            raise ExportError("PublishFailed", f"cannot prepare {self.exports}: {exc}") from None
        except ExportError:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextmanager
    def staging(self, step: int) -> Iterator[Path]:
        """A fresh ``.tmp-<step>-<hex>`` directory, removed on exit unless :meth:`commit` moved it."""
        path = self.exports / f".tmp-{step}-{secrets.token_hex(4)}"
        path.mkdir()
        try:
            yield path
        finally:
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)

    def commit(self, staging: Path, step: int) -> Path:
        """Rename the verified ``staging`` to ``exports/<step>``, bring ``serving/`` in line (:meth:`sync_serving`)
        and repoint ``latest``."""
        refuse_symlinks(staging, "staged export")
        if not (staging / MANIFEST).is_file():
            raise ExportError("PublishFailed", f"{staging} has no {MANIFEST}; refusing to publish it")
        final = self.exports / str(step)
        try:
            fsync_tree(staging)
            old = None
            if final.is_symlink() or (final.exists() and not final.is_dir()):
                raise ExportError("UnsafePath", f"{final} exists and is not a directory; refusing to replace it")
            if final.exists():
                old = self.exports / f".old-{step}-{secrets.token_hex(4)}"
                os.rename(final, old)
            os.rename(staging, final)
            _fsync_path(self.exports)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            self.sync_serving(renewed=step)
            self.update_latest()
        except OSError as exc:
            raise ExportError("PublishFailed", f"cannot publish {final}: {exc}") from None
        return final

    def sync_serving(self, renewed: int | None = None) -> list[int]:
        """``serving/<n>`` for every complete step ``n`` whose export holds a SavedModel, and nothing else:
        a missing version is made, a symbolic link (an older exporter's) replaced by a real directory, a
        version whose export is gone or incomplete removed; ``renewed`` (the step just re-published) is made
        again. Returns the versions."""
        base = self.exports / SERVING_DIR
        wanted = [n for n in self.complete_steps() if (self.exports / str(n) / SAVEDMODEL / SAVED_MODEL_PB).is_file()]
        if not wanted and not base.is_dir():
            return []
        if base.is_symlink() or (base.exists() and not base.is_dir()):
            raise ExportError("UnsafePath", f"{base} exists and is not a directory; refusing to use it")
        base.mkdir(exist_ok=True)
        for entry in base.iterdir():
            if entry.name.isdigit() and int(entry.name) not in wanted:
                _remove(entry)
        for n in wanted:
            version = base / str(n)
            if n == renewed or version.is_symlink() or not version.is_dir():
                self._serving_version(self.exports / str(n) / SAVEDMODEL, version)
        _fsync_path(base)
        return wanted

    def _serving_version(self, savedmodel: Path, version: Path) -> None:
        """``version`` made anew as a real directory with the files of ``savedmodel``, swapped into place."""
        tmp = version.with_name(f".serving-{secrets.token_hex(4)}")
        link_tree(savedmodel, tmp)
        fsync_tree(tmp)
        if version.is_dir() and not version.is_symlink():
            self._swap(tmp, version)
        else:
            if version.is_symlink() or version.exists():
                version.unlink()
            os.rename(tmp, version)

    @staticmethod
    def _swap(new: Path, old: Path) -> None:
        """Replace the directory ``old`` (a version made earlier) by ``new``."""
        gone = old.with_name(f".serving-{secrets.token_hex(4)}")
        os.rename(old, gone)
        os.rename(new, old)
        shutil.rmtree(gone, ignore_errors=True)

    def complete_steps(self) -> list[int]:
        """Steps whose export is published and has every required format (the manifest's ``complete``)."""
        steps = []
        for entry in self.exports.iterdir():
            if entry.name.isdigit() and not entry.is_symlink() and (entry / MANIFEST).is_file():
                try:
                    text = (entry / MANIFEST).read_text()
                except OSError:
                    continue
                if manifest_complete(text):
                    steps.append(int(entry.name))
        return sorted(steps)

    def update_latest(self) -> int | None:
        """Point ``latest`` and ``LATEST`` at the highest complete step; returns it."""
        steps = self.complete_steps()
        if not steps:
            return None
        newest = steps[-1]
        link = self.exports / LATEST_LINK
        if link.exists() and not link.is_symlink():
            raise ExportError("UnsafePath", f"{link} exists and is not a symlink; refusing to replace it")
        tmp_link = self.exports / f".latest-{secrets.token_hex(4)}"
        try:
            os.symlink(str(newest), tmp_link)
            os.replace(tmp_link, link)
        except OSError:  # volume without symlinks: LATEST below is the pointer
            if tmp_link.is_symlink():
                tmp_link.unlink()
        tmp_file = self.exports / f".LATEST-{secrets.token_hex(4)}"
        with open(tmp_file, "w", encoding="utf-8") as fh:
            fh.write(f"{newest}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_file, self.exports / LATEST_FILE)
        _fsync_path(self.exports)
        return newest
