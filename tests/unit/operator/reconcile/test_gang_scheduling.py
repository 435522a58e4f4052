"""Gang scheduling and schedulingPolicy: the PodGroup, what the pods carry, when pods are created, and
the GangScheduled condition; and that none of it appears while the operator does not gang-schedule."""

from __future__ import annotations

from support.operator_helpers import CFG, T0, UID, all_pods, infra, make_job, observed, pod, status
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.podgroup import POD_GROUP_LABEL, min_member, pod_group
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.gang import GANG_SCHEDULED
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.settings import BuildConfig, from_args

GANG = BuildConfig(default_image="tfps-trainer:test", gang_scheduler_name="scheduler-plugins-scheduler")
OWNER = {
    "apiVersion": "tfps.dev/v1alpha1",
    "kind": "PSTrainingJob",
    "name": "mnist",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def gang_infra(job):
    return infra(job) | {f"PodGroup/{job.metadata.name}"}


def created_kinds(plan):
    return [(a.manifest["kind"], a.manifest["metadata"]["name"]) for a in plan.creates()]


# --- the PodGroup ---------------------------------------------------------------------------------


def test_pod_group_reads_like_its_manifest():
    job = make_job(ps=2, workers=3, runPolicy={"schedulingPolicy": {"minAvailable": 4, "scheduleTimeoutSeconds": 60}})
    assert pod_group(job, GANG) == {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "mnist",
            "namespace": "team-a",
            "labels": {
                "app.kubernetes.io/name": "tfps",
                "app.kubernetes.io/instance": "mnist",
                "app.kubernetes.io/component": "podgroup",
                "app.kubernetes.io/managed-by": "tfps-operator",
                "app.kubernetes.io/part-of": "tfps",
                "tfps.dev/job-name": "mnist",
            },
            "ownerReferences": [OWNER],
        },
        "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60},
    }


def test_min_member_defaults_to_every_pod_of_the_job_evaluator_included():
    assert min_member(make_job(ps=2, workers=3, evaluator=1)) == 7
    assert pod_group(make_job(ps=1, workers=1), GANG)["spec"] == {"minMember": 3}


def test_no_pod_group_without_gang_scheduling_even_when_the_job_sets_min_available():
    job = make_job(runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    assert pod_group(job, CFG) is None


# --- the pods -------------------------------------------------------------------------------------


def test_trainer_pods_join_the_group_and_use_the_gang_scheduler():
    job = make_job(ps=1, workers=2)
    pods = desired_pods(job, GANG)
    assert {p["metadata"]["labels"][POD_GROUP_LABEL] for p in pods.values()} == {"mnist"}
    assert {p["spec"]["schedulerName"] for p in pods.values()} == {"scheduler-plugins-scheduler"}


def test_an_explicit_scheduler_name_wins_over_the_gang_scheduler():
    job = make_job(runPolicy={"schedulerName": "my-gang"})
    assert {p["spec"]["schedulerName"] for p in desired_pods(job, GANG).values()} == {"my-gang"}


def test_the_export_job_is_not_part_of_the_gang():
    pod_spec = export_job(make_job(), GANG)["spec"]["template"]
    assert POD_GROUP_LABEL not in pod_spec["metadata"].get("labels", {})
    assert "schedulerName" not in pod_spec["spec"]


def test_without_gang_scheduling_pods_carry_no_group_and_the_default_scheduler():
    for p in desired_pods(make_job(runPolicy={"schedulingPolicy": {"minAvailable": 3, "queue": "team"}}), CFG).values():
        assert POD_GROUP_LABEL not in p["metadata"]["labels"]
        assert "schedulerName" not in p["spec"]


def test_priority_class_goes_on_every_pod_and_a_template_priority_class_wins():
    job = make_job(
        ps=1,
        workers=1,
        runPolicy={"schedulingPolicy": {"priorityClass": "training"}},
        replicas={
            "ps": {"replicas": 1},
            "worker": {"replicas": 1, "template": {"spec": {"priorityClassName": "urgent"}}},
        },
    )
    pods = desired_pods(job, CFG)
    assert pods["mnist-chief-0"]["spec"]["priorityClassName"] == "training"
    assert pods["mnist-ps-0"]["spec"]["priorityClassName"] == "training"
    assert pods["mnist-worker-0"]["spec"]["priorityClassName"] == "urgent"
    assert export_job(job, CFG)["spec"]["template"]["spec"]["priorityClassName"] == "training"


# --- the state machine ----------------------------------------------------------------------------


def test_new_gang_job_creates_its_pod_group_first_and_its_pods_once_the_group_exists():
    job = make_job(ps=1, workers=1)
    plan = reconcile(job, status(), observed(job, existing=set()), T0, GANG)
    assert ("PodGroup", "mnist") in created_kinds(plan)
    assert [k for k, _ in created_kinds(plan)].count("Pod") == 0
    plan = reconcile(job, plan.status, observed(job, existing=gang_infra(job)), T0, GANG)
    assert [n for k, n in created_kinds(plan) if k == "Pod"] == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]
    assert ("PodGroup", "mnist") not in created_kinds(plan)


def test_without_gang_scheduling_a_new_job_creates_no_pod_group_and_its_pods_at_once():
    job = make_job(ps=1, workers=1, runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    assert "PodGroup" not in [k for k, _ in created_kinds(plan)]
    assert [k for k, _ in created_kinds(plan)].count("Pod") == 3
    assert C.get(plan.status, GANG_SCHEDULED) is None


def test_gang_waiting_for_room_reports_the_gang_schedulers_words():
    job = make_job(ps=1, workers=2, runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    says = (
        "pre-filter pod mnist-worker-1 cannot find enough sibling pods, current pods number: 2, minMember of group: 3"
    )
    pods = [
        pod(job, "chief", 0, "Pending", scheduled=False, unschedulable=says),
        pod(job, "ps", 0, "Pending", scheduled=False),
        pod(job, "worker", 0, "Pending", scheduled=False),
        pod(job, "worker", 1, "Pending", scheduled=False),
    ]
    plan = reconcile(job, status(phase="Pending"), observed(job, pods, existing=gang_infra(job)), T0, GANG)
    c = C.get(plan.status, GANG_SCHEDULED)
    assert (c.status, c.reason) == ("False", "WaitingForGang")
    assert "0 of minMember 3 pods bound" in c.message and says in c.message
    assert plan.status.phase == "Pending"


def test_gang_bound_once_min_member_pods_are_bound():
    job = make_job(ps=1, workers=2, runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    pods = [*all_pods(job, "Pending")[:3], pod(job, "worker", 1, "Pending", scheduled=False)]
    plan = reconcile(job, status(phase="Pending"), observed(job, pods, existing=gang_infra(job)), T0, GANG)
    c = C.get(plan.status, GANG_SCHEDULED)
    assert (c.status, c.reason) == ("True", "GangScheduled")
    assert c.message == "PodGroup mnist: 3 of 4 pods bound (minMember 3)"


# --- settings -------------------------------------------------------------------------------------


def test_gang_scheduling_is_off_unless_the_operator_is_given_a_gang_scheduler_name():
    class Args:
        pass

    assert from_args(Args(), {}).build.gang_scheduler_name is None
    assert (
        from_args(Args(), {"TFPS_GANG_SCHEDULER_NAME": "scheduler-plugins-scheduler"}).build.gang_scheduler_name
        == "scheduler-plugins-scheduler"
    )
