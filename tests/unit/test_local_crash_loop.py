"""`tfps run` recreates a crashing process on the operator's crash-loop back-off (reconcile.crashloop)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from _operator_helpers import T0, make_job

from tfps_operator.local.progress import Status
from tfps_operator.local.supervisor import LocalJob, Supervisor, Task
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.reconcile import crashloop


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


def test_a_crashing_worker_is_recreated_at_once_then_after_the_operators_growing_back_off(tmp_path):
    s = supervisor(tmp_path)
    worker = Task("worker", 0)
    assert s._count_recreation(worker, T0) == 0.0
    # failed again 3 s after its recreation: 10 s after that recreation, as the operator waits
    assert s._count_recreation(worker, later(3)) == 7.0
    # recreated at 10 s, failed at 11 s: 20 s after 10 s
    assert s._count_recreation(worker, later(11)) == 19.0
    assert s._recreations[worker].recent == 3 and s._recreations[worker].last == later(30)
    assert crashloop.delay(3) == 40.0  # the next one would wait 40 s: the operator's table


def test_ten_quiet_minutes_start_the_back_off_over_but_keep_the_count(tmp_path):
    s = supervisor(tmp_path)
    worker = Task("worker", 0)
    s._count_recreation(worker, T0)
    s._count_recreation(worker, later(3))
    assert s._count_recreation(worker, later(10 + crashloop.RESET_AFTER_SECONDS)) == 0.0
    assert (s._recreations[worker].recent, s._recreations[worker].total) == (1, 3)


def test_each_process_has_its_own_back_off(tmp_path):
    s = supervisor(tmp_path)
    s._count_recreation(Task("worker", 0), T0)
    assert s._count_recreation(Task("worker", 1), later(1)) == 0.0
