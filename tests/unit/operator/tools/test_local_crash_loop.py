"""`tfps run` recreates a crashing process on the crash-loop rule of reconcile.crashloop, with its local schedule."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from support.operator_helpers import T0, make_job
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.reconcile import crashloop
from tfps_operator.tools.local.progress_display import Status
from tfps_operator.tools.local.supervisor import LocalJob, Supervisor, Task


class NoDisplay:
    def event(self, message: str) -> None:
        pass

    def update(self, status: Status) -> None:
        pass

    def close(self) -> None:
        pass


def supervisor(tmp_path: Path) -> Supervisor:
    job = make_job(ps=1, workers=2)
    return Supervisor(LocalJob(job=job, settings=job_settings(job, mount_path=str(tmp_path))), NoDisplay())


def later(seconds: float):
    return T0 + timedelta(seconds=seconds)


def test_a_crashing_worker_is_recreated_at_once_then_after_a_growing_local_back_off(tmp_path):
    s = supervisor(tmp_path)
    worker = Task("worker", 0)
    assert s._count_recreation(worker, T0) == 0.0
    # failed again 1 s after its recreation: 2 s after that recreation
    assert s._count_recreation(worker, later(1)) == 1.0
    # recreated at 2 s, failed at 3 s: 4 s after 2 s
    assert s._count_recreation(worker, later(3)) == 3.0
    assert s._recreations[worker].recent == 3 and s._recreations[worker].last == later(6)
    assert crashloop.delay(3, crashloop.LOCAL) == 8.0  # the next one would wait 8 s
    assert crashloop.delay(10, crashloop.LOCAL) == 30.0  # capped at 30 s


def test_the_local_schedule_is_the_operators_rule_with_shorter_delays():
    for count in range(12):
        local, operator = crashloop.delay(count, crashloop.LOCAL), crashloop.delay(count)
        assert local <= operator
        assert (local == 0) == (operator == 0)
    assert crashloop.delay(4) == 80.0 and crashloop.delay(4, crashloop.LOCAL) == 16.0


def test_a_replica_failing_for_days_does_not_overflow_the_delay():
    assert crashloop.delay(5000) == crashloop.MAX_SECONDS
    assert crashloop.delay(5000, crashloop.LOCAL) == crashloop.LOCAL.max_seconds


def test_ten_quiet_minutes_start_the_back_off_over_but_keep_the_count(tmp_path):
    s = supervisor(tmp_path)
    worker = Task("worker", 0)
    s._count_recreation(worker, T0)
    s._count_recreation(worker, later(3))
    assert s._count_recreation(worker, later(10 + crashloop.LOCAL.reset_after_seconds)) == 0.0
    assert (s._recreations[worker].recent, s._recreations[worker].total) == (1, 3)


def test_each_process_has_its_own_back_off(tmp_path):
    s = supervisor(tmp_path)
    s._count_recreation(Task("worker", 0), T0)
    assert s._count_recreation(Task("worker", 1), later(1)) == 0.0
