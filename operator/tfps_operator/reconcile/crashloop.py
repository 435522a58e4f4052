"""Backoff for a replica that keeps failing and being recreated alone (a worker or the evaluator).

Like the kubelet's CrashLoopBackOff: the first failure is replaced at once, then 10 s, 20 s, 40 s ...
up to 5 minutes; a replica that has not failed for 10 minutes starts again from zero. The records
live in the job's status (``status.recreations``), so an operator restart keeps the back-off.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..api.models import Recreation

BASE_SECONDS = 10.0
MAX_SECONDS = 300.0
RESET_AFTER_SECONDS = 600.0


def delay(count: int) -> float:
    """Seconds to wait after the ``count``-th replacement before the next one."""
    return 0.0 if count <= 0 else min(MAX_SECONDS, BASE_SECONDS * 2 ** (count - 1))


def _expired(entry: Recreation, now: datetime) -> bool:
    return entry.last is None or (now - entry.last).total_seconds() >= RESET_AFTER_SECONDS


def not_before(entry: Recreation | None, now: datetime) -> datetime | None:
    """The earliest time the next replacement may happen; None when it may happen now."""
    if entry is None or entry.last is None or _expired(entry, now):
        return None
    when = entry.last + timedelta(seconds=delay(entry.recent))
    return when if when > now else None


def record(entry: Recreation | None, now: datetime) -> Recreation:
    """The record after one more replacement at ``now``."""
    if entry is None:
        return Recreation(total=1, recent=1, last=now)
    recent = 1 if _expired(entry, now) else entry.recent + 1
    return Recreation(total=entry.total + 1, recent=recent, last=now)
