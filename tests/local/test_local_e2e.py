"""`tfps run` end to end with the real trainer and exporter: TensorFlow processes on loopback ports.

Each test drives the real `tfps` command in a subprocess and acts on its children by pid.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.local_procs import children_by_task

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
ROOT_OF = lambda work: work / "default" / "quickstart"  # noqa: E731


def tfps_run(work: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from tfps_operator.tools.cli import main; sys.exit(main())",
        "run",
        str(QUICKSTART),
        "--workdir",
        str(work),
        *extra,
    ]


def wait_for_checkpoint(runner: subprocess.Popen, root: Path, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while not (root / "checkpoints" / "checkpoint").exists():
        if runner.poll() is not None:
            pytest.fail(f"runner exited {runner.returncode} before the first checkpoint:\n{runner.communicate()}")
        assert time.monotonic() < end, "no checkpoint in time"
        time.sleep(0.2)


def latest_checkpoint_step(root: Path) -> int:
    text = (root / "checkpoints" / "checkpoint").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("model_checkpoint_path"))
    return int(line.rsplit("-", 1)[1].rstrip('"'))


def start_count(log: Path) -> int:
    return log.read_text().count("===== tfps run: ")


def test_quickstart_ends_with_verified_artifacts(tmp_path):
    work = tmp_path / "work"
    t0 = time.monotonic()
    proc = subprocess.run(tfps_run(work, "--steps", "60"), capture_output=True, text=True, timeout=540)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    root = ROOT_OF(work)
    export = root / "exports" / "60"
    manifest = json.loads((export / "manifest.json").read_text())
    formats = {a["format"] for a in manifest["artifacts"]}
    assert formats == {"savedmodel", "tflite", "onnx"}
    for a in manifest["artifacts"]:
        assert a["verification"]["passed"] is True, a
        path = export / a["path"]
        assert path.exists()
        assert str(path) in proc.stdout, "every artifact is listed in the table"
    assert (export / "savedmodel" / "saved_model.pb").is_file()
    assert (export / "model.onnx").stat().st_size > 0
    assert "max error (verified)" in proc.stdout
    assert latest_checkpoint_step(root) == 60
    assert {p.name for p in (root / "logs").glob("*.log")} == {
        "ps-0.log",
        "worker-0.log",
        "worker-1.log",
        "chief-0.log",
        "export.log",
    }
    print(f"tfps run quickstart --steps 60: {wall:.1f}s wall")
    tensorboard_serves_the_chiefs_scalars(work, root)


def tensorboard_serves_the_chiefs_scalars(work: Path, root: Path) -> None:
    """`tfps tensorboard quickstart --workdir WORK`: the printed URL serves the chief's loss through
    TensorBoard's HTTP API, the same points as its event file; SIGINT stops TensorBoard."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    (events,) = (root / "tensorboard" / "chief").glob("events.out.tfevents.*")
    written = [
        (e.step, float(tensor_util.make_ndarray(v.tensor)))
        for e in EventFileLoader(str(events)).Load()
        for v in e.summary.value
        if v.tag == "loss"
    ]
    assert written and written[-1][0] == 60, written
    cmd = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())"]
    tb = subprocess.Popen(
        [*cmd, "tensorboard", "quickstart", "--workdir", str(work)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = tb.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("TensorBoard at http://127.0.0.1:"), (line, tb.poll())
        url = line.split()[2]
        query = urllib.parse.urlencode({"run": "quickstart/chief", "tag": "loss"})
        served: list[tuple[int, float]] = []
        for _ in range(60):  # on a busy machine TensorBoard may still be reading the run (404 until then)
            try:
                with urllib.request.urlopen(f"{url}data/plugin/scalars/scalars?{query}", timeout=30) as r:
                    served = [(step, value) for _, step, value in json.load(r)]
                break
            except urllib.error.HTTPError as e:
                assert e.code == 404, e
                time.sleep(1)
        assert [st for st, _ in served] == [st for st, _ in written], (served, written)
        assert [v for _, v in served] == pytest.approx([v for _, v in written], rel=1e-6), (served, written)
        kids = subprocess.run(["pgrep", "-P", str(tb.pid)], capture_output=True, text=True).stdout.split()
        assert kids, "TensorBoard runs as a child of tfps tensorboard"
    finally:
        tb.send_signal(signal.SIGINT)  # to tfps alone: it stops its TensorBoard
        _, err = tb.communicate(timeout=30)
    assert tb.returncode == 0, err
    for pid in map(int, kids):
        end = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), f"TensorBoard (pid {pid}) outlived tfps tensorboard"


def test_killed_worker_is_recreated_and_run_succeeds(tmp_path):
    work = tmp_path / "work"
    root = ROOT_OF(work)
    runner = subprocess.Popen(
        tfps_run(work, "--steps", "1500", "--no-export"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_checkpoint(runner, root)
        os.kill(children_by_task(runner.pid)["worker-1"], signal.SIGKILL)
        out, err = runner.communicate(timeout=540)
    finally:
        runner.kill()
    assert runner.returncode == 0, out + err
    assert "worker failed (exit code 137 (signal 9, retryable)); recreating it" in out
    assert start_count(root / "logs" / "worker-1.log") == 2
    assert start_count(root / "logs" / "chief-0.log") == 1, "a worker failure does not restart the chief"
    # ≥: a step closure interrupted by the worker's death is re-run by the coordinator (at-least-once)
    assert latest_checkpoint_step(root) >= 1500


def test_killed_ps_restarts_from_checkpoint(tmp_path):
    work = tmp_path / "work"
    root = ROOT_OF(work)
    runner = subprocess.Popen(
        tfps_run(work, "--steps", "1500", "--no-export"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_checkpoint(runner, root)
        kill_at = latest_checkpoint_step(root)
        os.kill(children_by_task(runner.pid)["ps-0"], signal.SIGKILL)
        out, err = runner.communicate(timeout=540)
    finally:
        runner.kill()
    assert runner.returncode == 0, out + err
    assert "ps failed (exit code 137 (signal 9, retryable)); restarting the job from the latest checkpoint (1/3)" in out
    resumed = [int(ln.rsplit(" ", 1)[1]) for ln in out.splitlines() if "resumed from checkpoint step" in ln]
    assert resumed and resumed[0] >= kill_at > 0, out  # the global step continues from the checkpoint
    assert start_count(root / "logs" / "chief-0.log") == 2
    assert latest_checkpoint_step(root) == 1500


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.split(") ", 1)[1][0] == "Z"


def test_sigterm_leaves_no_process_and_rerun_resumes(tmp_path):
    work = tmp_path / "work"
    root = ROOT_OF(work)
    runner = subprocess.Popen(
        tfps_run(work, "--steps", "1500", "--no-export"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_checkpoint(runner, root)
        kids = children_by_task(runner.pid)
        assert set(kids) == {"ps-0", "worker-0", "worker-1", "chief-0"}
        runner.send_signal(signal.SIGTERM)
        out, err = runner.communicate(timeout=120)
    finally:
        runner.kill()
    assert runner.returncode == 128 + signal.SIGTERM, out + err
    for name, pid in kids.items():
        assert _gone(pid), f"{name} (pid {pid}) left running"
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # and nothing of its process group
    stopped = latest_checkpoint_step(root)
    assert 0 < stopped < 1500
    rerun = subprocess.run(
        tfps_run(work, "--steps", "1500", "--no-export"), capture_output=True, text=True, timeout=540
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "resuming from its latest checkpoint" in rerun.stdout
    resumed = [int(ln.rsplit(" ", 1)[1]) for ln in rerun.stdout.splitlines() if "resumed from checkpoint step" in ln]
    assert resumed and resumed[0] >= stopped, rerun.stdout
    assert latest_checkpoint_step(root) == 1500


def test_lost_port_race_restarts_on_fresh_ports(tmp_path, monkeypatch):
    """A port taken between our bind-check and the trainer's bind: TF cannot start its server; the
    runner recognises it and starts the cluster again on fresh ports (not counted as a restart)."""
    import socket

    from tfps_operator.manifests.jobsettings import job_settings
    from tfps_operator.tools.local import supervisor as sup
    from tfps_operator.tools.local.cli import load_job
    from tfps_operator.tools.local.progress_display import PlainDisplay

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real, calls = sup.free_ports, []

    def ps_port_taken_first(n: int) -> list[int]:
        ports = real(n)
        calls.append(n)
        if len(calls) == 1:
            ports[0] = taken.getsockname()[1]  # ps-0 is first in START_ORDER
        return ports

    monkeypatch.setattr(sup, "free_ports", ps_port_taken_first)
    # ps-0 fails once TensorFlow has imported and tried to bind: seconds on a quiet machine, beyond the
    # supervisor's 30 s start-up window beside other TF imports on a loaded one (then it counts as a restart).
    monkeypatch.setattr(sup, "STARTUP_WINDOW_S", 600.0)
    job = load_job(str(QUICKSTART), steps=20, no_export=True)
    plan = sup.LocalJob(job=job, settings=job_settings(job, mount_path=str(tmp_path)))
    shown = io.StringIO()
    s = sup.Supervisor(plan, PlainDisplay(20, out=shown))
    try:
        out = s.run()
    finally:
        s.stop()
        taken.close()
    logs = "\n".join(f"--- {c.name}\n{c.tail(8)}" for c in s.children.values())
    assert out.ok and out.restarts == 0, f"{out.message}\n{shown.getvalue()}\n{logs}"
    assert len(calls) == 2
    assert "Could not start gRPC server" in (tmp_path / "default" / "quickstart" / "logs" / "ps-0.log").read_text()


def test_sigkilled_runner_leaves_no_trainer_behind(tmp_path):
    """Even `kill -9` of `tfps run` (no chance to clean up) takes every TF process with it."""
    runner = subprocess.Popen(
        tfps_run(tmp_path / "work", "--steps", "1500", "--no-export"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 120
        while len(kids := children_by_task(runner.pid)) < 4:
            assert time.monotonic() < end and runner.poll() is None
            time.sleep(0.2)
        time.sleep(3)  # let them get into TensorFlow
    finally:
        runner.kill()
        runner.wait()
    end = time.monotonic() + 20
    while (alive := [n for n, pid in kids.items() if not _gone(pid)]) and time.monotonic() < end:
        time.sleep(0.2)
    assert alive == [], f"orphans: {alive}"
