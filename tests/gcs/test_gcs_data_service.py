"""The tf.data service with ``processingMode: Off``, its dispatcher's journal on gs:// (docs/data-service.md).

One ``tfps run --storage gs://...`` of the visits contract (``tests/support/visits.py``) through a dispatcher and
two data workers without sharding, its checkpoints and the dispatcher's journal in the emulated bucket. The test
kills the dispatcher (recreated, it restores its state from the journal on gs://), then both data workers:
training waits for them, and each, recreated, begins the dataset again. Every checkpoint is read back from the
bucket and checked against what the docs promise for Off: the model took exactly ``step × batch`` elements; each
data worker produces the whole dataset, so before the data workers' deaths an element is seen at most twice
(some twice), and at the end three or four times, never more.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support.gcs import GcsEmulator
from support.visits import CONTRACT, checkpoint_steps, kill, visits, visits_job, wait_for, wait_for_checkpoints

pytestmark = [pytest.mark.tf, pytest.mark.timeout(900)]

IDS = 60_000  # more than the run takes: no element comes round twice in one data worker's pass
BATCH = 8
STEPS = 6000
EVERY = 300


def served(dispatcher_log: Path) -> int:
    """How many times the dispatcher started serving."""
    text = dispatcher_log.read_text(errors="replace") if dispatcher_log.exists() else ""
    return text.count("tf.data service dispatcher on")


def checkpoint_from_bucket(gcs: GcsEmulator, bucket: str, prefix: str, step: int, into: Path) -> Path:
    """A local copy of ``ckpt-<step>`` (its index and data objects)."""
    into.mkdir(parents=True, exist_ok=True)
    for name in gcs.objects(bucket, f"{prefix}/checkpoints/ckpt-{step}."):
        (into / name.rsplit("/", 1)[1]).write_bytes(gcs.get(bucket, name))
    return into / f"ckpt-{step}"


def test_off_visits_each_element_once_per_data_worker_and_the_dispatcher_restores_its_gs_journal(
    gcs: GcsEmulator, bucket: str, tmp_path: Path
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(CONTRACT, code / "visits_contract.py")
    job = tmp_path / "visits.yaml"
    job.write_text(yaml.safe_dump(visits_job(ids=IDS, steps=STEPS, batch=BATCH, every=EVERY, mode="Off")))
    work = tmp_path / "work"
    logs = work / "default" / "visits" / "logs"
    chief_log = logs / "chief-0.log"
    prefix = "jobs/default/visits"
    argv = [sys.executable, "-c", "import sys; from tfps_operator.tools.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*argv, "run", str(job), "--workdir", str(work), "--code", str(code), "--storage", f"gs://{bucket}/jobs"],
        env=gcs.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for("a checkpoint at step 100", lambda: max(checkpoint_steps(chief_log), default=0) >= 100, proc, 300)
        kill(proc.pid, "dispatcher-0")
        wait_for("the dispatcher restored from its journal", lambda: served(logs / "dispatcher-0.log") == 2, proc)
        at = max(checkpoint_steps(chief_log))
        wait_for_checkpoints("two checkpoints after the dispatcher's restart", chief_log, at, 2, proc)
        dataworker_killed_after = max(checkpoint_steps(chief_log))
        # Both, so that training must wait for a recreated one: each registers with the restored dispatcher,
        # gets a task for the iteration it read from its journal, and begins the dataset again.
        kill(proc.pid, "dataworker-0")
        kill(proc.pid, "dataworker-1")
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    events = out + err
    assert proc.returncode == 0, events[-4000:]
    assert re.search(r"dispatcher failed \(.*\); recreating it", events), events[-3000:]
    assert re.search(r"dataworker failed \(.*\); recreating it", events), events[-3000:]
    assert "restarting the job" not in events  # the service's faults never restart training

    journal = f"gs://{bucket}/{prefix}/data-service"
    dispatcher_log = (logs / "dispatcher-0.log").read_text(errors="replace")
    assert dispatcher_log.count(f"journal in {journal}") == 2, dispatcher_log[-2000:]
    assert any("/journal" in name for name in gcs.objects(bucket, f"{prefix}/data-service/")), "no journal on gs://"
    assert "no sharding (processingMode Off)" in chief_log.read_text(errors="replace")
    for task in ("dataworker-0", "dataworker-1"):
        recreated = (logs / f"{task}.log").read_text(errors="replace")
        assert recreated.count("tf.data service worker on") == 2, recreated[-2000:]  # registered with the restored one

    steps = sorted(
        int(m.group(1))
        for name in gcs.objects(bucket, f"{prefix}/checkpoints/")
        if (m := re.search(r"/ckpt-(\d+)\.index$", name))
    )
    assert steps[-1] == STEPS and len(steps) >= STEPS // EVERY
    twice = False
    for step in steps:
        seen = visits(checkpoint_from_bucket(gcs, bucket, prefix, step, tmp_path / "ckpt" / str(step)))
        assert int(seen.sum()) == step * BATCH, (step, int(seen.sum()))  # every element of every step, once
        if step <= dataworker_killed_after:
            assert seen.max() <= 2, (step, int(seen.max()))  # once per data worker: two passes of the dataset
            twice |= bool((seen == 2).any())
    assert twice, "no element was seen twice: the data workers did not each produce the whole dataset"
    final = visits(checkpoint_from_bucket(gcs, bucket, prefix, STEPS, tmp_path / "ckpt" / "final"))
    # the recreated data workers began the dataset again: a third pass at least, a fourth at most
    assert 3 <= final.max() <= 4, int(final.max())
