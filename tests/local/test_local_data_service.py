"""A job with a tf.data service under ``tfps run``, with real TensorFlow processes (docs/data-service.md).

One run trains a contract module that counts its visits (``scripts/visits_contract.py``: each element carries
its id; the model adds one to ``visits[id]`` for every element it takes a step on, and checkpoints the count)
through a dispatcher and two data workers with dynamic sharding, while the test kills a data worker, then the
dispatcher, then the parameter server (SIGKILL each), then preempts the chief (SIGTERM: it saves the step it
stopped at). Every checkpoint the run kept must show the documented guarantee: each id visited at most once,
and exactly ``step × batch`` visits (the steps it holds, no element lost inside a step, none counted twice). A
data worker and the dispatcher are recreated alone while training goes on; the PS's death and the preemption
restart the training cluster, which resumes from its checkpoint and joins the service's iteration where it
stood (the service kept running), so nothing is read again. A second, short run shows a service that cannot start (its
journal cannot be written) failing the job at once with the reason; a third runs the script-mode example
(``examples/data_service``), whose program finds the dispatcher in ``TFPS_DATA_SERVICE``.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from support.local_procs import children_by_task, tfps_run
from support.visits import CONTRACT, checkpoint_steps, kill, visits, visits_job, wait_for, wait_for_checkpoints

pytestmark = [pytest.mark.tf, pytest.mark.timeout(900)]  # seven TF processes, two restarts: minutes when loaded

EXAMPLE = Path(__file__).parents[2] / "examples" / "data_service"
IDS = 40_000
BATCH = 8
STEPS = 2400
CHECKPOINT_EVERY = 100
JOB = visits_job(ids=IDS, steps=STEPS, batch=BATCH, every=CHECKPOINT_EVERY)


def test_dynamic_sharding_visits_each_element_at_most_once_through_data_worker_dispatcher_ps_deaths_and_a_preemption(
    tmp_path,
):
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(CONTRACT, code / "visits_contract.py")
    job = tmp_path / "visits.yaml"
    job.write_text(yaml.safe_dump(JOB))
    work = tmp_path / "work"
    root = work / "default" / "visits"
    chief_log = root / "logs" / "chief-0.log"
    argv = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*argv, "run", str(job), "--workdir", str(work), "--code", str(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # faults: at a checkpoint, each after the previous one's process is back
        wait_for("a checkpoint at step 300", lambda: max(checkpoint_steps(chief_log), default=0) >= 300, proc)
        kill(proc.pid, "dataworker-1")
        wait_for_checkpoints("three more checkpoints after the data worker's death", chief_log, 300, 3, proc)
        assert "dataworker-1" in children_by_task(proc.pid)
        kill(proc.pid, "dispatcher-0")
        at = max(checkpoint_steps(chief_log))
        wait_for_checkpoints("three more checkpoints after the dispatcher's death", chief_log, at, 3, proc)
        before_ps = max(checkpoint_steps(chief_log))
        kill(proc.pid, "ps-0")  # the training cluster restarts from its latest checkpoint
        wait_for(
            "two checkpoints after the restart",
            lambda: (
                "resumed from checkpoint" in chief_log.read_text(errors="replace")
                and len([s for s in checkpoint_steps(chief_log) if s > before_ps]) >= 2
            ),
            proc,
        )
        kill(proc.pid, "chief-0", signal.SIGTERM)  # a preemption: the chief saves where it stops, then a restart
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, (out + err)[-4000:]
    log = chief_log.read_text(errors="replace")
    events = out + err
    # the data worker and the dispatcher were recreated alone; the PS's death and the preemption restarted training
    assert re.search(r"dataworker failed \(.*\); recreating it", events), events[-3000:]
    assert re.search(r"dispatcher failed \(.*\); recreating it", events), events[-3000:]
    assert len(re.findall(r"restarting the job from the latest checkpoint", events)) == 2, events[-3000:]
    assert "a preemption: not counted" in events
    assert events.count("the tf.data service (3 processes) kept running") == 2
    saved = [int(s) for s in re.findall(r"preempted \(SIGTERM\) at step (\d+) .*?: checkpoint step \1 saved", log)]
    resumed = [int(s) for s in re.findall(r"resumed from checkpoint step (\d+)", log)]
    assert len(saved) == 1 and resumed == [before_ps, saved[0]], (resumed, before_ps, saved)
    assert f"completed step {STEPS}/{STEPS}" in log
    dispatcher_log = (root / "logs" / "dispatcher-0.log").read_text(errors="replace")
    assert dispatcher_log.count("tf.data service dispatcher on") == 2  # started, then recreated from its journal

    steps = sorted(int(p.name[len("ckpt-") : -len(".index")]) for p in (root / "checkpoints").glob("ckpt-*.index"))
    assert steps[-1] == STEPS and saved[0] in steps and len(steps) >= 10
    for step in steps:
        seen = visits(root / "checkpoints" / f"ckpt-{step}")
        # at most once per element, and exactly the elements of the steps the checkpoint holds
        assert seen.max() <= 1, (step, int(seen.max()))
        assert int(seen.sum()) == step * BATCH, (step, int(seen.sum()))
    final = visits(root / "checkpoints" / f"ckpt-{STEPS}")
    # what the faults cost: elements in flight when each happened were skipped (never read again)
    last = int(np.flatnonzero(final).max())
    assert int((final[:last] == 0).sum()) > 0


def test_a_service_that_cannot_start_fails_the_job_with_the_reason(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(CONTRACT, code / "visits_contract.py")
    doc = yaml.safe_load(yaml.safe_dump(JOB))
    doc["spec"]["training"]["steps"] = 50
    job = tmp_path / "visits.yaml"
    job.write_text(yaml.safe_dump(doc))
    work = tmp_path / "work"
    root = work / "default" / "visits"
    root.mkdir(parents=True)
    (root / "data-service").write_text("a file where the journal's directory should be")
    started = time.monotonic()
    proc = tfps_run(job, work, "--code", str(code), timeout=540)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "dispatcher" in out and "journal" in out and "cannot be written" in out, out[-3000:]
    # at once: the dispatcher started once, never recreated nor the job restarted, and nothing waited out a
    # timeout (the chief would wait TFPS_STARTUP_TIMEOUT, 600 s, for a dispatcher that never listens)
    assert "recreating" not in out and "restarting the job" not in out, out[-3000:]
    assert (root / "logs" / "dispatcher-0.log").read_text(errors="replace").count(
        "===== tfps run: dispatcher-0 start #"
    ) == 1
    took = time.monotonic() - started
    assert took < 300, f"took {took:.0f}s"


def test_the_script_mode_example_reads_its_dataset_through_the_service(tmp_path):
    doc = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    command = doc["spec"]["model"]["command"]
    command[command.index("--steps") + 1] = "40"
    doc["spec"]["training"]["steps"] = 40
    doc["spec"]["export"] = {"enabled": False}
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(doc))
    work = tmp_path / "work"
    proc = tfps_run(job, work, "--code", str(EXAMPLE), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    port = re.search(r"dispatcher-0:(\d+)", out).group(1)
    chief = (work / "default" / "data-service" / "logs" / "chief-0.log").read_text(errors="replace")
    assert f"input: the tf.data service at grpc://127.0.0.1:{port}" in chief
    assert "trained to step 40" in chief
    # the workers registered the program's dataset with the dispatcher, which journaled it
    assert any((work / "default" / "data-service" / "data-service" / "datasets").iterdir())
