"""Prometheus metrics of the operator (served on ``--metrics-port`` at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from .api.models import Phase

PHASES: tuple[str, ...] = Phase.__args__  # type: ignore[attr-defined]

JOBS = Gauge("tfps_jobs", "PSTrainingJobs known to this operator, by phase", ["phase"])
RECONCILES = Counter("tfps_reconcile_total", "Reconciliations of a PSTrainingJob", ["result"])
RECONCILE_SECONDS = Histogram("tfps_reconcile_duration_seconds", "Time of one reconciliation (reads, decisions, writes)",
                              buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
POD_RESTARTS = Counter("tfps_pod_restarts_total", "Trainer pods recreated after a failure or loss", ["role"])
JOB_RESTARTS = Counter("tfps_job_restarts_total", "Whole-job restarts (chief or PS failed)")
API_ERRORS = Counter("tfps_api_errors_total", "Requests the API server refused or failed", ["verb", "code"])
PROGRESS_POLLS = Counter("tfps_progress_polls_total",
                         "Polls of a Running job's chief progress endpoint by the progress monitor, by result "
                         "(ok: status written, unchanged, no_chief, unreachable, invalid, error)", ["result"])

_phases: dict[str, str] = {}


def set_phase(key: str, phase: str | None) -> None:
    """Record the phase of job ``key`` (namespace/name); None forgets it."""
    if phase is None:
        _phases.pop(key, None)
    else:
        _phases[key] = phase
    for p in PHASES:
        JOBS.labels(phase=p).set(sum(1 for v in _phases.values() if v == p))


def serve(port: int, address: str) -> None:
    start_http_server(port, addr=address)
