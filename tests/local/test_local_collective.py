"""`tfps run` of the programs TFJob users run, beyond ``model.fit`` under ParameterServerStrategy.

MultiWorkerMirroredStrategy jobs (worker-only, script mode): a ``tf.keras`` (Keras 2) ``model.fit`` program
with ``BackupAndRestore`` and ``ModelCheckpoint``, and a custom training loop with a ``CheckpointManager``;
both save on the lead (worker 0) and into temporary directories elsewhere. A ParameterServerStrategy custom
loop (``ClusterCoordinator``: ``create_per_worker_dataset``, ``schedule``, ``join``). And the collective's
failure rule: a worker killed by SIGKILL restarts every process from the latest checkpoint, and the run
still ends with its model exported and verified.

One unkilled run of the MWMS fit job (module-scoped) serves both its own test and the baseline of the
killed run's cost.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]  # a safety net: minutes per run on a loaded machine

SCRIPTS = Path(__file__).resolve().parent / "scripts"
TFPS = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())", "run"]

FIT_EPOCHS, FIT_STEPS_PER_EPOCH = 5, 100
FIT_STEPS = FIT_EPOCHS * FIT_STEPS_PER_EPOCH
FIT_COMMAND = [
    "python",
    str(SCRIPTS / "mwms_fit_tf_keras.py"),
    "--epochs",
    str(FIT_EPOCHS),
    "--steps-per-epoch",
    str(FIT_STEPS_PER_EPOCH),
    "--checkpoint-dir",
    "$(TFPS_CHECKPOINT_DIR)",
    "--model-dir",
    "$(TFPS_MODEL_DIR)",
    "--pid-dir",
    "$(TFPS_JOB_DIR)/pids",
]
CTL_STEPS, CTL_EVERY = 150, 50


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    root: Path

    def log(self, task: str) -> str:
        return (self.root / "logs" / f"{task}.log").read_text(errors="replace")

    @property
    def failure(self) -> str:
        return self.stdout[-3000:] + self.stderr[-3000:]


def job_file(tmp: Path, name: str, command: list[str], replicas: dict, steps: int, **spec: object) -> Path:
    doc = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "model": {"command": command},
            "replicas": {role: {"replicas": n} for role, n in replicas.items()},
            "training": {"steps": steps},
            "export": {"formats": ["savedmodel", "tflite", "onnx"]},
            **spec,
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def mwms_fit_job(tmp: Path) -> Path:
    return job_file(tmp, "mwfit", FIT_COMMAND, {"worker": 2}, FIT_STEPS, strategy="MultiWorkerMirrored")


def start(job: Path, work: Path) -> tuple[subprocess.Popen, Path, Path]:
    """``tfps run`` in the background, its output into files (nothing to drain while the test waits)."""
    work.mkdir(parents=True, exist_ok=True)
    out, err = work.parent / f"{work.name}.stdout", work.parent / f"{work.name}.stderr"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([*TFPS, str(job), "--workdir", str(work)], stdout=o, stderr=e, text=True)
    return proc, out, err


def finish(proc: subprocess.Popen, out: Path, err: Path, root: Path, started: float, timeout: float = 420) -> Run:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # tfps run stops its children on SIGINT
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return Run(proc.returncode, out.read_text(), err.read_text(), time.monotonic() - started, root)


def tfps_run(job: Path, work: Path, name: str) -> Run:
    started = time.monotonic()
    proc, out, err = start(job, work)
    return finish(proc, out, err, work / "default" / name, started)


def checkpoint_steps(stdout: str) -> list[int]:
    return [int(m) for m in re.findall(r"checkpoint at step (\d+):", stdout)]


def restarts(stdout: str) -> int:
    m = re.search(r"training finished after \d+s and (\d+) restart\(s\)", stdout)
    return int(m.group(1)) if m else 0


def assert_exported(run: Run, step: int) -> dict:
    manifest = json.loads((run.root / "exports" / str(step) / "manifest.json").read_text())
    assert manifest["source"] == {"kind": "savedmodel", "path": "model"}, manifest
    assert manifest["versions"]["tf_keras"], manifest["versions"]
    assert sorted(a["format"] for a in manifest["artifacts"]) == ["onnx", "savedmodel", "tflite"], manifest
    assert all(a["verification"]["passed"] for a in manifest["artifacts"]), manifest["artifacts"]
    assert not manifest.get("failed"), manifest["failed"]
    for line in ("savedmodel  verified", "tflite      verified", "onnx        verified"):
        assert line in run.stdout, run.stdout
    return manifest


def assert_trained_to(run: Run, steps: int, allowed: set[int]) -> list[int]:
    assert run.returncode == 0, run.failure
    seen = checkpoint_steps(run.stdout)
    assert seen and seen == sorted(seen) and set(seen) <= allowed, run.stdout
    assert f"completed step {steps}/{steps}; final checkpoint" in run.stdout, run.stdout
    return seen


def only_the_lead_wrote(run: Run) -> None:
    """Worker 1 saved into temporary directories it deleted: nothing of it under the job's files."""
    leftovers = list(run.root.rglob("*workertemp*"))
    assert not leftovers, leftovers


