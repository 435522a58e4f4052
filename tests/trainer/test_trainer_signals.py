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


SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def _wait_for_sigterm_handler(proc: subprocess.Popen, timeout: float = 30) -> int:
    """The pid of the trainer unshare forked, once ``python -m tfps_trainer`` runs in it and catches SIGTERM."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()[-2000:] if proc.stderr else proc.returncode
        for pid in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split():
            try:
                python = Path(f"/proc/{pid}/exe").resolve() == Path(sys.executable).resolve()  # exec'd, not unshare
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            caught = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), 16)
            if python and caught & SIGTERM_BIT:
                return int(pid)
        time.sleep(0.02)
    raise AssertionError(f"the trainer did not start and catch SIGTERM within {timeout}s")


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
    # Signalled as soon as its entry point catches SIGTERM, so inside the TensorFlow import (no role's handler
    # yet), however fast or slow the interpreter starts: a signal sent before that would be dropped (PID 1).
    child = _wait_for_sigterm_handler(proc)
    subprocess.run(["kill", "-TERM", str(child)], check=True)
    try:
        proc.wait(timeout=60)  # at once; a dropped signal leaves it running (a PS serves, a chief waits 600 s)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("a PID 1 trainer ignored SIGTERM during start-up")
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read()[-2000:] if proc.stderr else b""
