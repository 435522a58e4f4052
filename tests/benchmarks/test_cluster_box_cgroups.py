"""The cluster box on this machine's real cgroups (no TensorFlow, a few seconds): a busy loop under a 25 % quota
is throttled to about a quarter of a core, a box whose quotas exceed the machine is refused as starved, and
nothing of either is left behind, even when the code inside the box fails. Skipped where cgroups cannot be
created (not root, no cpu/memory controllers)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import cluster_box as cb  # noqa: E402

REASON = cb.unavailable_reason()
# Alone (tests/README.md, "Parallel runs"): it overcommits every CPU of the machine on purpose for seconds,
# which would starve the timing-bound tests running beside it.
pytestmark = [pytest.mark.skipif(REASON is not None, reason=f"cgroups not writable here: {REASON}"), pytest.mark.serial]


def _left_behind(box: cb.ClusterBox) -> list[Path]:
    return [d for cell in box.cells.values() for d in cell.dirs.values() if d.exists()] + [
        p for p in box._run_dirs() if p.exists()
    ]


def test_a_busy_loop_under_a_quarter_core_quota_a_starved_box_and_a_failure_inside_one():
    with cb.ClusterBox({"loop-0": cb.Limits(0.25, 128 << 20)}) as box:
        proc = subprocess.Popen(box.command("loop-0", [sys.executable, "-c", cb.BUSY_LOOP]))
        try:
            time.sleep(0.5)
            t0 = time.monotonic()
            time.sleep(2.5)
            (u,) = box.usage(t0, time.monotonic()).values()
        finally:
            proc.kill()
            proc.wait()
    assert not _left_behind(box)
    assert u.limits.cores == 0.25
    assert u.cores <= 0.25 * 1.05, u  # the quota caps
    assert u.periods >= 20, u
    assert u.peak_memory_bytes > 1 << 20, u  # the interpreter's memory was charged to the cell
    verdicts = cb.starvation([u])
    if not verdicts:  # it got its quota: throttled nearly every period, about a quarter of a core
        assert u.throttled_periods >= 0.8 * u.periods, u
        assert u.throttled_seconds > 0, u
        assert u.cores == pytest.approx(0.25, abs=0.02), u
        assert u.wait_seconds > 0.5 * u.seconds, u  # the kernel counts the throttled time as run-queue wait
    else:  # a busy machine kept it below its quota: the box must say so
        assert u.cores < 0.25 * 0.95, (u, verdicts)

    # Loops at half a core each asking for one core more than the machine has (here 6 loops, 3 of 2 cores):
    # each is denied about a third of its quota.
    cpus = len(os.sched_getaffinity(0))
    n = 2 * cpus + 2
    limits = {f"loop-{i}": cb.Limits(0.5, 128 << 20) for i in range(n)}
    with cb.ClusterBox(limits) as box:
        procs = [subprocess.Popen(box.command(name, [sys.executable, "-c", cb.BUSY_LOOP])) for name in limits]
        try:
            time.sleep(0.5)
            t0 = time.monotonic()
            time.sleep(2.5)
            usage = box.usage(t0, time.monotonic())
        finally:
            for p in procs:
                p.kill()
                p.wait()
    assert not _left_behind(box)
    assert sum(u.cores for u in usage.values()) <= cpus * 1.02
    with pytest.raises(cb.Starved) as refused:
        cb.check(usage.values())
    assert len(refused.value.verdicts) >= n - 1, refused.value.verdicts
    assert all(" was denied " in v and "-core quota" in v for v in refused.value.verdicts)
    assert any(v.startswith("loop-") for v in refused.value.verdicts)

    # An exception inside the box: its processes are killed, its cgroups removed.
    with pytest.raises(RuntimeError, match="boom"), cb.ClusterBox({"sleeper": cb.Limits(0.1, 64 << 20)}) as box:
        proc = subprocess.Popen(box.command("sleeper", ["sleep", "60"]))
        deadline = time.monotonic() + 5
        while not cb._pids(next(iter(box.cells["sleeper"].dirs.values()))) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise RuntimeError("boom")
    assert proc.wait(timeout=5) == -9
    assert not _left_behind(box)
