"""Run a command with directories bound at given paths, in this process's own mount namespace.

``python -I mountns.py SPEC -- COMMAND...`` runs as a plain script (the standard library only, nothing of
tfps is imported), started by ``unshare --mount --propagation private`` (with ``--user --map-root-user`` for
a user other than root), so every mount below is private to the command and ends with it. SPEC (JSON):
``{"root": DIR, "binds": [{"source", "target", "readOnly"}]}``; ``root`` is an empty directory of the work
directory.

A mount path the machine lacks (``/train``) needs a directory to mount on, and creating it would write into
the machine's own tree. So the command gets a new root instead: a tmpfs at ``root``, holding a bind of each
entry of the machine's ``/`` (symbolic links copied as links), except the directories on the way to a
missing mount path, which are made in the tmpfs and filled the same way, one level down. The binds go on
top, then the command runs chrooted there, in the same working directory. The machine's tree is never
written; the command sees it all, plus its volumes.

Exit codes: the command's own (this process becomes it: the same pid, the same signals); 126 when the
namespace cannot be set up, with the reason on stderr.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
SETUP_FAILED = 126

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    def b(s: str | None) -> bytes | None:
        return None if s is None else os.fsencode(s)

    if _libc.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), b(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source or fstype} on {target}: {os.strerror(err)}")


def shadowed(targets: list[str]) -> set[str]:
    """The directories made in the tmpfs rather than bound: every ancestor of a mount path the machine lacks
    (``/`` always: the new root itself)."""
    out = {"/"}
    for target in targets:
        if os.path.lexists(target):
            continue
        parent = os.path.dirname(target.rstrip("/"))
        while parent not in out:
            out.add(parent)
            parent = os.path.dirname(parent)
    return out


def _populate(host_dir: str, root: str, shadow: set[str]) -> None:
    """Make ``root + host_dir`` show what ``host_dir`` holds: binds, links, and shadowed directories filled
    one level down."""
    for entry in os.scandir(host_dir):
        host = entry.path
        new = root + host
        if entry.is_symlink():
            os.symlink(os.readlink(host), new)
        elif host in shadow and entry.is_dir(follow_symlinks=False):
            os.mkdir(new, 0o755)
            _populate(host, root, shadow)
        elif entry.is_dir(follow_symlinks=False):
            os.mkdir(new, 0o755)
            _mount(host, new, flags=MS_BIND | MS_REC)
        else:
            with open(new, "wb"):
                pass
            _mount(host, new, flags=MS_BIND)


def setup(root: str, binds: list[dict]) -> None:
    """The new root at ``root`` with ``binds`` on top (see the module's docstring)."""
    _mount("tfps-root", root, "tmpfs", 0, "mode=0755")
    _populate("/", root, shadowed([b["target"] for b in binds]))
    for b in binds:
        source, target = b["source"], root + b["target"]
        if os.path.isfile(source):  # a subPath naming one file of a volume
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                with open(target, "wb"):
                    pass
        else:  # a directory of the work directory: a subPath the kubelet would create
            os.makedirs(source, exist_ok=True)
            os.makedirs(target, exist_ok=True)
        _mount(source, target, flags=MS_BIND | MS_REC)
        if b.get("readOnly"):
            _mount(None, target, flags=MS_REMOUNT | MS_BIND | MS_RDONLY)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: mountns.py SPEC -- COMMAND...", file=sys.stderr)
        return SETUP_FAILED
    spec = json.loads(argv[1])
    cwd = os.getcwd()
    try:
        setup(spec["root"], spec["binds"])
        os.chroot(spec["root"])
        os.chdir(cwd if os.path.isdir(cwd) else "/")
    except OSError as exc:
        print(f"tfps run: cannot give the process its volumes: {exc}", file=sys.stderr)
        return SETUP_FAILED
    try:
        os.execvp(argv[3], argv[3:])
    except OSError as exc:
        print(f"tfps run: cannot start {argv[3]}: {exc.strerror or exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
