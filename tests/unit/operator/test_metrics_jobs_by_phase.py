"""``tfps_jobs{phase}``: counts kept by moving a job between two phases, never by walking every job."""

from __future__ import annotations

from prometheus_client import REGISTRY

from tfps_operator import metrics


def count(phase: str) -> float:
    return REGISTRY.get_sample_value("tfps_jobs", {"phase": phase}) or 0.0


def test_a_job_moves_between_phase_counts_and_leaves_when_forgotten():
    before = {p: count(p) for p in metrics.PHASES}
    # every phase is reported from the start, zero or not
    assert all(REGISTRY.get_sample_value("tfps_jobs", {"phase": p}) is not None for p in metrics.PHASES)
    metrics.set_phase("ns/a", "Pending")
    metrics.set_phase("ns/b", "Pending")
    metrics.set_phase("ns/a", "Running")
    metrics.set_phase("ns/a", "Running")  # unchanged: counted once
    assert count("Pending") - before["Pending"] == 1 and count("Running") - before["Running"] == 1
    metrics.set_phase("ns/a", "Succeeded")
    metrics.set_phase("ns/b", None)
    metrics.set_phase("ns/b", None)  # forgetting twice changes nothing
    after = {p: count(p) for p in metrics.PHASES}
    assert after["Pending"] == before["Pending"] and after["Running"] == before["Running"]
    assert after["Succeeded"] - before["Succeeded"] == 1
    metrics.set_phase("ns/a", None)
    assert {p: count(p) for p in metrics.PHASES} == before
