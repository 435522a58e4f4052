"""Status matches reality after the operator cleans up: a finished job's replicaStatuses and Workers
column count the pods that exist, not the ones it has just deleted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from support.operator_helpers import CFG, T0, all_pods, later, make_job, observed, status
from tfps_operator.reconcile.machine import reconcile


def test_replica_statuses_follow_the_cleanup_of_a_finished_job():
    job = make_job(ps=1, workers=2, export={"enabled": False})
    pods = all_pods(job, chief_0="Succeeded")
    done = reconcile(job, status(phase="Running", startTime="2026-01-01T11:00:00Z"), observed(job, pods), T0, CFG)
    assert done.status.phase == "Succeeded"
    left = [p for p in pods if "chief" in p["metadata"]["name"]]  # the cleanup deleted ps and workers
    after = reconcile(job, done.status, observed(job, left), later(10), CFG)
    rs = after.status.replica_statuses
    assert (rs["ps"].active, rs["worker"].active, after.status.workers) == (0, 0, "0/2")
