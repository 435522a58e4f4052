"""The progress endpoint (JSON + Prometheus) and the checkpoint policy, without a cluster."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tfps_trainer.status_server import CheckpointInfo, Progress, serve


def _get(port: int, path: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.status, resp.headers["Content-Type"], resp.read()


def test_status_and_metrics_follow_progress() -> None:
    progress = Progress(role="chief", target_steps=1000, job="demo")
    server = serve(progress, default_port=0, environ={"TFPS_PROGRESS_HOST": "127.0.0.1"})
    try:
        status, ctype, body = _get(server.port, "/status")
        snap = json.loads(body)
        assert status == 200 and ctype == "application/json"
        assert snap["state"] == "running" and snap["step"] == 0 and snap["checkpoint"] is None and snap["loss"] is None

        progress.update(
            step=420,
            loss=0.25,
            steps_per_second=95.5,
            checkpoint=CheckpointInfo(step=400, path="/data/ckpt-400", time="2026-12-02T15:00:00+00:00"),
        )
        snap = json.loads(_get(server.port, "/status")[2])
        assert snap["step"] == 420 and snap["target_steps"] == 1000 and snap["loss"] == 0.25
        assert snap["checkpoint"] == {"step": 400, "path": "/data/ckpt-400", "time": "2026-12-02T15:00:00+00:00"}

        _, ctype, text = _get(server.port, "/metrics")
        assert ctype.startswith("text/plain")
        samples = {
            (s.name, s.labels.get("state")): s.value
            for fam in text_string_to_metric_families(text.decode())
            for s in fam.samples
        }
        assert samples[("tfps_step", None)] == 420
        assert samples[("tfps_checkpoint_step", None)] == 400
        assert samples[("tfps_steps_per_second", None)] == 95.5
        assert samples[("tfps_state", "running")] == 1 and samples[("tfps_state", "failed")] == 0
        assert math.isclose(samples[("tfps_checkpoint_timestamp_seconds", None)], 1796223600.0)

        progress.update(state="failed", message="lost parameter server ps/1", loss=float("nan"))
        snap = json.loads(_get(server.port, "/status")[2])
        assert snap["state"] == "failed" and snap["message"] == "lost parameter server ps/1"
        assert snap["loss"] is None  # NaN is not valid JSON: reported as null

        with pytest.raises(urllib.error.HTTPError) as err:
            _get(server.port, "/nope")
        assert err.value.code == 404
    finally:
        server.stop()


def test_unknown_progress_field_is_rejected() -> None:
    with pytest.raises(AttributeError):
        Progress(role="chief", target_steps=1).update(stepz=3)


@pytest.mark.tf
def test_checkpoint_policy_steps_and_seconds() -> None:
    from tfps_trainer.checkpoints import Policy

    p = Policy(every_steps=100, every_seconds=None, last_step=0, last_time=0.0)
    assert p.next_step_boundary(0) == 100 and p.next_step_boundary(150) == 200
    assert not p.due(99) and p.due(100) and p.due(130)
    p.saved(100)
    assert not p.due(100) and not p.due(199) and p.due(200)

    t = Policy(every_steps=None, every_seconds=10.0, last_step=0, last_time=0.0)
    assert t.next_step_boundary(5) is None
    assert not t.due(5, now=9.9) and t.due(5, now=10.0)
    t.saved(5, now=10.0)
    assert not t.due(5, now=30.0), "nothing new to save"
    assert t.due(6, now=20.0)
