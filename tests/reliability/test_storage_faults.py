"""Storage faults under the trainer, end to end through `tfps run` (real TF processes): a checkpoint
volume that fills up or turns read-only mid-run, and the newest checkpoint deleted under the trainer.
Expected: a clear one-line reason, nothing exported from the failed run, the earlier checkpoint
intact, and a rerun that resumes from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfps_wire import exitcodes

from .localrun import Run, job_file, kill, wait_for
from .mounts import fill, remount, tmpfs

pytestmark = [pytest.mark.tf, pytest.mark.timeout(900)]


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_checkpoint_volume_fault_fails_clearly_and_rerun_resumes(tmp_path: Path, fault: str) -> None:
    from trainer_cluster import stored_step

    steps, every = 1500, 500
    job = job_file(tmp_path, "vol", steps=steps, every_steps=every, backoff=0, export=True)
    work = tmp_path / "work"
    ckpts = work / "default" / "vol" / "checkpoints"
    with tmpfs(ckpts, "4m"):
        run = Run(job, work)
        try:
            wait_for(
                lambda: (run.checkpoint_state() or "").endswith(f"ckpt-{every}"),
                300,
                "the first checkpoint",
                run,
                interval=0.05,
            )
            if fault == "full":
                fill(ckpts)
            else:
                remount(ckpts, "ro")
            rc = run.wait()
        finally:
            run.stop()
        out = run.output
        assert rc == 1, out[-3000:]
        # storage that cannot be written is the environment's fault: Infrastructure (retryable), not a bug
        line = next(
            (ln for ln in out.splitlines() if f"chief-0 exited with code {exitcodes.INFRASTRUCTURE}: " in ln), ""
        )
        assert "cannot write checkpoint step" in line and str(ckpts) in line, f"no clear reason:\n{out[-3000:]}"
        assert not (run.root / "exports").exists(), "something was exported from a failed run"
        intact = run.checkpoint_state()
        assert intact is not None
        step = int(intact.rsplit("-", 1)[1])
        assert every <= step < steps and stored_step(intact) == step, "the last good checkpoint is not intact"

        if fault == "full":
            (ckpts / "filler").unlink()
        else:
            remount(ckpts, "rw")
        rerun = Run(job, work, "--no-export")
        try:
            assert rerun.wait() == 0, rerun.output[-3000:]
        finally:
            rerun.stop()
        assert rerun.resumed_steps()[-1] == step, "the rerun did not resume from the intact checkpoint"
        assert stored_step(str(ckpts / f"ckpt-{steps}")) == steps
    print(f"{fault}: failed with {line.strip()!r}; resumed from step {step}")
    os_reason = "No space left on device" if fault == "full" else "Read-only file system"
    assert os_reason in line, f"the reason does not name {os_reason!r}: {line!r}"


def test_newest_checkpoint_deleted_under_the_trainer_resumes_from_the_newest_remaining(tmp_path: Path) -> None:
    from trainer_cluster import stored_step

    steps, every = 2000, 400
    run = Run(
        job_file(tmp_path, "delck", steps=steps, every_steps=every, keep=3, backoff=1), tmp_path / "work", "--no-export"
    )
    try:
        newest = wait_for(
            lambda: (p := run.checkpoint_state()) and p.endswith(f"ckpt-{2 * every}") and p,
            300,
            "two checkpoints",
            run,
            interval=0.05,
        )
        for f in Path(newest).parent.glob(Path(newest).name + ".*"):
            f.unlink()  # deleted under the trainer (an operator's cleanup gone wrong, a user's rm)
        kill(run.children()["ps-0"][0])  # and the job restarts before the next checkpoint
        assert run.checkpoint_state() == newest, "a newer checkpoint appeared meanwhile; the test did not test"
        rc = run.wait()
    finally:
        run.stop()
    out = run.output
    assert rc == 0, out[-3000:]
    assert run.resumed_steps()[1] == every, f"expected to resume from ckpt-{every}, the newest that exists"
    assert stored_step(str(run.root / "checkpoints" / f"ckpt-{steps}")) == steps
