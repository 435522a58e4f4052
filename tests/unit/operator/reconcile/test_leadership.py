"""The leader-election rules (reconcile/leadership.py): when a replica creates, renews, takes or waits,
and when it may write."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tfps_operator.reconcile import leadership
from tfps_operator.reconcile.leadership import LeaseView, Timings, observe, step

T = Timings(lease_duration=15, renew_deadline=10, retry_period=2)
NOW = datetime(2026, 12, 5, 6, 0, 0, 123456, tzinfo=UTC)


def view(holder: str | None, renew: str | None = "t1", duration: int | None = 15, transitions: int = 0) -> LeaseView:
    return LeaseView(holder, renew, duration, transitions)


def test_no_lease_is_created_and_ones_own_is_renewed():
    seen = observe(None, None, 0.0)
    assert step(None, "me", seen, 0.0, T) == "create"
    lease = view("me")
    assert step(lease, "me", observe(None, lease, 0.0), 0.0, T) == "renew"


def test_another_holders_lease_is_taken_only_after_it_went_unrenewed_for_its_duration_on_our_clock():
    lease = view("other", "t1")
    seen = observe(None, lease, 100.0)
    assert step(lease, "me", seen, 100.0, T) == "wait"
    seen = observe(seen, lease, 114.9)  # same record: still counted from 100
    assert step(lease, "me", seen, 114.9, T) == "wait"
    assert step(lease, "me", observe(seen, lease, 115.1), 115.1, T) == "take"
    renewed = view("other", "t2")  # it renewed: the clock starts again from when we saw that
    seen = observe(seen, renewed, 115.1)
    assert seen.at == 115.1 and step(renewed, "me", seen, 129.0, T) == "wait"


def test_the_lease_duration_written_in_the_lease_wins_and_a_released_lease_is_taken_at_once():
    lease = view("other", duration=40)
    seen = observe(None, lease, 0.0)
    assert step(lease, "me", seen, 20.0, T) == "wait" and step(lease, "me", seen, 40.5, T) == "take"
    released = view(None)
    assert step(released, "me", observe(None, released, 0.0), 0.0, T) == "take"


def test_writes_stop_at_the_renew_deadline_which_comes_before_anyone_may_take_over():
    assert not leadership.may_write(None, 0.0, T)  # never led
    assert leadership.may_write(100.0, 109.9, T)
    assert not leadership.may_write(100.0, 110.0, T)
    assert T.renew_deadline < T.lease_duration


def test_lease_spec_counts_transitions_only_when_taken_from_another_holder():
    created = leadership.lease_spec(None, "me", NOW, T, None)
    assert created["holderIdentity"] == "me" and created["leaseTransitions"] == 0
    assert created["renewTime"] == "2026-12-05T06:00:00.123456Z" == created["acquireTime"]
    assert created["leaseDurationSeconds"] == 15
    renewed = leadership.lease_spec(view("me", transitions=3), "me", NOW, T, "2026-01-01T00:00:00.000000Z")
    assert renewed["leaseTransitions"] == 3 and renewed["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    taken = leadership.lease_spec(view("other", transitions=3), "me", NOW, T, "2026-01-01T00:00:00.000000Z")
    assert taken["leaseTransitions"] == 4 and taken["acquireTime"] == taken["renewTime"]
    released = leadership.lease_spec(view("me", transitions=4), None, NOW, T, "a")
    assert released["holderIdentity"] is None and released["leaseTransitions"] == 4
    assert released["leaseDurationSeconds"] == 1


@pytest.mark.parametrize(
    ("timings", "names"),
    [
        (Timings(10, 10, 2), "TFPS_LEASE_DURATION_SECONDS"),
        (Timings(15, 2, 2), "TFPS_RENEW_DEADLINE_SECONDS"),
        (Timings(15, 10, 0), "TFPS_RETRY_PERIOD_SECONDS"),
    ],
)
def test_timings_that_cannot_keep_two_leaders_apart_are_refused_naming_the_setting(timings: Timings, names: str):
    with pytest.raises(ValueError, match=names):
        timings.check()
    T.check()
