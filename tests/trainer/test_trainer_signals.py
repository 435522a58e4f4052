"""A trainer process stopped while it starts up ends at once, also as PID 1 (as in a container, where
the kernel drops a signal PID 1 has no handler for: the pod would wait out its grace period)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainer_cluster import LocalCluster, make_settings

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1) for a PID namespace")
@pytest.mark.parametrize("role", ["ps", "chief"])
def test_sigterm_during_startup_ends_a_pid_1_trainer(tmp_path: Path, role: str) -> None:
    cluster = LocalCluster(tmp_path / "procs", make_settings(tmp_path / "job"))
    # unshare forks the trainer as PID 1 of a new PID namespace and passes a signal on to it.
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-m", "tfps_trainer"],
        env=cluster.env(role, 0),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    time.sleep(1.0)  # inside the TensorFlow import: no role's handler yet
    child = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert child, "the trainer did not start"
    subprocess.run(["kill", "-TERM", child[0]], check=True)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("a PID 1 trainer ignored SIGTERM during start-up")
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read()[-2000:] if proc.stderr else b""
