"""When a job is looked at again: the spacing of progress-only status writes, the back-off after a failed
pass, the next pass after one that acted or did nothing, and the settling of a burst of events.

Times are seconds; ``now`` and ``last_write`` are readings of one monotonic clock. The settings come
from :class:`~tfps_operator.settings.OperatorSettings`.
"""

from __future__ import annotations

RECHECK_AFTER_ACTING_SECONDS = 5.0
"""After a pass that acted, the next one comes this soon at the latest: its writes come back as
events, and if one does not, the job is looked at anyway."""


def _doubling(times: int) -> float:
    """2**times, the exponent capped so a count that grows for days cannot overflow a float."""
    return float(2 ** max(0, min(times, 62)))


def progress_wait(last_write: float, progress_writes: int, now: float, interval: float, interval_max: float) -> float:
    """Seconds until a progress-only status change may be written (0 or less: now). The spacing is
    ``interval`` after the last write, doubling with each progress-only write in a row
    (``progress_writes``), up to ``interval_max`` (a long start is reported at 3, 9, 21, 45, 75 s...)."""
    spacing = min(interval * _doubling(progress_writes), max(interval_max, interval))
    return last_write + spacing - now


def progress_writes_after_write(progress_writes: int, progress_only: bool) -> int:
    """The count of progress-only writes in a row after one more status write: a significant write
    resets it."""
    return progress_writes + 1 if progress_only else 0


def deferred_write_delay(wait: float, requeue_after: float | None) -> float:
    """Seconds until the next pass when a progress-only write waits ``wait`` seconds: sooner when
    the plan wants the job looked at before then."""
    return wait if requeue_after is None else min(wait, requeue_after)


def retry_delay(failures: int, base: float, cap: float) -> float:
    """Seconds before the next pass after the ``failures``-th failed pass in a row (a child the API
    server would not create, or an error): ``base``, doubling with each further failure, up to ``cap``."""
    return min(cap, base * _doubling(failures - 1))


def next_pass(acted: bool, requeue_after: float | None, resync: float) -> float:
    """Seconds until the next pass after one that succeeded. After acting: soon (our own writes wake
    the job when the watch echoes them; this covers a lost echo). Otherwise when the plan asks, or
    at the periodic resync."""
    if acted:
        return min(requeue_after or resync, RECHECK_AFTER_ACTING_SECONDS)
    return requeue_after if requeue_after is not None else resync


def sleep_before_next_pass(delay: float, resync: float) -> float:
    """How long the job's loop sleeps (unless an event wakes it): every job is looked at at least
    every ``resync`` seconds."""
    return min(delay, resync)


def settle_delay(woken_by_event: bool, since_last_pass: float, settle: float) -> float:
    """Seconds to wait before a pass an event asked for. An event after a quiet spell is acted on at
    once (a chief's exit); one that follows the last pass closely (within ``settle``) is likely
    part of a burst (six pods scheduled, then running): wait ``settle`` to let the rest land."""
    return settle if woken_by_event and settle > 0 and since_last_pass < settle else 0.0
