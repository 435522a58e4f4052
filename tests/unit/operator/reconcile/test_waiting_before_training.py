"""Why a job waits before it trains: the export pre-flight pod and the gang scheduler's PodGroup report it
as the training pods do (condition Waiting, status.reason, one Event per reason), and a claim that does not
exist is named ClaimNotFound (pure)."""

from __future__ import annotations

from typing import Any

from support.operator_helpers import CFG, T0, all_pods, batch_job, export_pod, infra, later, make_job, observed, pod
from support.operator_helpers import status as make_status
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile import waiting
from tfps_operator.reconcile.gang import no_pod_group
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import observe, pod_obs
from tfps_operator.settings import BuildConfig

MISSING = '0/2 nodes are available: persistentvolumeclaim "lost" not found. not found'
"""What kube-scheduler says of a pod whose claim does not exist (read off hack/cluster's scheduler)."""
UNBOUND = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes"
GANG = BuildConfig(default_image="tfps-trainer:test", gang_scheduler_name="scheduler-plugins-scheduler")
PENDING = {"phase": "Pending", "startTime": T0.isoformat()}


def _unplaced(raw: dict[str, Any], message: str) -> dict[str, Any]:
    raw["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return raw


def _cond(plan: Any, type_: str) -> tuple[str, str, str] | None:
    c = C.get(plan.status, type_)
    return (c.status, c.reason, c.message) if c else None


def _preflight_job(**kw: Any) -> Any:
    return make_job(ps=1, workers=1, export={"preflight": True}, storage={"claimName": "lost"}, **kw)


def test_the_scheduler_saying_a_claim_does_not_exist_is_claim_not_found_before_unbound_and_the_rest() -> None:
    job = make_job(ps=1, workers=1)
    pods = [
        pod_obs(
            pod(
                job, "chief", 0, "Pending", scheduled=False, unschedulable="0/2 nodes are available: 2 Insufficient cpu"
            )
        ),
        pod_obs(pod(job, "ps", 0, "Pending", scheduled=False, unschedulable=UNBOUND)),
        pod_obs(pod(job, "worker", 0, "Pending", scheduled=False, unschedulable=MISSING)),
    ]
    assert waiting.why(pods) == waiting.Waiting("ClaimNotFound", f"mnist-worker-0 not scheduled: {MISSING}")
    assert waiting.why(pods[:2]).reason == "UnboundClaim"
    assert waiting.why(pods[:1]).reason == "Unschedulable"


def test_a_preflight_pod_that_waits_for_a_missing_claim_is_the_jobs_reason_with_one_event() -> None:
    job = _preflight_job()
    pending = observe(
        [_unplaced(export_pod(job, "Pending", preflight=True), MISSING)],
        None,
        infra(job),
        batch_job(job, preflight=True),
    )
    plan = reconcile(job, make_status(**PENDING), pending, T0, CFG)
    assert plan.status.phase == "Pending" and plan.status.reason == "ClaimNotFound"
    assert _cond(plan, waiting.WAITING) == (
        "True",
        "ClaimNotFound",
        f"export pre-flight (Job mnist-preflight): mnist-preflight-abcde not scheduled: {MISSING}",
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "ClaimNotFound")]
    assert 'persistentvolumeclaim "lost" not found' in plan.events[0].message
    assert plan.creates() == []  # no training pod while the pre-flight has no verdict

    again = reconcile(job, plan.status, pending, later(30), CFG)
    assert again.events == [] and again.status.reason == "ClaimNotFound"  # one Event, not one per pass

    running = observed(job, [export_pod(job, "Running", preflight=True)], preflight_job=batch_job(job, preflight=True))
    placed = reconcile(job, again.status, running, later(60), CFG)
    assert _cond(placed, waiting.WAITING)[:2] == ("False", "PodsStarted") and placed.status.reason is None
    assert placed.events == [] and placed.creates() == []


def test_a_preflight_pod_the_scheduler_has_not_judged_yet_gives_no_reason() -> None:
    job = _preflight_job()
    obs = observed(job, [export_pod(job, "Pending", preflight=True)], preflight_job=batch_job(job, preflight=True))
    plan = reconcile(job, make_status(**PENDING), obs, T0, CFG)
    assert plan.status.reason is None and C.get(plan.status, waiting.WAITING) is None and plan.events == []


def test_training_pods_waiting_for_a_missing_claim_say_claim_not_found() -> None:
    job = make_job(ps=1, workers=1, storage={"claimName": "lost"})
    pods = [pod(job, r, 0, "Pending", scheduled=False, unschedulable=MISSING) for r in ("chief", "ps", "worker")]
    plan = reconcile(job, make_status(**PENDING), observed(job, pods), T0, CFG)
    assert plan.status.reason == "ClaimNotFound" and [e.reason for e in plan.events] == ["ClaimNotFound"]


def test_a_gang_that_cannot_be_placed_is_the_jobs_reason_unless_a_pod_says_more() -> None:
    job = make_job(ps=1, workers=1)
    existing = infra(job) | {"PodGroup/mnist"}
    says = "0/2 nodes are available: 2 Insufficient cpu"
    pods = [pod(job, r, 0, "Pending", scheduled=False, unschedulable=says) for r in ("chief", "ps", "worker")]
    plan = reconcile(job, make_status(**PENDING), observed(job, pods, existing=existing), T0, GANG)
    assert plan.status.reason == "WaitingForGang" and [e.reason for e in plan.events] == ["WaitingForGang"]
    assert _cond(plan, waiting.WAITING)[2] == _cond(plan, "GangScheduled")[2]
    assert _cond(plan, waiting.WAITING)[2].endswith(
        f"minMember 3 pods bound; none is bound until 3 fit at once: {says}"
    )

    missing = [pod(job, r, 0, "Pending", scheduled=False, unschedulable=MISSING) for r in ("chief", "ps", "worker")]
    plan = reconcile(job, make_status(**PENDING), observed(job, missing, existing=existing), T0, GANG)
    assert plan.status.reason == "ClaimNotFound"

    unjudged = [pod(job, r, 0, "Pending", scheduled=False) for r in ("chief", "ps", "worker")]
    plan = reconcile(job, make_status(**PENDING), observed(job, unjudged, existing=existing), T0, GANG)
    assert plan.status.reason is None and plan.events == []
    assert _cond(plan, "GangScheduled")[:2] == ("False", "WaitingForGang")


def test_a_gang_job_whose_pod_group_is_missing_waits_for_it_and_says_so() -> None:
    job = make_job(ps=1, workers=1)
    plan = reconcile(job, make_status(**PENDING), observed(job), T0, GANG)
    assert [a.manifest["kind"] for a in plan.creates()] == ["PodGroup"]  # its pods come once it exists
    assert plan.status.reason == "WaitingForGang"
    assert _cond(plan, waiting.WAITING) == ("True", "WaitingForGang", no_pod_group("mnist"))
    there = observed(job, all_pods(job, "Running"), existing=infra(job) | {"PodGroup/mnist"})
    running = reconcile(job, plan.status, there, later(5), GANG)
    assert running.status.reason is None and _cond(running, waiting.WAITING)[:2] == ("False", "PodsStarted")
