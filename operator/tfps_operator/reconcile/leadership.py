"""Leader election between operator replicas on a ``coordination.k8s.io/v1`` Lease: the rules, pure.

The rules are client-go's (``k8s.io/client-go/tools/leaderelection``), so the Lease reads the same to
``kubectl`` and to anyone who knows Kubernetes' own controllers:

- A replica holds the lease while it renews ``spec.renewTime`` every ``retry_period``.
- Another replica takes the lease once the holder's record (holder and renew time) has not changed
  for ``leaseDurationSeconds`` *as measured on its own monotonic clock since it first saw that record*:
  no two machines' wall clocks are ever compared.
- The holder may write only while less than ``renew_deadline`` has passed since it last sent a renewal
  that succeeded (:func:`may_write`), measured on its monotonic clock, which keeps counting while the
  process is stopped. ``renew_deadline`` < ``lease_duration``, so a holder that was paused (SIGSTOP, a
  long GC, a frozen VM) finds its deadline passed before the others could have taken over, and checks it
  before every write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Step = Literal["create", "renew", "take", "wait"]


@dataclass(frozen=True)
class Timings:
    """client-go's defaults: a lease of 15 s, renewed every 2 s, given up 10 s after the last renewal."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def check(self) -> None:
        """Raise ValueError naming the setting when the timings cannot keep two leaders apart."""
        if self.retry_period <= 0:
            raise ValueError(f"TFPS_RETRY_PERIOD_SECONDS: must be > 0, not {self.retry_period:g}")
        if self.renew_deadline <= self.retry_period:
            raise ValueError(
                f"TFPS_RENEW_DEADLINE_SECONDS ({self.renew_deadline:g}) must be greater than "
                f"TFPS_RETRY_PERIOD_SECONDS ({self.retry_period:g}): a renewal must fit before the deadline"
            )
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"TFPS_LEASE_DURATION_SECONDS ({self.lease_duration:g}) must be greater than "
                f"TFPS_RENEW_DEADLINE_SECONDS ({self.renew_deadline:g}): a paused leader must stop writing "
                "before another replica may take over"
            )


@dataclass(frozen=True)
class LeaseView:
    """What a Lease says about its holder."""

    holder: str | None
    renew_time: str | None
    duration: int | None
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any] | None) -> LeaseView | None:
        if lease is None:
            return None
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or None,
            renew_time=spec.get("renewTime"),
            duration=spec.get("leaseDurationSeconds"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


@dataclass(frozen=True)
class Observation:
    """The lease record (holder, renew time) this replica last saw change, and when (monotonic seconds)."""

    record: tuple[str | None, str | None] | None
    at: float


def observe(prev: Observation | None, lease: LeaseView | None, now: float) -> Observation:
    """The observation after reading ``lease`` at ``now``: unchanged if the record is the one already seen."""
    record = (lease.holder, lease.renew_time) if lease is not None else None
    if prev is not None and prev.record == record:
        return prev
    return Observation(record, now)


def step(lease: LeaseView | None, me: str, seen: Observation, now: float, timings: Timings) -> Step:
    """What this replica does with the lease it just read (``seen`` is :func:`observe`'s answer for it)."""
    if lease is None:
        return "create"
    if lease.holder == me:
        return "renew"
    if lease.holder is None:
        return "take"  # released by its holder on a clean shutdown
    duration = lease.duration or timings.lease_duration
    return "take" if now - seen.at > duration else "wait"


def may_write(renewed_at: float | None, now: float, timings: Timings) -> bool:
    """Whether a replica that last renewed at ``renewed_at`` (monotonic, when the renewal was sent; None:
    never) may still write at ``now``."""
    return renewed_at is not None and now - renewed_at < timings.renew_deadline


def micro_time(at: datetime) -> str:
    """A Kubernetes MicroTime."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_spec(
    current: LeaseView | None, me: str | None, now: datetime, timings: Timings, acquire_time: str | None
) -> dict[str, Any]:
    """The Lease's spec after this replica creates, renews or takes it (``me``), or releases it (None).
    ``acquire_time`` is the current spec's, kept while the same holder renews."""
    taking = me is not None and (current is None or current.holder != me)
    from_another = taking and current is not None and current.holder is not None
    return {
        "holderIdentity": me,
        # released: 1 s, so that the next replica takes it at once (client-go's ReleaseOnCancel)
        "leaseDurationSeconds": max(1, round(timings.lease_duration)) if me is not None else 1,
        "renewTime": micro_time(now),
        "acquireTime": micro_time(now) if taking or acquire_time is None else acquire_time,
        "leaseTransitions": (current.transitions if current else 0) + (1 if from_another else 0),
    }
