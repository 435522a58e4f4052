"""Nothing installs from inside hack/netns-run: each tier's tool lookup, run in that namespace with the
tool hidden, fails with the reason and the command to run beforehand, not with an apt or resolver error.

A real namespace each time (``hack/netns-run``, loopback only); the tool is hidden by taking Chromium
off ``PATH`` (apt-get left on it, so only the guard stops an install) or by an empty ``TFPS_CACHE``
(so the Go builds would start from the module proxy).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
NETNS_RUN = REPO / "hack" / "netns-run"
REASON = "runs inside hack/netns-run (loopback only"


def _in_netns(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(NETNS_RUN), "env", *(f"{k}={v}" for k, v in (env or {}).items()), *cmd],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    if proc.returncode == 2 and "cannot create a network namespace" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    return proc


def _path_without(tmp_path: Path, hidden: set[str]) -> str:
    """A one-directory PATH holding every command of this PATH except ``hidden``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = os.path.join(d, name)
            if name in hidden or (bin_dir / name).exists() or not os.access(target, os.X_OK):
                continue
            (bin_dir / name).symlink_to(target)
    return str(bin_dir)


def test_chromium_is_not_installed_inside_the_namespace(tmp_path: Path) -> None:
    path = _path_without(tmp_path, {"chromium", "chromium-browser"})
    if shutil.which("apt-get"):
        assert shutil.which("apt-get", path=path), "apt-get must stay visible: only the guard may stop the install"
    proc = _in_netns(str(REPO / "hack" / "chromium"), env={"PATH": path})
    assert proc.returncode == 1, proc
    assert REASON in proc.stderr and "`hack/tools tf`" in proc.stderr, proc.stderr
    assert "Reading package lists" not in proc.stderr and "apt-get install" not in proc.stderr, proc.stderr


def test_the_object_storage_emulator_is_not_built_inside_the_namespace(tmp_path: Path) -> None:
    proc = _in_netns(str(REPO / "hack" / "gcs-emulator"), "bin", env={"TFPS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1, proc
    assert "fake-gcs-server" in proc.stderr and REASON in proc.stderr and "`hack/tools tf`" in proc.stderr
    assert not (tmp_path / "cache" / "fake-gcs-server").exists(), "nothing may start building"


def test_the_control_plane_is_not_built_inside_the_namespace(tmp_path: Path) -> None:
    proc = _in_netns(str(REPO / "hack" / "cluster"), "build", env={"TFPS_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 1, proc
    assert "Kubernetes" in proc.stderr and REASON in proc.stderr and "`hack/tools cluster`" in proc.stderr
    assert not (tmp_path / "cache" / "k8s").exists(), "nothing may start building"


def test_the_guard_lets_installs_run_outside_the_namespace() -> None:
    script = f"source {REPO}/hack/lib/offline.sh; require_network tool 'hack/tools tf' && echo allowed"
    outside = subprocess.run(
        ["env", "-u", "TFPS_IN_NETNS", "bash", "-c", script], capture_output=True, text=True, timeout=30
    )
    assert outside.returncode == 0 and "allowed" in outside.stdout, outside
