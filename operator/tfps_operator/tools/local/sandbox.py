"""A local process's own mount namespace, with its pod's volumes (:mod:`.volumes`) at their mount paths.

The process is started as ``unshare --mount --propagation private [--user --map-root-user] python -I
mountns.py SPEC -- ARGV``: util-linux's ``unshare`` makes the namespace (a user namespace too where this is
not root, so that an ordinary user may mount in it), :mod:`.mountns` binds the volumes and becomes ARGV. The
process keeps its pid, its process group and its signals.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .volumes import RoleVolumes

MOUNTNS = str(Path(__file__).with_name("mountns.py"))
ROOTS_DIR = "root"
"""Under ``<job dir>/local``: one empty directory per process, where its new root is mounted (privately)."""


def unshare_argv() -> list[str]:
    argv = ["unshare", "--mount", "--propagation", "private"]
    return argv if os.geteuid() == 0 else [*argv, "--user", "--map-root-user"]


def probe() -> str | None:
    """Why this machine cannot give a process a mount namespace of its own (None when it can)."""
    if shutil.which("unshare") is None:
        return "util-linux's unshare is not installed"
    try:
        done = subprocess.run([*unshare_argv(), "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(unshare_argv())} failed: {exc}"
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
        return f"{' '.join(unshare_argv())} true: {why}"
    return None


def wrap(argv: list[str], volumes: RoleVolumes, task: str, local_dir: Path) -> list[str]:
    """``argv`` started in its own mount namespace with ``volumes`` bound for ``task``."""
    spec = {
        "root": str(local_dir / ROOTS_DIR / task),
        "binds": [b.to_wire() for b in volumes.for_task(task)],
    }
    return [*unshare_argv(), sys.executable, "-I", MOUNTNS, json.dumps(spec), "--", *argv]


def prepare(volumes: RoleVolumes, task: str, local_dir: Path) -> None:
    """Before each start of ``task``: its claims' directories exist (kept), its emptyDirs are empty, its
    ConfigMap and Secret files are written afresh, and its new root's mount point is an empty directory."""
    for claim in volumes.claims:
        Path(claim).mkdir(parents=True, exist_ok=True)
    for empty in volumes.empty_dirs:
        d = Path(empty.replace("{task}", task))
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    for directory, files in volumes.files.items():
        d = Path(directory)
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for f in files:
            path = d / f.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f.data)
            path.chmod(f.mode & 0o777)
    (local_dir / ROOTS_DIR / task).mkdir(parents=True, exist_ok=True)
