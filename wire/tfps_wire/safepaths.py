"""Path rules for everything the exporter reads or writes.

All paths live under the job root. We refuse: ``..`` components, absolute paths where a relative
one is expected, and symlinks anywhere between the job root and the target (a symlink planted in
a shared volume must not redirect our writes or deletions elsewhere).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from .export_result import ExportError


def at_or_under(path: str, directory: str) -> bool:
    """Whether POSIX ``path`` is ``directory`` or inside it (by its components: ``/trainlogs`` is not under
    ``/train``)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def check_absolute(path: str, what: str) -> str:
    """``path`` must be an absolute POSIX path without ``.`` or ``..`` components; returns it."""
    p = PurePosixPath(path)
    if not p.is_absolute() or "\\" in path or any(part in (".", "..") for part in path.split("/")):
        raise ExportError("UnsafePath", f"{what}: {path!r} must be an absolute path without '.' or '..'")
    return path


def check_relative(rel: str, what: str) -> str:
    """``rel`` must be a plain relative POSIX path without ``..``; returns it normalised."""
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or "\\" in rel:
        raise ExportError("UnsafePath", f"{what}: {rel!r} must be a relative path inside the job root")
    if any(part in ("..", "") for part in p.parts):
        raise ExportError("UnsafePath", f"{what}: {rel!r} must not contain '..'")
    return str(p)


def inside(root: Path | str, target: Path | str, what: str, *, must_exist: bool = False) -> Path:
    """Return ``target`` as an absolute path under the resolved ``root``, refusing escapes.

    ``target`` is relative to ``root`` or absolute (spelled under ``root`` or its resolved form).
    ``root`` itself may sit behind symlinks (mount points); nothing below it may be one.
    """
    raw_root = Path(os.path.abspath(root))
    real_root = Path(os.path.realpath(root))
    t = Path(target)
    if ".." in t.parts:
        raise ExportError("UnsafePath", f"{what}: {str(target)!r} must not contain '..'")
    if t.is_absolute():
        for base in (raw_root, real_root):
            try:
                rel = Path(os.path.normpath(t)).relative_to(base)
                break
            except ValueError:
                continue
        else:
            raise ExportError("UnsafePath", f"{what}: {str(target)!r} is outside the job root {str(raw_root)!r}")
    else:
        rel = Path(os.path.normpath(t)) if str(t) not in ("", ".") else Path()
    current = real_root
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise ExportError("UnsafePath", f"{what}: {str(current)!r} is a symlink; refusing to follow it")
        if not current.exists():
            if must_exist:
                raise ExportError("UnsafePath", f"{what}: {str(current)!r} does not exist")
            break
    return real_root / rel


def refuse_symlinks(tree: Path, what: str) -> None:
    """Refuse a directory tree (about to be published) that contains any symlink or special file."""
    for dirpath, dirnames, filenames in os.walk(tree, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                raise ExportError("UnsafePath", f"{what}: {str(p)!r} is a symlink; refusing to publish it")
            if not (p.is_dir() or p.is_file()):
                raise ExportError("UnsafePath", f"{what}: {str(p)!r} is not a regular file")
