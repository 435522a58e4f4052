"""Prometheus metrics of the operator (served on ``--metrics-port`` at ``/metrics``)."""

from __future__ import annotations

from typing import get_args

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from .api.models import Phase, PSTrainingJobStatus
from .reconcile.plan import Outcome, Plan

PHASES: tuple[str, ...] = get_args(Phase)

JOBS = Gauge("tfps_jobs", "PSTrainingJobs known to this operator, by phase", ["phase"])
for _phase in PHASES:  # every phase reported from the start, at 0 while no job is in it
    JOBS.labels(phase=_phase)
RECONCILES = Counter("tfps_reconcile_total", "Reconciliations of a PSTrainingJob", ["result"])
RECONCILE_SECONDS = Histogram(
    "tfps_reconcile_duration_seconds",
    "Time of one reconciliation (reads, decisions, writes)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
POD_RESTARTS = Counter("tfps_pod_restarts_total", "Trainer pods recreated after a failure or loss", ["role"])
JOB_RESTARTS = Counter("tfps_job_restarts_total", "Whole-job restarts (chief or PS failed)")
API_ERRORS = Counter("tfps_api_errors_total", "Requests the API server refused or failed", ["verb", "code"])
WATCH_RELISTS = Counter(
    "tfps_watch_relists_total",
    "Lists of a child kind after its watch could not resume: reason Expired (410 Gone: the API server no longer "
    "serves its resourceVersion, as after a restart over compacted history) or Error",
    ["kind", "reason"],
)
LEADER = Gauge("tfps_operator_leader", "1 while this replica holds the leader Lease (always 1 without leader election)")
LEADER_CHANGES = Counter(
    "tfps_operator_leader_changes_total", "Times this replica became leader or stopped leading", ["to"]
)
WRITES_REFUSED = Counter(
    "tfps_operator_writes_refused_total", "Writes not sent because this replica's leadership had lapsed"
)
PROGRESS_POLLS = Counter(
    "tfps_progress_polls_total",
    "Polls of a Running job's chief progress endpoint by the progress monitor, by result "
    "(ok: status written, unchanged, no_chief, unreachable, invalid, error)",
    ["result"],
)

EXPORT_ARTIFACTS = Counter(
    "tfps_export_artifacts_total",
    "Export outcomes per requested artifact (passed: verified and published; failed)",
    ["format", "result"],
)

# Per-job gauges from the status the operator writes (progress from the chief's endpoint, which only the
# operator may reach): what a dashboard plots per job. Removed when the job is deleted.
# Not ``namespace``/``job``: Prometheus sets those on every scraped series (the operator's own namespace,
# the scrape job) and would rename ours to exported_namespace/exported_job.
_JOB = ["job_namespace", "pstrainingjob"]
JOB_STEP = Gauge("tfps_job_step", "Global training step reported by the job's chief", _JOB)
JOB_TARGET_STEPS = Gauge("tfps_job_target_steps", "spec.training.steps of the job", _JOB)
JOB_LOSS = Gauge("tfps_job_loss", "Latest training loss reported by the job's chief", _JOB)
JOB_STEPS_PER_SECOND = Gauge("tfps_job_steps_per_second", "Training throughput reported by the job's chief", _JOB)
JOB_CHECKPOINT_TIME = Gauge("tfps_job_checkpoint_timestamp_seconds", "Unix time of the job's latest checkpoint", _JOB)
JOB_RESTART_COUNT = Gauge("tfps_job_restart_count", "status.restarts: whole-job restarts of the job so far", _JOB)
JOB_WORKERS = Gauge("tfps_job_workers", "Workers in the job's current run (status.clusterSize.worker)", _JOB)
JOB_WORKERS_LEFT_OUT = Gauge(
    "tfps_job_workers_left_out",
    "Workers asked for and not in the run (not running yet, not schedulable, or not admitted)",
    _JOB,
)
JOB_RESIZE_COUNT = Gauge("tfps_job_resize_count", "status.resizes: restarts of the job that resized it", _JOB)
JOB_PHASE = Gauge("tfps_job_phase", "1 for the job's current phase", [*_JOB, "phase"])
JOB_CONDITION = Gauge(
    "tfps_job_condition",
    "1 while the job's condition of this type is True, else 0 "
    "(Running, Succeeded, Failed, Stalled, ExportComplete, ...)",
    [*_JOB, "type"],
)
_conditions: dict[str, set[str]] = {}
_JOB_GAUGES = (
    JOB_STEP,
    JOB_TARGET_STEPS,
    JOB_LOSS,
    JOB_STEPS_PER_SECOND,
    JOB_CHECKPOINT_TIME,
    JOB_RESTART_COUNT,
    JOB_WORKERS,
    JOB_WORKERS_LEFT_OUT,
    JOB_RESIZE_COUNT,
)

_phases: dict[str, str] = {}


def set_phase(key: str, phase: str | None) -> None:
    """Record the phase of job ``key`` (namespace/name); None forgets it. Only the two phases it moves
    between are counted again (a pass must not cost a walk over every job)."""
    old = _phases.pop(key, None) if phase is None else _phases.get(key)
    if phase is not None:
        _phases[key] = phase
    if old == phase:
        return
    for p, delta in ((old, -1), (phase, 1)):
        if p in PHASES:
            JOBS.labels(phase=p).inc(delta)


def set_job(key: str, status: PSTrainingJobStatus, target_steps: int | None) -> None:
    """The per-job gauges of job ``key`` (namespace/name) from the status just decided (no target for a
    script-mode job that names no step count)."""
    namespace, _, job = key.partition("/")
    values = {
        JOB_TARGET_STEPS: target_steps,
        JOB_RESTART_COUNT: status.restarts,
        JOB_WORKERS: status.cluster_size.worker if status.cluster_size else None,
        JOB_WORKERS_LEFT_OUT: status.workers_left_out,
        JOB_RESIZE_COUNT: status.resizes,
        JOB_STEP: status.progress.step if status.progress else None,
        JOB_LOSS: status.progress.loss if status.progress else None,
        JOB_STEPS_PER_SECOND: status.progress.steps_per_second if status.progress else None,
        JOB_CHECKPOINT_TIME: status.checkpoint.time.timestamp()
        if status.checkpoint and status.checkpoint.time
        else None,
    }
    for gauge, value in values.items():
        if value is not None:
            gauge.labels(job_namespace=namespace, pstrainingjob=job).set(value)
    for p in PHASES:
        JOB_PHASE.labels(job_namespace=namespace, pstrainingjob=job, phase=p).set(1.0 if status.phase == p else 0.0)
    types = _conditions.setdefault(key, set())
    types.update(c.type for c in status.conditions)
    true = {c.type for c in status.conditions if c.status == "True"}
    for t in types:
        JOB_CONDITION.labels(job_namespace=namespace, pstrainingjob=job, type=t).set(1.0 if t in true else 0.0)


def forget_job(key: str) -> None:
    namespace, _, job = key.partition("/")
    for gauge in _JOB_GAUGES:
        try:
            gauge.remove(namespace, job)
        except KeyError:
            pass
    for p in PHASES:
        try:
            JOB_PHASE.remove(namespace, job, p)
        except KeyError:
            pass
    for t in _conditions.pop(key, set()):
        try:
            JOB_CONDITION.remove(namespace, job, t)
        except KeyError:
            pass


def record_pass(key: str, plan: Plan, outcome: Outcome, target_steps: int | None) -> None:
    """Count what a pass of job ``key`` (namespace/name) carried out (not one whose status write was refused)."""
    set_phase(key, plan.status.phase)
    set_job(key, plan.status, target_steps)
    if outcome.status_written:
        for fmt, result in plan.export_outcomes:
            EXPORT_ARTIFACTS.labels(format=fmt, result=result).inc()
    for role in plan.recreated:
        POD_RESTARTS.labels(role=role).inc()
    if plan.job_restarted:
        JOB_RESTARTS.inc()


def serve(port: int, address: str) -> None:
    start_http_server(port, addr=address)
