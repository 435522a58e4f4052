"""One pass decided whole (pure): a new job's write order, spaced progress writes, refused creates and
refused status writes carried to the next pass, and when that pass comes."""

from __future__ import annotations

import dataclasses
from typing import Any

from support.operator_helpers import CFG, T0, all_pods, make_job, observed, status
from tfps_operator.api.models import PSTrainingJobStatus
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.job_pass import Memory, PassInput, admitted, decide, export_outcomes, remember
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import with_created
from tfps_operator.reconcile.plan import Create, Outcome, Plan, ReadJob
from tfps_operator.settings import OperatorSettings

SETTINGS = OperatorSettings(build=CFG, status_interval_seconds=3.0, status_interval_max_seconds=30.0)


def pass_input(job: Any = None, st: PSTrainingJobStatus | None = None, obs: Any = None, **kw: Any) -> PassInput:
    job = job or make_job()
    return PassInput(
        job=job,
        generation=1,
        resource_version=kw.pop("rv", 10),
        status=st or status(),
        observed=obs if obs is not None else observed(job, existing=set()),
        now=T0,
        clock=kw.pop("clock", 100.0),
        memory=kw.pop("memory", Memory()),
    )


def test_a_brand_new_job_creates_its_children_first_and_one_status_reports_them():
    inp = pass_input()
    plan = decide(inp, SETTINGS)
    alone = reconcile(inp.job, inp.status, inp.observed, T0, CFG)
    assert plan.children_first
    assert [a.key for a in plan.creates()] == [a.key for a in alone.creates()]
    # The status is the one the state machine gives once those children exist (as just created).
    then = reconcile(inp.job, inp.status, with_created(inp.observed, [c.manifest for c in alone.creates()]), T0, CFG)
    assert plan.status == then.status and plan.status != alone.status
    assert plan.status.replica_statuses["worker"].active == inp.job.spec.replicas.worker.replicas
    assert C.get(plan.status, C.CREATED).status == "True"
    assert [e.reason for e in plan.events] == ["Accepted"]
    assert plan.validate == alone.validate and plan.validate  # the new run is still validated first


def test_children_as_just_created_are_pending_unscheduled_and_unfinished():
    job = make_job()
    creates = reconcile(job, status(), observed(job, existing=set()), T0, CFG).creates()
    obs = with_created(observed(job, existing=set()), [c.manifest for c in creates])
    assert {p.phase for p in obs.pods} == {"Pending"} and not any(p.scheduled for p in obs.pods)
    assert {"Service/mnist", "NetworkPolicy/mnist"} <= obs.existing
    plan = reconcile(job, status(), obs, T0, CFG)
    assert plan.creates() == []  # nothing created twice


def test_a_job_with_a_phase_writes_its_status_before_any_child():
    job = make_job()
    pods = [p for p in all_pods(job) if not p["metadata"]["name"].endswith("worker-1")]
    inp = pass_input(job, status(phase="Running", startTime=T0.isoformat()), observed(job, pods))
    plan = decide(inp, SETTINGS)
    assert plan.creates() and not plan.children_first


def test_a_progress_only_change_waits_its_spacing_then_goes():
    job = make_job()
    pending = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    current = decide(pass_input(job), SETTINGS).status  # Pending, its pods just created
    obs = with_created(observed(job, existing=set()), [c.manifest for c in pending.creates()])
    one_scheduled = dataclasses.replace(obs, pods=(dataclasses.replace(obs.pods[0], scheduled=True), *obs.pods[1:]))
    written_at = Memory(last_status_write=99.0, progress_writes=0)
    plan = decide(pass_input(job, current, one_scheduled, memory=written_at), SETTINGS)
    assert plan.status == current and not plan.actions and plan.requeue_after == 2.0  # 3 s after the write
    plan = decide(pass_input(job, current, one_scheduled, memory=written_at, clock=102.5), SETTINGS)
    assert plan.progress_only and plan.status != current


def test_progress_only_writes_space_out_and_a_significant_write_resets_them():
    inp = pass_input()
    mem, waits = Memory(), []
    for i in range(6):  # six progress-only writes in a row
        mem, _ = remember(
            mem, inp, Plan(status=status(), progress_only=True), Outcome(status_written=True), i, SETTINGS
        )
        waits.append(mem.progress_writes)
    assert waits == [1, 2, 3, 4, 5, 6] and mem.last_status_write == 5
    mem2, _ = remember(mem, inp, Plan(status=status(), progress_only=True), Outcome(), 9.0, SETTINGS)
    assert mem2 == mem  # nothing written: nothing changes
    mem3, _ = remember(mem, inp, Plan(status=status()), Outcome(status_written=True), 9.0, SETTINGS)
    assert mem3.progress_writes == 0 and mem3.last_status_write == 9.0


