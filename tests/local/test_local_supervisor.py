"""The local supervisor's failure rules, with real processes of a TF-free stand-in trainer (fake_trainer.py).

The same situations with the real TensorFlow trainer are in test_local_e2e.py (@pytest.mark.tf).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tfps_operator.api.models import PSTrainingJob
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.tools.local import supervisor as sup
from tfps_operator.tools.local.progress_display import Status
from tfps_operator.tools.local.supervisor import LocalJob, Supervisor, Task

FAKE = (sys.executable, str(Path(__file__).with_name("fake_trainer.py")))


def make_job(
    steps: int = 40,
    workers: int = 2,
    evaluator: int = 0,
    backoff: int = 3,
    worker_policy: str = "OnFailure",
    deadline: int | None = None,
) -> PSTrainingJob:
    return PSTrainingJob.model_validate(
        {
            "metadata": {"name": "fake", "namespace": "ns"},
            "spec": {
                "model": {"module": "tfps_trainer.examples.linear"},
                "replicas": {
                    "worker": {"replicas": workers, "restartPolicy": worker_policy},
                    "evaluator": {"replicas": evaluator},
                },
                "training": {"steps": steps, "checkpoint": {"everySteps": 10}},
                "runPolicy": {"backoffLimit": backoff, "activeDeadlineSeconds": deadline},
            },
        }
    )


class Recorder:
    """A Display that records events and can act (e.g. kill a process) when the chief reaches a step."""

    def __init__(self, at_step: int | None = None, action: Callable[[], None] | None = None) -> None:
        self.events: list[str] = []
        self.statuses: list[Status] = []
        self.at_step, self.action = at_step, action

    def event(self, message: str) -> None:
        self.events.append(message)

    def update(self, status: Status) -> None:
        self.statuses.append(status)
        if self.action and status.step is not None and status.step >= self.at_step:
            action, self.action = self.action, None
            action()

    def close(self) -> None:
        pass


def run(
    tmp_path: Path, job: PSTrainingJob, display: Recorder, env: dict[str, str] | None = None
) -> tuple[Supervisor, sup.TrainingResult]:
    plan = LocalJob(job=job, settings=job_settings(job, mount_path=str(tmp_path)), trainer=FAKE)
    s = Supervisor(plan, display, poll_interval=0.1, grace=3, port_race_settle=1.0)
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        return s, s.run(deadline_s=job.spec.run_policy.active_deadline_seconds)
    finally:
        s.stop()
        os.environ.clear()
        os.environ.update(old)


def chief_start_steps(root: Path) -> list[int]:
    log = (root / "logs" / "chief-0.log").read_text()
    return [int(line.rsplit(" ", 1)[1]) for line in log.splitlines() if line.startswith("chief starting at step")]


def test_happy_path_tf_config_and_progress(tmp_path):
    rec = Recorder()
    s, out = run(tmp_path, make_job(steps=30, evaluator=1), rec)
    assert out.ok and out.restarts == 0, out.message
    assert out.status is not None and out.status.checkpoint_step is not None
    root = tmp_path / "ns" / "fake"
    assert (root / "checkpoints" / "fake-step").read_text() == "30"
    assert {p.name for p in (root / "logs").glob("*.log")} == {
        "ps-0.log",
        "worker-0.log",
        "worker-1.log",
        "evaluator-0.log",
        "chief-0.log",
    }
    # TF_CONFIG comes from the shared builder, on loopback ports
    cfg = json.loads(s.children[Task("worker", 1)].env["TF_CONFIG"])
    assert cfg["task"] == {"type": "worker", "index": 1}
    assert set(cfg["cluster"]) == {"chief", "ps", "worker"}
    assert all(a.startswith("127.0.0.1:") for addrs in cfg["cluster"].values() for a in addrs)
    ev = json.loads(s.children[Task("evaluator", 0)].env["TF_CONFIG"])
    assert list(ev["cluster"]) == ["evaluator"]
    chief_job = json.loads(s.children[Task("chief", 0)].env["TFPS_JOB"])
    eval_job = json.loads(s.children[Task("evaluator", 0)].env["TFPS_JOB"])
    assert chief_job["progress_port"] != eval_job["progress_port"]
    assert [st.step for st in rec.statuses] == sorted(st.step for st in rec.statuses)
    assert "evaluator-0 finished: evaluated final checkpoint step 30" in rec.events
    assert all(not c.running() for c in s.children.values())


def test_the_final_checkpoint_is_reported_when_the_chief_exits_before_the_next_poll(tmp_path):
    rec = Recorder()
    _, out = run(tmp_path, make_job(steps=35, workers=1), rec, env={"FAKE_FINAL_UNSEEN": "1"})
    assert out.ok, out.message
    steps = [int(e.split()[3].rstrip(":")) for e in rec.events if e.startswith("checkpoint at step ")]
    assert steps and steps[-1] == 35 and steps == sorted(set(steps)), rec.events
    assert out.status is not None and out.status.checkpoint_step == 35


def test_killed_worker_is_recreated_alone(tmp_path):
    holder: dict[str, Supervisor] = {}
    rec = Recorder(at_step=10, action=lambda: os.kill(holder["s"].children[Task("worker", 1)].pid, signal.SIGKILL))
    plan_job = make_job(steps=40)
    plan = LocalJob(job=plan_job, settings=job_settings(plan_job, mount_path=str(tmp_path)), trainer=FAKE)
    s = holder["s"] = Supervisor(plan, rec, poll_interval=0.1, grace=3, port_race_settle=1.0)
    try:
        out = s.run()
    finally:
        s.stop()
    assert out.ok and out.restarts == 0, out.message
    assert s.children[Task("worker", 1)].starts == 2
    assert s.children[Task("ps", 0)].starts == 1 and s.children[Task("chief", 0)].starts == 1
    assert any("worker failed (exit code 137 (signal 9, retryable))" in e for e in rec.events), rec.events


def test_killed_ps_restarts_cluster_from_checkpoint(tmp_path):
    holder: dict[str, Supervisor] = {}
    rec = Recorder(at_step=25, action=lambda: os.kill(holder["s"].children[Task("ps", 0)].pid, signal.SIGKILL))
    job = make_job(steps=50)
    plan = LocalJob(job=job, settings=job_settings(job, mount_path=str(tmp_path)), trainer=FAKE)
    s = holder["s"] = Supervisor(plan, rec, poll_interval=0.1, grace=3, port_race_settle=1.0)
    try:
        out = s.run()
    finally:
        s.stop()
    assert out.ok and out.restarts == 1, out.message
    assert all(c.starts == 2 for c in s.children.values())
    starts = chief_start_steps(tmp_path / "ns" / "fake")
    assert starts[0] == 0 and starts[1] >= 20, starts  # resumed from the latest checkpoint
    assert any("restarting the job from the latest checkpoint (1/3)" in e for e in rec.events), rec.events


def test_backoff_limit_exceeded_shows_reason_and_log_tail(tmp_path):
    rec = Recorder()
    s, out = run(tmp_path, make_job(backoff=1), rec, env={"FAKE_FAIL_ROLE": "ps", "FAKE_FAIL_CODE": "7"})
    assert not out.ok and out.restarts == 1
    assert out.message.startswith("BackoffLimitExceeded: ps failed (exit code 7 (Infrastructure, retryable))")
    assert "ps-0 exited with code 7: ps told to fail" in out.message
    assert "ps-0.log" in out.message
    assert all(not c.running() for c in s.children.values())


def test_restart_policy_never_fails_the_job(tmp_path):
    rec = Recorder()
    _, out = run(
        tmp_path, make_job(worker_policy="Never"), rec, env={"FAKE_FAIL_ROLE": "worker", "FAKE_FAIL_CODE": "1"}
    )
    assert not out.ok and out.restarts == 0
    assert "restartPolicy is Never" in out.message


def test_a_permanent_exit_code_fails_at_once_under_on_failure(tmp_path):
    """tfps run reads the operator's exit-code table: an invalid model (3) is not retried."""
    rec = Recorder()
    s, out = run(tmp_path, make_job(backoff=3), rec, env={"FAKE_FAIL_ROLE": "chief", "FAKE_FAIL_CODE": "3"})
    assert not out.ok and out.restarts == 0, out.message
    assert out.message.startswith(
        "InvalidModel: chief failed (exit code 3 (InvalidModel, permanent)); a permanent error"
    )
    assert s.children[Task("chief", 0)].starts == 1


