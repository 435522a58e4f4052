"""Kueue: a queued job runs only while its Workload is admitted (reconcile/kueue.py, machine.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support.operator_helpers import CFG, all_pods, infra, later, make_job, pod, status
from tfps_operator.manifests import workload as wlm
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import Flavor, flavor, observe, workload_obs
from tfps_operator.reconcile.plan import Create, Delete, PatchWorkload

KUEUE = replace(CFG, kueue=True)
RUNNING = {"phase": "Running", "startTime": later(0).isoformat()}


def queued_job(**spec: Any):
    return make_job(ps=1, workers=2, runPolicy={"schedulingPolicy": {"queue": "team-q"}, **spec})


def wl_body(*conds: tuple[str, str, str, str], admission: dict | None = None, name: str = "psjob-mnist") -> dict:
    return {
        "metadata": {"name": name, "uid": "wl-uid", "resourceVersion": "7", "generation": 1},
        "status": {
            "conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conds],
            **({"admission": admission} if admission else {}),
        },
    }


ADMISSION = {
    "clusterQueue": "cq",
    "podSetAssignments": [
        {"name": role, "flavors": {"cpu": "spot", "memory": "spot"}, "count": n}
        for role, n in (("chief", 1), ("ps", 1), ("worker", 2))
    ],
}
ADMITTED = wl_body(
    ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
    ("Admitted", "True", "Admitted", "The workload is admitted"),
    admission=ADMISSION,
)
PENDING = wl_body(
    ("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set worker: insufficient quota")
)
EVICTED = wl_body(
    ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
    ("Admitted", "True", "Admitted", "The workload is admitted"),
    ("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization"),
    admission=ADMISSION,
)
SPOT = {
    "spot": flavor({"spec": {"nodeLabels": {"pool": "spot"}, "tolerations": [{"key": "spot", "operator": "Exists"}]}})
}


def obs(job, pods=(), wl: dict | None = None, flavors: dict[str, Flavor] | None = None, priorities=None):
    return observe(
        list(pods), None, infra(job), None, workload_obs(wl) if wl else None, flavors or {}, priorities or {}
    )


def created(plan) -> list[str]:
    return [a.key for a in plan.creates()]


def test_a_queued_job_creates_its_workload_and_no_pod_and_waits_suspended():
    job = queued_job()
    plan = reconcile(job, status(), obs(job), later(0), KUEUE)
    assert created(plan) == ["Workload/psjob-mnist"]
    assert plan.status.phase == "Suspended" and plan.status.reason == "WaitingForAdmission"
    assert C.get(plan.status, C.SUSPENDED).status == "True"
    (wl,) = [a.manifest for a in plan.creates()]
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2" and wl["spec"]["queueName"] == "team-q"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("chief", 1), ("ps", 1), ("worker", 2)]
    chief = wl["spec"]["podSets"][0]["template"]["spec"]
    assert chief["containers"][0]["name"] == "trainer"  # the pod as it will be created: Kueue sees its requests
    ref = wl["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["controller"]) == ("PSTrainingJob", True)


def test_the_queue_label_queues_like_scheduling_policy_queue():
    job = make_job(ps=1, workers=1)
    job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"labels": {wlm.QUEUE_LABEL: "lq"}})})
    plan = reconcile(job, status(), obs(job), later(0), KUEUE)
    assert [a.manifest["spec"]["queueName"] for a in plan.creates()] == ["lq"]


def test_without_kueue_integration_a_queue_changes_nothing():
    job = queued_job()
    plan = reconcile(job, status(), obs(job), later(0), CFG)
    assert "Workload/psjob-mnist" not in created(plan) and "Pod/mnist-chief-0" in created(plan)


def test_waiting_shows_kueues_reason_in_the_condition():
    job = queued_job()
    plan = reconcile(
        job, status(phase="Suspended", reason="WaitingForAdmission"), obs(job, wl=PENDING), later(5), KUEUE
    )
    assert plan.creates() == [] and plan.status.phase == "Suspended"
    assert "insufficient quota" in C.get(plan.status, C.SUSPENDED).message


def test_admitted_creates_the_pods_on_the_admitted_flavor():
    job = queued_job()
    waiting = status(phase="Suspended", reason="WaitingForAdmission")
    plan = reconcile(job, waiting, obs(job, wl=ADMITTED, flavors=SPOT), later(10), KUEUE)
    pods = [a.manifest for a in plan.creates() if a.manifest["kind"] == "Pod"]
    assert len(pods) == 4 and plan.status.phase == "Pending" and plan.status.reason is None
    for p in pods:
        assert p["spec"]["nodeSelector"]["pool"] == "spot"
        assert {"key": "spot", "operator": "Exists"} in p["spec"]["tolerations"]
    assert C.get(plan.status, C.SUSPENDED).reason == "JobResumed"


def test_admitted_but_its_flavor_unreadable_waits_and_says_which():
    job = queued_job()
    plan = reconcile(job, status(phase="Suspended"), obs(job, wl=ADMITTED, flavors={}), later(10), KUEUE)
    assert plan.creates() == [] and "ResourceFlavor spot cannot be read" in C.get(plan.status, C.SUSPENDED).message


def test_evicted_stops_the_chief_first_then_the_rest_then_gives_the_admission_back():
    job = queued_job()
    pods = all_pods(job)
    plan = reconcile(job, status(**RUNNING), obs(job, pods, wl=EVICTED, flavors=SPOT), later(60), KUEUE)
    assert plan.status.phase == "Suspended" and plan.status.reason == "Evicted"
    assert [a.name for a in plan.actions if isinstance(a, Delete)] == ["mnist-chief-0"]
    assert not [a for a in plan.actions if isinstance(a, PatchWorkload)]  # pods still run: quota still in use
    assert ("Warning", "Evicted") in [(e.type, e.reason) for e in plan.events]

    plan = reconcile(job, plan.status, obs(job, pods[1:], wl=EVICTED, flavors=SPOT), later(70), KUEUE)
    assert sorted(a.name for a in plan.actions if isinstance(a, Delete)) == [
        "mnist-ps-0",
        "mnist-worker-0",
        "mnist-worker-1",
    ]

    plan = reconcile(job, plan.status, obs(job, [], wl=EVICTED), later(80), KUEUE)
    (release,) = [a for a in plan.actions if isinstance(a, PatchWorkload)]
    st = release.patch["status"]
    assert release.resource_version == "7" and st["admission"] is None
    conds = {c["type"]: c for c in st["conditions"]}
    assert (conds["QuotaReserved"]["status"], conds["Admitted"]["status"]) == ("False", "False")
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("True", "Preempted")
    assert conds["Evicted"]["status"] == "True"  # Kueue's own conditions are carried over


def test_evicted_and_released_waits_again_and_says_so():
    job = queued_job()
    released = wl_body(
        ("QuotaReserved", "False", "Pending", "couldn't assign flavors"),
        ("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
    )
    plan = reconcile(job, status(phase="Suspended", reason="Evicted"), obs(job, wl=released), later(90), KUEUE)
    assert plan.status.reason == "WaitingForAdmission" and plan.actions == []
    assert "queued again after it was evicted by Kueue (Preempted" in C.get(plan.status, C.SUSPENDED).message


def test_a_finished_job_marks_its_workload_finished_once():
    job = queued_job()
    done = all_pods(job, chief_0="Succeeded")
    job_done = make_job(ps=1, workers=2, runPolicy={"schedulingPolicy": {"queue": "team-q"}}, export={"enabled": False})
    plan = reconcile(job_done, status(**RUNNING), obs(job_done, done, wl=ADMITTED, flavors=SPOT), later(100), KUEUE)
    assert plan.status.phase == "Succeeded"
    (finish,) = [a for a in plan.actions if isinstance(a, PatchWorkload)]
    (cond,) = [c for c in finish.patch["status"]["conditions"] if c["type"] == "Finished"]
    assert (cond["status"], cond["reason"]) == ("True", "Succeeded")
    finished = wl_body(
        *[(c["type"], c["status"], c["reason"], c["message"]) for c in finish.patch["status"]["conditions"]]
    )
    again = reconcile(job_done, plan.status, obs(job_done, [], wl=finished), later(110), KUEUE)
    assert not [a for a in again.actions if isinstance(a, PatchWorkload)]


def test_a_failed_job_finishes_its_workload_as_failed():
    job = queued_job()
    failed = status(phase="Failed", completionTime=later(5).isoformat(), reason="ReplicaFailed")
    plan = reconcile(job, failed, obs(job, [], wl=ADMITTED), later(6), KUEUE)
    (finish,) = [a for a in plan.actions if isinstance(a, PatchWorkload)]
    assert [c["reason"] for c in finish.patch["status"]["conditions"] if c["type"] == "Finished"] == ["Failed"]


def test_user_suspend_deletes_the_workload_so_it_holds_no_quota_and_resume_queues_again():
    job = queued_job(suspend=True)
    plan = reconcile(job, status(**RUNNING), obs(job, all_pods(job), wl=ADMITTED, flavors=SPOT), later(5), KUEUE)
    assert Delete("Workload", "psjob-mnist", "wl-uid") in plan.actions
    assert plan.status.phase == "Suspended" and plan.status.reason == "JobSuspended"
    resumed = queued_job()
    plan = reconcile(resumed, status(phase="Suspended", reason="JobSuspended"), obs(resumed), later(50), KUEUE)
    assert created(plan) == ["Workload/psjob-mnist"] and plan.status.reason == "WaitingForAdmission"


def test_priority_class_goes_to_the_workload_with_its_value_and_a_missing_one_waits():
    job = make_job(ps=1, workers=1, runPolicy={"schedulingPolicy": {"queue": "q", "priorityClass": "high"}})
    plan = reconcile(job, status(), obs(job, priorities={"high": 1000}), later(0), KUEUE)
    (wl,) = [a.manifest for a in plan.creates()]
    assert wl["spec"]["priority"] == 1000 and wl["spec"]["priorityClassRef"]["name"] == "high"
    plan = reconcile(job, status(), obs(job), later(0), KUEUE)
    assert plan.creates() == [] and "PriorityClass high" in C.get(plan.status, C.SUSPENDED).message


def test_workload_status_is_read_as_kueue_writes_it():
    o = workload_obs(EVICTED)
    assert (o.admitted, o.quota_reserved, o.evicted_reason, o.cluster_queue) == (True, True, "Preempted", "cq")
    assert o.flavors == (("chief", ("spot",)), ("ps", ("spot",)), ("worker", ("spot",)))
    assert not workload_obs(PENDING).quota_reserved and workload_obs(PENDING).message.startswith("couldn't")


def test_a_pod_still_running_on_an_evicted_job_keeps_the_quota():
    job = queued_job()
    stopping = [pod(job, "chief", 0, deleting=True)]
    plan = reconcile(job, status(phase="Suspended", reason="Evicted"), obs(job, stopping, wl=EVICTED), later(1), KUEUE)
    assert not [a for a in plan.actions if isinstance(a, (PatchWorkload, Create))]