@pytest.fixture(scope="module")
def mwms_fit(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The MWMS ``model.fit`` job, run once unkilled: its test, and the baseline of the killed run."""
    tmp = tmp_path_factory.mktemp("mwfit")
    return tfps_run(mwms_fit_job(tmp), tmp / "work", "mwfit")


def test_mwms_keras_fit_with_backup_and_restore_trains_on_every_worker_and_worker_0_saves(mwms_fit: Run) -> None:
    run = mwms_fit
    every_epoch = {FIT_STEPS_PER_EPOCH * e for e in range(1, FIT_EPOCHS + 1)}
    assert_trained_to(run, FIT_STEPS, every_epoch)
    assert restarts(run.stdout) == 0 and "restarting the job" not in run.stdout, run.stdout
    for task in ("worker-0", "worker-1"):
        log = run.log(task)
        assert "2 replicas in sync" in log and "starting at step 0" in log, log[-2000:]
        assert f"epoch {FIT_EPOCHS}: step {FIT_STEPS}," in log, log[-2000:]
    assert "saved the model to" in run.log("worker-0") and "saved the model to" not in run.log("worker-1")
    only_the_lead_wrote(run)
    manifest = assert_exported(run, FIT_STEPS)
    assert manifest["checkpoint"] == {"step": FIT_STEPS, "path": "checkpoints/weights"}, manifest["checkpoint"]
    print(f"\nMWMS fit: {run.wall_s:.1f}s; checkpoints {checkpoint_steps(run.stdout)}")


def test_mwms_custom_loop_checkpoints_every_n_steps_on_worker_0(tmp_path: Path) -> None:
    command = [
        "python",
        str(SCRIPTS / "mwms_custom_loop.py"),
        "--steps",
        str(CTL_STEPS),
        "--checkpoint-every",
        str(CTL_EVERY),
        "--checkpoint-dir",
        "$(TFPS_CHECKPOINT_DIR)",
        "--model-dir",
        "$(TFPS_MODEL_DIR)",
    ]
    job = job_file(tmp_path, "mwctl", command, {"worker": 2}, CTL_STEPS, strategy="MultiWorkerMirrored")
    run = tfps_run(job, tmp_path / "work", "mwctl")
    assert_trained_to(run, CTL_STEPS, set(range(CTL_EVERY, CTL_STEPS + 1, CTL_EVERY)))
    assert restarts(run.stdout) == 0, run.stdout
    for task in ("worker-0", "worker-1"):
        log = run.log(task)
        assert "2 replicas" in log and f"step {CTL_STEPS}: loss" in log, log[-2000:]
    kept = {p.name for p in (run.root / "checkpoints").glob("ckpt-*.index")}
    assert kept == {f"ckpt-{s}.index" for s in range(CTL_EVERY, CTL_STEPS + 1, CTL_EVERY)}, kept
    only_the_lead_wrote(run)
    manifest = assert_exported(run, CTL_STEPS)
    assert manifest["checkpoint"] == {"step": CTL_STEPS, "path": f"checkpoints/ckpt-{CTL_STEPS}"}
    print(f"\nMWMS custom loop: {run.wall_s:.1f}s; checkpoints {checkpoint_steps(run.stdout)}")


def test_ps_custom_loop_with_cluster_coordinator(tmp_path: Path) -> None:
    command = [
        "python",
        str(SCRIPTS / "ps_custom_loop.py"),
        "--steps",
        str(CTL_STEPS),
        "--checkpoint-every",
        str(CTL_EVERY),
        "--checkpoint-dir",
        "$(TFPS_CHECKPOINT_DIR)",
        "--model-dir",
        "$(TFPS_MODEL_DIR)",
    ]
    job = job_file(tmp_path, "psctl", command, {"chief": 1, "ps": 1, "worker": 2}, CTL_STEPS)
    run = tfps_run(job, tmp_path / "work", "psctl")
    assert_trained_to(run, CTL_STEPS, set(range(CTL_EVERY, CTL_STEPS + 1, CTL_EVERY)))
    assert restarts(run.stdout) == 0, run.stdout
    chief = run.log("chief-0")
    assert "starting at step 0" in chief, chief[-2000:]
    saved = [int(s) for s in re.findall(r"^step (\d+): loss [-\d.]+; saved ", chief, re.M)]
    assert saved == list(range(CTL_EVERY, CTL_STEPS + 1, CTL_EVERY)), chief[-2000:]
    manifest = assert_exported(run, CTL_STEPS)
    assert manifest["checkpoint"] == {"step": CTL_STEPS, "path": f"checkpoints/ckpt-{CTL_STEPS}"}
    print(f"\nPS custom loop: {run.wall_s:.1f}s; checkpoints {checkpoint_steps(run.stdout)}")


def wait_for(what: str, cond, proc: subprocess.Popen, timeout: float, interval: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"tfps run exited ({proc.returncode}) while waiting for {what}")
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def program_pid(pid_file: Path, script: str) -> int | None:
    """The pid in ``pid_file`` if it is a live process running ``script`` (never anything else)."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if script.encode() in cmdline else None


def test_mwms_worker_killed_restarts_every_worker_from_the_checkpoint(mwms_fit: Run, tmp_path: Path) -> None:
    job = mwms_fit_job(tmp_path)
    work = tmp_path / "work"
    root = work / "default" / "mwfit"
    script = str(SCRIPTS / "mwms_fit_tf_keras.py")
    started = time.monotonic()
    proc, out, err = start(job, work)
    try:
        wait_for("the first checkpoint", lambda: (root / "checkpoints" / "checkpoint").exists(), proc, 180)
        pid = wait_for("worker-1's pid", lambda: program_pid(root / "pids" / "worker-1.pid", script), proc, 30)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        log0 = root / "logs" / "worker-0.log"
        wait_for("the restart to resume", lambda: "resumed from the backup" in log0.read_text(), proc, 180)
        resumed_after = time.monotonic() - killed_at
    finally:
        run = finish(proc, out, err, root, started)
    seen = assert_trained_to(run, FIT_STEPS, {FIT_STEPS_PER_EPOCH * e for e in range(1, FIT_EPOCHS + 1)})
    assert seen[0] < FIT_STEPS, run.stdout  # killed mid-training, not after it
    restarted = "worker failed (exit code 137 (signal 9, retryable)); restarting the job from the latest checkpoint"
    assert f"{restarted} (1/3)" in run.stdout, run.stdout
    assert restarts(run.stdout) == 1, run.stdout
    resumed_at = {}
    for task in ("worker-0", "worker-1"):
        log = run.log(task)
        assert f"===== tfps run: {task} start #2 " in log, log[-2000:]  # every worker restarted
        resumed = [int(s) for s in re.findall(r"resumed from the backup at step (\d+)", log)]
        assert len(resumed) == 1 and resumed[0] > 0 and resumed[0] % FIT_STEPS_PER_EPOCH == 0, log[-3000:]
        assert f"epoch {FIT_EPOCHS}: step {FIT_STEPS}," in log, log[-2000:]
        resumed_at[task] = resumed[0]
    assert len(set(resumed_at.values())) == 1, resumed_at  # both from the lead's backup
    assert "was killed by SIGKILL" in run.log("worker-1"), run.log("worker-1")[-2000:]
    only_the_lead_wrote(run)
    assert_exported(run, FIT_STEPS)
    cost = run.wall_s - mwms_fit.wall_s
    print(
        f"\nkilled worker-1 at the first checkpoint: run {run.wall_s:.1f}s vs {mwms_fit.wall_s:.1f}s unkilled "
        f"(cost {cost:+.1f}s); kill to training resumed {resumed_after:.1f}s; resumed at step {resumed_at['worker-0']}"
    )
