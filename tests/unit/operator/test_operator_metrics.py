"""The operator's per-job gauges and export counters, from the statuses the reconciler decides."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import REGISTRY

from tfps_operator import metrics
from tfps_operator.api.models import PSTrainingJobStatus


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def _status(**kw) -> PSTrainingJobStatus:
    return PSTrainingJobStatus.model_validate(kw)


def test_job_gauges_follow_the_status_and_go_when_the_job_does():
    t = datetime(2026, 1, 1, tzinfo=UTC)
    st = _status(
        phase="Running",
        restarts=2,
        progress={"step": 40, "loss": 0.25, "stepsPerSecond": 12.5},
        checkpoint={"step": 30, "time": t.isoformat()},
        conditions=[{"type": "Running", "status": "True"}, {"type": "Stalled", "status": "True"}],
    )
    metrics.set_job("ml/mnist", st, 100)
    ids = {"job_namespace": "ml", "pstrainingjob": "mnist"}
    assert _value("tfps_job_step", **ids) == 40 and _value("tfps_job_target_steps", **ids) == 100
    assert _value("tfps_job_loss", **ids) == 0.25 and _value("tfps_job_steps_per_second", **ids) == 12.5
    assert _value("tfps_job_checkpoint_timestamp_seconds", **ids) == t.timestamp()
    assert _value("tfps_job_restart_count", **ids) == 2
    assert (
        _value("tfps_job_phase", **ids, phase="Running") == 1 and _value("tfps_job_phase", **ids, phase="Failed") == 0
    )
    assert _value("tfps_job_condition", **ids, type="Stalled") == 1
    # the condition cleared: 0, not a stale 1
    metrics.set_job("ml/mnist", st.model_copy(update={"conditions": st.conditions[:1]}), 100)
    assert _value("tfps_job_condition", **ids, type="Stalled") == 0
    metrics.forget_job("ml/mnist")
    assert _value("tfps_job_step", **ids) is None and _value("tfps_job_condition", **ids, type="Running") is None
    assert _value("tfps_job_phase", **ids, phase="Running") is None
