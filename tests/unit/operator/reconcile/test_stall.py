"""The stall rule (pure) and how the reconciler applies it: named situations."""

from __future__ import annotations

from datetime import timedelta

from support.operator_helpers import CFG, T0, all_pods, make_job, observed, status
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile import stall
from tfps_operator.reconcile.machine import reconcile


def running(ck_step=None, ck_at=None, running_at=T0, **extra):
    fields = {
        "phase": "Running",
        "startTime": T0.isoformat(),
        "conditions": [
            {
                "type": "Running",
                "status": "True",
                "reason": "AllReplicasRunning",
                "lastTransitionTime": running_at.isoformat(),
            }
        ],
        **extra,
    }
    if ck_step is not None:
        fields["checkpoint"] = {"step": ck_step, "path": f"/data/ckpt/ckpt-{ck_step}", "time": ck_at.isoformat()}
    return status(**fields)


# --- the rule -------------------------------------------------------------------------------------


def test_fresh_checkpoint_is_not_stalled_and_says_when_to_look_again():
    v = stall.evaluate(running(100, T0 + timedelta(seconds=50)), 60, T0 + timedelta(seconds=80))
    assert v == stall.Verdict(False, recheck_after=30.0)


def test_no_checkpoint_for_longer_than_the_bound_is_stalled_naming_the_last_step():
    written = T0 + timedelta(seconds=10)
    v = stall.evaluate(running(40, written), 60, T0 + timedelta(seconds=71))
    assert v.stalled and "step 40" in v.message and written.isoformat() in v.message and "60s" in v.message


def test_exactly_at_the_deadline_is_stalled():
    assert stall.evaluate(running(40, T0), 60, T0 + timedelta(seconds=60)).stalled


def test_stalled_message_does_not_change_while_time_passes_so_the_status_is_not_rewritten():
    st = running(40, T0)
    first = stall.evaluate(st, 60, T0 + timedelta(seconds=61))
    later = stall.evaluate(st, 60, T0 + timedelta(hours=5))
    assert first == later


def test_no_checkpoint_yet_counts_from_when_the_job_became_running():
    st = running(running_at=T0 + timedelta(seconds=30))
    assert stall.evaluate(st, 60, T0 + timedelta(seconds=80)) == stall.Verdict(False, recheck_after=10.0)
    v = stall.evaluate(st, 60, T0 + timedelta(seconds=90))
    assert v.stalled and "no checkpoint" in v.message


def test_checkpoint_from_before_a_restart_does_not_count_against_the_new_run():
    # Step 500 was written, then the job restarted and became Running again 10 minutes later.
    st = running(500, T0, running_at=T0 + timedelta(minutes=10))
    assert not stall.evaluate(st, 60, T0 + timedelta(minutes=10, seconds=30)).stalled
    v = stall.evaluate(st, 60, T0 + timedelta(minutes=12))
    assert v.stalled and "step 500" in v.message and "since the job became Running" in v.message


def test_without_a_running_condition_the_start_time_starts_the_clock():
    st = status(phase="Running", startTime=T0.isoformat())
    assert stall.evaluate(st, 60, T0 + timedelta(seconds=59)).recheck_after == 1.0
    assert stall.evaluate(st, 60, T0 + timedelta(seconds=61)).stalled


def test_rule_does_not_apply_outside_running_or_when_switched_off():
    for phase in ("Pending", "Restarting", "Exporting", "Succeeded", "Failed", "Suspended"):
        st = running(1, T0)
        st.phase = phase
        assert stall.evaluate(st, 60, T0 + timedelta(days=1)) is None
    assert stall.evaluate(running(1, T0), None, T0 + timedelta(days=1)) is None


def test_the_jobs_bound_wins_over_the_operator_default_and_zero_means_off():
    assert stall.bound_seconds(30, 3600.0) == 30.0
    assert stall.bound_seconds(None, 3600.0) == 3600.0
    assert stall.bound_seconds(None, None) is None
    assert stall.bound_seconds(None, 0) is None


# --- the reconciler applies it --------------------------------------------------------------------


def _reconcile(st, now, stall_seconds=60):
    job = make_job(ps=1, workers=1, runPolicy={"stallSeconds": stall_seconds})
    return reconcile(job, st, observed(job, all_pods(job)), now, CFG)


def test_running_job_with_recent_checkpoint_wakes_at_the_stall_deadline():
    plan = _reconcile(running(10, T0 + timedelta(seconds=20)), T0 + timedelta(seconds=30))
    assert C.get(plan.status, stall.STALLED) is None
    assert plan.requeue_after == 50.0


def test_running_job_past_the_bound_turns_stalled_with_one_warning_event():
    plan = _reconcile(running(10, T0), T0 + timedelta(seconds=61))
    c = C.get(plan.status, stall.STALLED)
    assert (c.status, c.reason) == ("True", "NoNewCheckpoint") and "step 10" in c.message
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "Stalled")]
    # Looked at again later: still stalled, same condition, no second event, nothing to rewrite.
    again = _reconcile(plan.status, T0 + timedelta(seconds=300))
    assert again.events == [] and again.status.conditions == plan.status.conditions


def test_stalled_job_with_a_new_checkpoint_is_no_longer_stalled():
    stalled = _reconcile(running(10, T0), T0 + timedelta(seconds=61)).status
    stalled.checkpoint.step, stalled.checkpoint.time = 20, T0 + timedelta(seconds=65)
    plan = _reconcile(stalled, T0 + timedelta(seconds=66))
    c = C.get(plan.status, stall.STALLED)
    assert (c.status, c.reason) == ("False", stall.RESUMED)
    assert [e.reason for e in plan.events] == [stall.RESUMED]
    assert plan.requeue_after == 59.0


def test_stalled_job_that_restarts_is_no_longer_judged():
    stalled = _reconcile(running(10, T0), T0 + timedelta(seconds=61)).status
    job = make_job(ps=1, workers=1, runPolicy={"stallSeconds": 60})
    pods = all_pods(job, ps_0="Failed")
    plan = reconcile(job, stalled, observed(job, pods), T0 + timedelta(seconds=62), CFG)
    assert plan.status.phase == "Restarting"
    # The restart returns early; once pods come back and the job is Pending, Stalled is cleared.
    pending = reconcile(job, plan.status, observed(job, []), T0 + timedelta(seconds=63), CFG)
    assert pending.status.phase != "Running"
    assert C.get(pending.status, stall.STALLED).status == "False"
