"""Backoff for a replica that keeps failing and being recreated alone (a worker or the evaluator).

Like the kubelet's CrashLoopBackOff: the first failure is replaced at once, then 10 s, 20 s, 40 s ...
up to 5 minutes; a replica that has not failed for 10 minutes starts again from zero. The counts
live in the operator's memory (an operator restart forgets them, which only shortens one wait).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

BASE_SECONDS = 10.0
MAX_SECONDS = 300.0
RESET_AFTER_SECONDS = 600.0


@dataclass(frozen=True)
class Replacements:
    count: int
    """Replacements so far (within the reset window)."""
    last: datetime


def delay(count: int) -> float:
    """Seconds to wait after the ``count``-th replacement before the next one."""
    return 0.0 if count <= 0 else min(MAX_SECONDS, BASE_SECONDS * 2 ** (count - 1))


def not_before(entry: Replacements | None, now: datetime) -> datetime | None:
    """The earliest time the next replacement may happen; None when it may happen now."""
    if entry is None or (now - entry.last).total_seconds() >= RESET_AFTER_SECONDS:
        return None
    when = entry.last + timedelta(seconds=delay(entry.count))
    return when if when > now else None


def record(entry: Replacements | None, now: datetime) -> Replacements:
    if entry is None or (now - entry.last).total_seconds() >= RESET_AFTER_SECONDS:
        return Replacements(1, now)
    return Replacements(entry.count + 1, now)
