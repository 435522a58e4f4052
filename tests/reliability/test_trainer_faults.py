"""Trainer faults end to end through `tfps run` (real TF processes on loopback): workers killed again
and again while training, and parameter servers killed with the lost progress measured.

Figures are printed (run with ``-s``) and recorded in tests/README.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .localrun import Run, job_file, kill, wait_for

pytestmark = [pytest.mark.tf, pytest.mark.timeout(900)]


def test_workers_killed_repeatedly_the_run_completes_at_the_target_step(tmp_path: Path) -> None:
    """Five SIGKILLs of workers (one at a time, then both at once), no job restart, exact final step."""
    from trainer_cluster import stored_step

    steps = 3000
    plan = [(300, ["worker-1"]), (700, ["worker-0"]), (1100, ["worker-0", "worker-1"]), (1500, ["worker-1"])]
    run = Run(job_file(tmp_path, "wkill", steps=steps, every_steps=500), tmp_path / "work", "--no-export")
    seen: list[int] = []
    kills: list[tuple[int, str]] = []
    try:
        for at, victims in plan:

            def ready(at: int = at, victims: list[str] = victims) -> bool:
                st = run.chief_status()
                if st is None:
                    return False
                seen.append(st["step"])
                kids = run.children()
                progressed = not kills or st["step"] > kills[-1][0]  # the workers came back and trained
                return st["step"] >= at and progressed and all(v in kids for v in victims)

            wait_for(ready, 300, f"step {at} with {victims} alive", run)
            kids = run.children()
            step = seen[-1]
            for v in victims:
                kill(kids[v][0])
                kills.append((step, v))
        assert seen[-1] < steps, "training finished before the last kill; raise the step count"

        def finished() -> bool:
            st = run.chief_status()
            if st is not None:
                seen.append(st["step"])
            return run.proc.poll() is not None

        wait_for(finished, 600, "the run to finish", interval=0.3)
        rc = run.wait()
    finally:
        run.stop()
    out = run.output
    assert rc == 0, out[-3000:]
    assert out.count("worker failed (exit code 137 (signal 9, retryable)); recreating it") == len(kills), out
    assert len(run.chief_starts()) == 1, "a worker loss never restarts the job"
    assert seen == sorted(seen), "the chief's global step went backwards"
    assert f"completed step {steps}/{steps}" in out
    assert stored_step(str(run.root / "checkpoints" / f"ckpt-{steps}")) == steps
    print("worker kills (chief step, worker):", kills)


def test_killed_ps_resumes_and_loses_at_most_one_checkpoint_interval(tmp_path: Path) -> None:
    """Two PS kills: one late in a checkpoint interval, one just after a checkpoint. Lost steps =
    the chief's step when the PS died (its /status, polled right before the kill) minus the step the
    restarted chief resumed from."""
    from trainer_cluster import stored_step

    steps, every = 2400, 400
    run = Run(job_file(tmp_path, "pskill", steps=steps, every_steps=every), tmp_path / "work", "--no-export")
    measured = []
    try:
        for n, (label, window) in enumerate(
            [("late in the interval", lambda d: d >= 250), ("just after a checkpoint", lambda d: d <= 80)]
        ):
            last: dict = {}

            def due(last: dict = last, n: int = n, window: Callable[[int], bool] = window) -> bool:
                st = run.chief_status()
                if st is None or st.get("state") != "running" or not st.get("checkpoint"):
                    return False
                last.update(st)
                ck = st["checkpoint"]["step"]
                return len(run.chief_starts()) == n + 1 and ck >= every * (n + 1) and window(st["step"] - ck)

            wait_for(due, 300, f"a kill point {label}", run, interval=0.05)
            kill(run.children()["ps-0"][0])
            killed_at = time.monotonic()
            wait_for(
                lambda n=n: len(run.resumed_steps()) == n + 2 and run.resumed_steps()[-1] is not None,
                300,
                "the restarted chief to resume",
                run,
            )
            resumed = run.resumed_steps()[-1]
            measured.append(
                {
                    "kill": label,
                    "chief_step_at_kill": last["step"],
                    "checkpoint_at_kill": last["checkpoint"]["step"],
                    "resumed_from": resumed,
                    "lost_steps": last["step"] - resumed,
                    "seconds_to_resume": round(time.monotonic() - killed_at, 1),
                }
            )
        rc = run.wait()
    finally:
        run.stop()
    out = run.output
    print("PS kills:", json.dumps(measured))
    assert rc == 0, out[-3000:]
    assert "restarting the job from the latest checkpoint (1/3)" in out and "(2/3)" in out
    for m in measured:
        assert m["resumed_from"] >= m["checkpoint_at_kill"], f"a checkpoint that existed was not used: {m}"
        assert 0 <= m["lost_steps"] <= every, f"lost more than one checkpoint interval: {m}"
    assert f"completed step {steps}/{steps}" in out
    assert stored_step(str(run.root / "checkpoints" / f"ckpt-{steps}")) == steps