def test_refused_creates_are_reported_by_the_next_pass_which_creates_nothing_and_backs_off():
    job = make_job()
    inp = pass_input(job)
    plan = decide(inp, SETTINGS)
    refused = {"Pod/mnist-worker-1": "exceeded quota: pods=4"}
    mem, after = remember(Memory(), inp, plan, Outcome(create_failures=refused), 100.0, SETTINGS)
    assert after == "now" and mem.refused_creates == refused
    report = decide(dataclasses.replace(inp, memory=mem), SETTINGS)
    assert report.creates() == [] and report.validate == [] and report.backoff and not report.children_first
    created = C.get(report.status, C.CREATED)
    assert created.status == "False" and created.reason == "CreateFailed" and "exceeded quota" in created.message
    assert [e.reason for e in report.events] == ["Accepted", "CreateFailed"]
    mem, after = remember(mem, inp, report, Outcome(status_written=True), 100.0, SETTINGS)
    assert after == "backoff" and mem.refused_creates == {}
    # the same refusal again: no second Event, no status change
    again = decide(
        dataclasses.replace(inp, status=report.status, memory=dataclasses.replace(mem, refused_creates=refused)),
        SETTINGS,
    )
    assert [e.reason for e in again.events if e.reason == "CreateFailed"] == [] and again.backoff


def test_a_refused_report_is_reported_again():
    inp = pass_input(memory=Memory(refused_creates={"Pod/x": "no"}))
    report = decide(inp, SETTINGS)
    mem, after = remember(inp.memory, inp, report, Outcome(conflict=True), 1.0, SETTINGS)
    assert after == "now" and mem.refused_creates == {"Pod/x": "no"} and mem.refused_at == 10


def test_a_refused_status_write_reads_the_job_unless_a_newer_body_came():
    inp = pass_input(rv=10)
    plan = decide(inp, SETTINGS)
    mem, after = remember(Memory(), inp, plan, Outcome(conflict=True), 1.0, SETTINGS)
    assert after == "now" and mem.refused_at == 10
    read = decide(dataclasses.replace(inp, memory=mem), SETTINGS)
    assert read.actions == [ReadJob()] and read.status == inp.status and not read.events
    mem2, after = remember(mem, inp, read, Outcome(), 1.0, SETTINGS)
    assert after == "now" and mem2.refused_at is None
    newer = decide(dataclasses.replace(inp, resource_version=11, memory=mem), SETTINGS)
    assert newer.creates()  # decided afresh from the newer body
    _, after = remember(mem, inp, read, Outcome(gone=True), 1.0, SETTINGS)
    assert after == "gone"


def test_the_next_pass_comes_soon_after_acting_and_at_the_plans_time_otherwise():
    inp = pass_input()
    _, after = remember(Memory(), inp, Plan(status=status(), actions=[Create({})]), Outcome(), 0.0, SETTINGS)
    assert after == 5.0
    _, after = remember(Memory(), inp, Plan(status=status(), requeue_after=12.0), Outcome(), 0.0, SETTINGS)
    assert after == 12.0
    _, after = remember(Memory(), inp, Plan(status=status()), Outcome(), 0.0, SETTINGS)
    assert after == SETTINGS.resync_seconds


def test_an_unreadable_spec_fails_the_job():
    plan = decide(pass_input(job="spec.training.steps: must be positive"), SETTINGS)
    assert plan.status.phase == "Failed" and plan.status.reason == "InvalidSpec"


def test_a_dry_run_refusal_replaces_the_plan():
    inp = pass_input()
    plan = decide(inp, SETTINGS)
    pod = next(m for m in plan.validate if m["kind"] == "Pod")
    assert admitted(plan, inp, [(pod, 409, "already exists")]) is plan
    verdict = admitted(plan, inp, [(pod, 422, "spec.containers[0].image: Required value")])
    assert verdict.status.phase == "Failed" and not verdict.actions


def _with_export(**kw: Any) -> PSTrainingJobStatus:
    return PSTrainingJobStatus.model_validate(kw)


def test_export_outcomes_count_each_artifact_once():
    before = _with_export(phase="Exporting")
    after = _with_export(
        phase="Succeeded",
        export={
            "step": 100,
            "artifacts": [
                {"format": "savedmodel", "path": "exports/100/savedmodel"},
                {"format": "tflite", "path": "exports/100/model.tflite", "quantization": "none"},
            ],
            "failed": [{"format": "onnx", "reason": "ConversionFailed", "message": "op not supported"}],
        },
    )
    assert export_outcomes(before, after) == [("onnx", "failed"), ("savedmodel", "passed"), ("tflite", "passed")]
    # the next pass (or an operator restart) starts from the stored status: nothing new to count
    assert export_outcomes(after, after) == []
