"""Backoff for a replica that keeps failing and being recreated alone (a worker or the evaluator).

Like the kubelet's CrashLoopBackOff: the first failure is replaced at once, then after a delay that
doubles with each further failure up to a maximum, counted from the previous replacement; a replica
that has not been replaced for 10 minutes starts again from zero. The operator keeps its records in
the job's status (``status.recreations``), so an operator restart keeps the back-off; ``tfps run``
keeps the same records in memory.

One rule, two schedules: the operator waits 10 s, 20 s, 40 s ... up to 5 minutes (:data:`OPERATOR`),
as the kubelet does, so a crash-looping pod does not churn the API server and the scheduler;
``tfps run`` waits 2 s, 4 s ... up to 30 s (:data:`LOCAL`): a local process costs nothing to
restart, and the person debugging a model is waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..api.models import Recreation


@dataclass(frozen=True)
class Schedule:
    base_seconds: float
    max_seconds: float
    reset_after_seconds: float = 600.0


OPERATOR = Schedule(base_seconds=10.0, max_seconds=300.0)
LOCAL = Schedule(base_seconds=2.0, max_seconds=30.0)

BASE_SECONDS = OPERATOR.base_seconds
MAX_SECONDS = OPERATOR.max_seconds
RESET_AFTER_SECONDS = OPERATOR.reset_after_seconds


def delay(count: int, schedule: Schedule = OPERATOR) -> float:
    """Seconds to wait after the ``count``-th replacement before the next one."""
    if count <= 0:
        return 0.0
    # The exponent is capped so a replica failing for days cannot overflow the float.
    return min(schedule.max_seconds, schedule.base_seconds * float(2 ** min(count - 1, 62)))


def _expired(entry: Recreation, now: datetime, schedule: Schedule) -> bool:
    return entry.last is None or (now - entry.last).total_seconds() >= schedule.reset_after_seconds


def not_before(entry: Recreation | None, now: datetime, schedule: Schedule = OPERATOR) -> datetime | None:
    """The earliest time the next replacement may happen; None when it may happen now."""
    if entry is None or entry.last is None or _expired(entry, now, schedule):
        return None
    when = entry.last + timedelta(seconds=delay(entry.recent, schedule))
    return when if when > now else None


def record(entry: Recreation | None, now: datetime, schedule: Schedule = OPERATOR) -> Recreation:
    """The record after one more replacement at ``now``."""
    if entry is None:
        return Recreation(total=1, recent=1, last=now)
    recent = 1 if _expired(entry, now, schedule) else entry.recent + 1
    return Recreation(total=entry.total + 1, recent=recent, last=now)
