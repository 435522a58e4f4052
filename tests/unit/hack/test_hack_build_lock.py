"""hack/lib/build.sh's lock_build: two processes building the same cached version take turns."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PRELUDE = f'log() {{ echo ">> $*"; }}; source {REPO}/hack/lib/build.sh; '


def _bash(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", "-c", PRELUDE + script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_second_builder_waits_for_the_first_and_then_sees_its_result(tmp_path: Path) -> None:
    d = tmp_path / "k8s" / "v0"
    first = _bash(f"lock_build {d}; touch {d}/holding; sleep 2; touch {d}/.complete; echo first-done")
    deadline = time.monotonic() + 30
    while not (d / "holding").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.05)
    second = _bash(f"lock_build {d}; [[ -f {d}/.complete ]] && echo saw-complete")
    out_second, _ = second.communicate(timeout=30)
    out_first, _ = first.communicate(timeout=30)
    assert "first-done" in out_first
    assert "another process is building" in out_second and "saw-complete" in out_second, out_second


def test_lock_is_released_when_the_holder_exits(tmp_path: Path) -> None:
    d = tmp_path / "kwok" / "v0"
    assert _bash(f"lock_build {d}").wait(timeout=30) == 0
    out, _ = _bash(f"lock_build {d}; echo got-it").communicate(timeout=30)
    assert "got-it" in out and "another process" not in out
