"""The progress monitor's pure parts (parsing the chief's report, deciding what to write) and its HTTP
fetch against the trainer's real progress server on loopback."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from tfps_operator.api.models import CheckpointStatus, PSTrainingJobStatus, TrainingProgress
from tfps_operator.monitor import ProgressMonitor, Report, chief_address, owned_status, parse_report, status_changes
from tfps_operator.reconcile.observed import pod_obs
from tfps_operator.settings import BuildConfig, OperatorSettings
from tfps_trainer.status_server import CheckpointInfo, Progress, ProgressServer

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
CK_TIME = "2026-01-01T11:59:30+00:00"


def chief_json(**over):
    body = {
        "role": "chief",
        "job": "mnist",
        "state": "running",
        "message": "",
        "step": 120,
        "target_steps": 1000,
        "loss": 0.25,
        "steps_per_second": 41.5,
        "checkpoint": {"step": 100, "path": "/data/ckpt/ckpt-100", "time": CK_TIME},
        "metrics": {},
        "updated": "2026-01-01T11:59:59+00:00",
    }
    body.update(over)
    return json.dumps(body).encode()


# --- parsing --------------------------------------------------------------------------------------


def test_a_chief_report_gives_checkpoint_and_progress():
    r = parse_report(chief_json(), "mnist")
    assert r.checkpoint == CheckpointStatus(step=100, path="/data/ckpt/ckpt-100", time=datetime.fromisoformat(CK_TIME))
    assert (r.progress.step, r.progress.loss, r.progress.steps_per_second) == (120, 0.25, 41.5)


def test_the_trainers_own_snapshot_parses():
    p = Progress(role="chief", target_steps=50, job="mnist")
    p.update(step=7, loss=1.5, steps_per_second=3.0, checkpoint=CheckpointInfo(5, "/d/ckpt-5", CK_TIME))
    r = parse_report(json.dumps(p.snapshot()), "mnist")
    assert (r.checkpoint.step, r.progress.step) == (5, 7)


@pytest.mark.parametrize("raw", [b"", b"not json", b"\xff\xfe", b"[1, 2]", b"42", b"null", b'"text"', b"{}"])
def test_garbage_is_not_a_report(raw):
    assert parse_report(raw, "mnist") is None


def test_another_jobs_or_another_roles_report_is_ignored():
    assert parse_report(chief_json(job="other"), "mnist") is None
    assert parse_report(chief_json(role="evaluator"), "mnist") is None


@pytest.mark.parametrize(
    "checkpoint",
    [
        None,
        "ckpt-100",
        [100],
        {"step": "100", "path": "/p", "time": CK_TIME},
        {"step": True, "path": "/p", "time": CK_TIME},
        {"step": -1, "path": "/p", "time": CK_TIME},
        {"step": 100, "path": 5, "time": CK_TIME},
        {"step": 100, "path": "", "time": CK_TIME},
        {"step": 100, "path": "/p", "time": "yesterday"},
        {"step": 100, "path": "/p", "time": 1735732800},
        {"step": 100, "path": "/p"},
    ],
)
def test_a_bad_checkpoint_is_dropped_but_progress_still_counts(checkpoint):
    r = parse_report(chief_json(checkpoint=checkpoint), "mnist")
    assert r.checkpoint is None and r.progress.step == 120


@pytest.mark.parametrize(
    "field,value",
    [
        ("loss", "0.2"),
        ("loss", float("nan")),
        ("loss", True),
        ("steps_per_second", None),
        ("steps_per_second", {"x": 1}),
        ("loss", float("inf")),
    ],
)
def test_a_bad_number_becomes_absent(field, value):
    raw = json.dumps(json.loads(chief_json()) | {field: value}).encode()  # NaN/Infinity as Python's json writes them
    r = parse_report(raw, "mnist")
    assert getattr(r.progress, field) is None and r.progress.step == 120 and r.checkpoint.step == 100


def test_a_bad_step_drops_progress_but_keeps_the_checkpoint():
    for step in ("120", -3, 1.5, None, False):
        r = parse_report(chief_json(step=step), "mnist")
        assert r.progress is None and r.checkpoint.step == 100


def test_a_time_without_zone_is_utc():
    r = parse_report(chief_json(checkpoint={"step": 1, "path": "/p", "time": "2026-01-01T11:59:30"}), "mnist")
    assert r.checkpoint.time == datetime.fromisoformat(CK_TIME)


# --- change detection -----------------------------------------------------------------------------


def test_first_report_writes_both_fields_in_wire_form():
    patch = status_changes(PSTrainingJobStatus(), parse_report(chief_json(), "mnist"), NOW)
    assert patch["checkpoint"] == {"step": 100, "path": "/data/ckpt/ckpt-100", "time": "2026-01-01T11:59:30Z"}
    assert patch["progress"] == {"step": 120, "loss": 0.25, "stepsPerSecond": 41.5, "updated": "2026-01-01T11:59:59Z"}


def test_nothing_moved_means_no_write_even_if_the_report_is_newer():
    report = parse_report(chief_json(), "mnist")
    stored = owned_status(status_changes(PSTrainingJobStatus(), report, NOW))
    again = parse_report(chief_json(updated="2026-01-01T12:05:00+00:00"), "mnist")
    assert status_changes(stored, again, NOW) == {}


def test_only_what_moved_is_written():
    stored = owned_status(status_changes(PSTrainingJobStatus(), parse_report(chief_json(), "mnist"), NOW))
    assert set(status_changes(stored, parse_report(chief_json(step=130, loss=0.2), "mnist"), NOW)) == {"progress"}
    new_ck = {"step": 130, "path": "/data/ckpt/ckpt-130", "time": "2026-01-01T12:00:10+00:00"}
    assert set(status_changes(stored, parse_report(chief_json(checkpoint=new_ck), "mnist"), NOW)) == {"checkpoint"}


def test_a_chief_without_a_checkpoint_does_not_erase_the_last_known_one():
    stored = owned_status({"checkpoint": {"step": 100, "path": "/p", "time": "2026-01-01T11:59:30Z"}})
    patch = status_changes(stored, Report(checkpoint=None, progress=TrainingProgress(step=0)), NOW)
    assert set(patch) == {"progress"} and patch["progress"]["updated"] == "2026-01-01T12:00:00Z"


def test_an_unreadable_stored_field_counts_as_absent():
    st = owned_status({"checkpoint": {"step": "many"}, "progress": "fast", "phase": "Running"})
    assert st.checkpoint is None and st.progress is None


# --- the chief's address --------------------------------------------------------------------------


def test_chief_address_only_for_a_running_pod_with_an_ip():
    running = {"metadata": {"name": "j-chief-0"}, "status": {"phase": "Running", "podIP": "127.1.0.7"}}
    assert chief_address(pod_obs(running)) == "127.1.0.7"
    assert chief_address(None) is None
    assert chief_address(pod_obs({"status": {"phase": "Pending", "podIP": "127.1.0.7"}})) is None
    assert chief_address(pod_obs({"status": {"phase": "Running"}})) is None
    going = {**running, "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert chief_address(pod_obs(going)) is None


# --- fetching from the trainer's real server ------------------------------------------------------


def test_fetch_reads_the_trainers_progress_server_and_fails_fast_when_nothing_listens():
    progress = Progress(role="chief", target_steps=10, job="mnist")
    progress.update(step=3, checkpoint=CheckpointInfo(2, "/d/ckpt-2", CK_TIME))
    server = ProgressServer(progress, "127.0.0.1", 0).start()
    try:
        monitor = ProgressMonitor(
            None, OperatorSettings(monitor_seconds=1.0, build=BuildConfig(progress_port=server.port))
        )  # type: ignore[arg-type]

        async def go():
            try:
                raw = await monitor.fetch("127.0.0.1")
                monitor.port = server.port + 1 if server.port < 65535 else server.port - 1
                with pytest.raises(OSError):
                    await monitor.fetch("127.0.0.1")  # connection refused: an OSError subclass in aiohttp
                return raw
            finally:
                await monitor.close()

        raw = asyncio.run(go())
    finally:
        server.stop()
    r = parse_report(raw, "mnist")
    assert (r.checkpoint.step, r.progress.step) == (2, 3)
