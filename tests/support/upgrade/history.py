"""Files of an earlier commit of this repository, from the clone's own history: the older version the upgrade
and rollback tests hold the working tree against."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
OLDER = "ab5f88f"
"""The commit this wave started from (docs/install.md, "Upgrading and the CRD")."""


def extract(dest: Path, *paths: str, commit: str = OLDER) -> Path:
    """``paths`` as ``commit`` had them, written under ``dest`` (returned)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *paths], capture_output=True)
    assert archive.returncode == 0, (
        f"commit {commit} is not in this clone's history (shallow? `git fetch --unshallow`): {archive.stderr.decode()}"
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest
