"""What a pass writes to the job's status, which changes wait (pure)."""

from __future__ import annotations

from typing import Any

from support.operator_helpers import status
from tfps_operator.api.models import PSTrainingJobStatus
from tfps_operator.reconcile.plan import Delete, Event, Plan
from tfps_operator.reconcile.writes import (
    OWNED_STATUS_FIELDS,
    minor_status_change,
    progress_only,
    status_write,
)

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mnist-worker-0", "namespace": "team-a"}}
SCHEDULING = {"type": "Scheduled", "status": "False", "reason": "Scheduling", "message": "2 pods"}


def pending(**kw: Any) -> PSTrainingJobStatus:
    base = {
        "phase": "Pending",
        "workers": "0/2",
        "replicaStatuses": {"worker": {"active": 2}},
        "conditions": [SCHEDULING],
    }
    return status(**{**base, **kw})


def test_an_unchanged_status_writes_nothing():
    assert status_write(pending(), pending()) is None


def test_a_changed_status_sends_every_owned_field_and_a_removed_one_as_null():
    patch = status_write(pending(reason="CreateFailed"), pending())
    assert patch is not None and patch["phase"] == "Pending" and patch["workers"] == "0/2"
    assert "reason" in patch and patch["reason"] is None  # a merge patch removes it
    assert set(patch) <= set(OWNED_STATUS_FIELDS)


def test_the_progress_monitors_field_is_never_written_by_the_reconciler():
    patch = status_write(status(), status(phase="Running", progress={"step": 5}))
    assert patch is not None and "progress" not in patch


def test_a_count_moving_with_nothing_else_to_do_may_wait():
    plan = Plan(status=pending(workers="1/2", replicaStatuses={"worker": {"active": 2, "ready": 1}}))
    assert progress_only(pending(), plan)


def test_a_count_moving_alongside_a_child_change_or_an_event_is_written_at_once():
    moved = pending(workers="1/2")
    assert not progress_only(pending(), Plan(status=moved, actions=[Delete("Pod", "mnist-worker-1")]))
    assert not progress_only(pending(), Plan(status=moved, events=[Event("Normal", "Started", "x")]))


def test_a_new_checkpoint_is_significant():
    assert not minor_status_change(pending(), pending(checkpoint={"step": 10}))
