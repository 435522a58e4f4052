"""When a job is looked at again: status-write spacing, retry back-off, next pass, settling (pure)."""

from __future__ import annotations

import math

from tfps_operator.reconcile.pacing import (
    RECHECK_AFTER_ACTING_SECONDS,
    deferred_write_delay,
    next_pass,
    progress_wait,
    progress_writes_after_write,
    retry_delay,
    settle_delay,
    sleep_before_next_pass,
)

INTERVAL, INTERVAL_MAX = 3.0, 30.0


def wait(last_write: float, progress_writes: int, now: float) -> float:
    return progress_wait(last_write, progress_writes, now, INTERVAL, INTERVAL_MAX)


def test_a_progress_only_change_2s_after_the_last_write_waits_the_rest_of_the_interval():
    assert wait(last_write=100.0, progress_writes=0, now=102.0) == 1.0


def test_a_progress_only_change_once_the_interval_has_passed_is_written_now():
    assert wait(last_write=100.0, progress_writes=0, now=103.0) <= 0
    assert wait(last_write=-math.inf, progress_writes=0, now=0.0) <= 0  # never written yet


def test_each_progress_only_write_in_a_row_doubles_the_spacing_up_to_the_maximum():
    assert [wait(0.0, n, 0.0) for n in range(6)] == [3.0, 6.0, 12.0, 24.0, 30.0, 30.0]


def test_a_maximum_below_the_interval_leaves_the_interval():
    assert progress_wait(0.0, 4, 0.0, interval=10.0, interval_max=5.0) == 10.0


def test_a_progress_only_write_counts_and_a_significant_write_resets_the_count():
    assert progress_writes_after_write(2, progress_only=True) == 3
    assert progress_writes_after_write(2, progress_only=False) == 0


def test_a_deferred_write_looks_again_sooner_when_the_plan_asks_for_it():
    assert deferred_write_delay(6.0, None) == 6.0
    assert deferred_write_delay(6.0, 2.0) == 2.0
    assert deferred_write_delay(6.0, 60.0) == 6.0


def test_the_first_failed_pass_waits_the_base():
    assert retry_delay(1, base=1.0, cap=300.0) == 1.0


def test_the_third_create_failure_in_a_row_waits_4x_the_base():
    assert retry_delay(3, base=1.5, cap=300.0) == 6.0


def test_failed_passes_in_a_row_wait_at_most_the_cap():
    assert [retry_delay(n, base=1.0, cap=300.0) for n in (8, 9, 10, 20)] == [128.0, 256.0, 300.0, 300.0]


def test_after_acting_the_job_is_looked_at_again_within_5s():
    assert RECHECK_AFTER_ACTING_SECONDS == 5.0
    assert next_pass(acted=True, requeue_after=None, resync=60.0) == 5.0
    assert next_pass(acted=True, requeue_after=30.0, resync=60.0) == 5.0


def test_after_acting_a_sooner_requeue_wins():
    assert next_pass(acted=True, requeue_after=2.0, resync=60.0) == 2.0
    assert next_pass(acted=True, requeue_after=None, resync=1.0) == 1.0


def test_a_pass_that_did_nothing_sleeps_until_the_plans_requeue_or_the_resync():
    assert next_pass(acted=False, requeue_after=42.0, resync=60.0) == 42.0
    assert next_pass(acted=False, requeue_after=0.0, resync=60.0) == 0.0
    assert next_pass(acted=False, requeue_after=None, resync=60.0) == 60.0


def test_every_job_is_looked_at_at_least_every_resync():
    assert sleep_before_next_pass(300.0, resync=60.0) == 60.0
    assert sleep_before_next_pass(5.0, resync=60.0) == 5.0


def test_an_event_right_after_a_pass_waits_for_the_rest_of_the_burst():
    assert settle_delay(woken_by_event=True, since_last_pass=0.05, settle=0.2) == 0.2


def test_an_event_after_a_quiet_spell_is_acted_on_at_once():
    assert settle_delay(woken_by_event=True, since_last_pass=5.0, settle=0.2) == 0.0


def test_a_timed_pass_and_a_zero_settle_never_wait():
    assert settle_delay(woken_by_event=False, since_last_pass=0.05, settle=0.2) == 0.0
    assert settle_delay(woken_by_event=True, since_last_pass=0.0, settle=0.0) == 0.0


def test_a_pass_failing_for_days_waits_the_cap_without_overflowing():
    assert retry_delay(5000, base=1.0, cap=300.0) == 300.0
    assert progress_wait(0.0, 5000, now=0.0, interval=3.0, interval_max=60.0) == 60.0