def test_active_deadline(tmp_path):
    rec = Recorder()
    t0 = time.monotonic()
    s, out = run(tmp_path, make_job(steps=10_000, deadline=2), rec, env={"FAKE_STEP_S": "0.2"})
    assert not out.ok and out.message.startswith("DeadlineExceeded")
    assert time.monotonic() - t0 < 30
    assert all(not c.running() for c in s.children.values())


def test_lost_port_race_restarts_on_fresh_ports(tmp_path, monkeypatch):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real = sup.free_ports
    calls = []

    def first_call_collides(n: int) -> list[int]:
        ports = real(n)
        calls.append(n)
        if len(calls) == 1:
            ports[0] = taken.getsockname()[1]  # ps-0 gets a port someone else holds
        return ports

    monkeypatch.setattr(sup, "free_ports", first_call_collides)
    rec = Recorder()
    try:
        s, out = run(tmp_path, make_job(steps=15), rec)
    finally:
        taken.close()
    assert out.ok and out.restarts == 0, out.message
    assert len(calls) == 2
    assert any("could not bind its port" in e for e in rec.events), rec.events


RUNNER = textwrap.dedent("""
    import dataclasses, sys
    from tfps_operator.tools.local import cli
    real = cli.local_job_from_args
    cli.local_job_from_args = lambda a: dataclasses.replace(real(a), trainer=tuple(sys.argv[1:3]))
    sys.exit(cli.main(cli.argparse.Namespace(file=sys.argv[3], workdir=sys.argv[4], steps=None, no_export=True)))
""")


def test_sigterm_stops_every_process_and_rerun_resumes(tmp_path):
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(make_job(steps=60).to_wire()))
    work = tmp_path / "work"
    root = work / "ns" / "fake"
    env = {**os.environ, "FAKE_STEP_S": "0.1"}
    argv = [sys.executable, "-c", RUNNER, *FAKE, str(job_file), str(work)]
    runner = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt = root / "checkpoints" / "fake-step"
    end = time.monotonic() + 60
    while not (ckpt.exists() and ckpt.read_text() not in ("", "0")):
        assert time.monotonic() < end and runner.poll() is None, runner.communicate()
        time.sleep(0.1)
    # every child of the runner, by pid (they are session leaders: one process group each)
    kids = [
        int(p) for p in subprocess.run(["pgrep", "-P", str(runner.pid)], capture_output=True, text=True).stdout.split()
    ]
    assert len(kids) == 4
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 128 + signal.SIGTERM, err
    assert "rerun the same command to resume" in err
    for pid in kids:
        assert not Path(f"/proc/{pid}").exists(), f"child {pid} left running"
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # nothing left in its process group either
    stopped_at = int(ckpt.read_text())
    rerun = subprocess.run(argv, env={**env, "FAKE_STEP_S": "0.02"}, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from its latest checkpoint" in rerun.stdout
    assert chief_start_steps(root)[-1] == stopped_at > 0
    assert ckpt.read_text() == "60"
