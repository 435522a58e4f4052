"""Resizing a running job (:mod:`tfps_operator.reconcile.resize`): the state machine's decisions when
``spec.replicas`` changes under a running job, when workers stay Pending in an elastic job, and when Kueue
admits fewer workers than asked for."""

from __future__ import annotations

import json
from dataclasses import replace

from support.operator_helpers import CFG, T0, later, make_job, observed, pod, status
from tfps_operator.manifests.podgroup import min_member
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.manifests.workload import workload
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import observe, workload_obs
from tfps_operator.reconcile.resize import RESIZING
from tfps_operator.reconcile.training import counted_restarts
from tfps_wire.termination import format_stopped, termination_line

RUNNING = {"phase": "Running", "startTime": T0.isoformat()}


def ps_job(workers: int = 2, ps: int = 1, spec: dict | None = None, **worker: object):
    replicas = {"ps": {"replicas": ps}, "worker": {"replicas": workers, **worker}}
    return make_job(ps=ps, workers=workers, replicas=replicas, **(spec or {}))


def mwms_job(workers: int):
    return make_job(
        ps=0,
        workers=workers,
        strategy="MultiWorkerMirrored",
        model={"command": ["python", "train.py"]},
        training={},
    )


def run_pods(job, ps: int, workers: int, restart: int = 0, **phase_of: str) -> list[dict]:
    """The pods of a run of ``job`` with ``ps`` parameter servers and ``workers`` workers."""
    tasks = [("chief", 0)] * (job.spec.replicas.chief.replicas > 0)
    tasks += [("ps", i) for i in range(ps)] + [("worker", i) for i in range(workers)]
    return [pod(job, r, i, phase_of.get(f"{r}_{i}", "Running"), restart=restart) for r, i in tasks]


def sized(ps: int, workers: int, **more: object) -> dict:
    return {**RUNNING, "clusterSize": {"ps": ps, "worker": workers}, **more}


def deleted(plan) -> dict[str, int | None]:
    return {a.name: a.grace_seconds for a in plan.deletes() if a.kind == "Pod"}


def created(plan) -> list[str]:
    return sorted(a.manifest["metadata"]["name"] for a in plan.creates() if a.manifest["kind"] == "Pod")


def tf_config(plan, name: str) -> dict:
    m = next(a.manifest for a in plan.creates() if a.manifest["metadata"]["name"] == name)
    env = {e["name"]: e.get("value") for e in m["spec"]["containers"][0]["env"]}
    return json.loads(env["TF_CONFIG"])


def reasons(plan) -> list[str]:
    return [e.reason for e in plan.events]


# --- the run's size --------------------------------------------------------------------------------------


def test_a_job_started_before_resizing_existed_takes_its_spec_as_the_runs_size():
    job = ps_job(workers=3)
    plan = reconcile(job, status(**RUNNING), observed(job, run_pods(job, 1, 3)), later(5), CFG)
    assert plan.status.cluster_size.worker == 3 and plan.status.cluster_size.ps == 1
    assert plan.status.resize is None and deleted(plan) == {} and created(plan) == []
    assert plan.status.workers == "3/3"
    assert plan.status.worker_selector == "tfps.dev/job-name=mnist,tfps.dev/replica-type=worker"


# --- fewer workers ---------------------------------------------------------------------------------------


def test_a_ps_job_scaled_down_loses_its_highest_index_workers_live_and_trains_on():
    job = ps_job(workers=2)
    plan = reconcile(
        job, status(**sized(1, 4), progress={"step": 700}), observed(job, run_pods(job, 1, 4)), later(5), CFG
    )
    assert deleted(plan) == {"mnist-worker-2": None, "mnist-worker-3": None}
    st = plan.status
    assert st.restarts == 0 and st.phase == "Running" and st.cluster_size.worker == 2
    assert st.resize.method == "Live" and st.resize.reason == "Scaled" and st.resize.completed is not None
    assert (st.resize.from_.worker, st.resize.to.worker, st.resize.step) == (4, 2, 700)
    assert "Resized" in reasons(plan) and created(plan) == []
    again = reconcile(job, st, observed(job, run_pods(job, 1, 2)), later(6), CFG)
    assert deleted(again) == {} and again.status.resize == st.resize and again.status.workers == "2/2"


def test_after_a_live_shrink_a_failed_worker_restarts_the_job_not_itself():
    """TensorFlow's coordinator waits for the removed workers for good and meanwhile takes back no other
    worker: a worker that fails in that run restarts the job (a later run recreates workers alone again)."""
    job = ps_job(workers=2)
    st = reconcile(job, status(**sized(1, 3)), observed(job, run_pods(job, 1, 3)), later(5), CFG).status
    assert st.resize.method == "Live" and st.resize.run == 0
    pods = run_pods(job, 1, 2, worker_1="Failed")
    pods[-1] = pod(job, "worker", 1, "Failed", exit_code=1)
    plan = reconcile(job, st, observed(job, pods), later(9), CFG)
    assert plan.status.restarts == 1 and plan.status.phase == "Restarting"
    later_run = status(**{**st.to_wire(), "restarts": 1})
    again = reconcile(
        job,
        later_run,
        observed(job, [*run_pods(job, 1, 1, restart=1), pod(job, "worker", 1, "Failed", exit_code=1, restart=1)]),
        later(20),
        CFG,
    )
    assert again.status.restarts == 1 and "mnist-worker-1" in deleted(again)


def test_a_worker_only_job_scaled_down_restarts_every_worker_at_the_new_size():
    job = mwms_job(workers=2)
    plan = reconcile(job, status(**sized(0, 3)), observed(job, run_pods(job, 0, 3)), later(5), CFG)
    st = plan.status
    assert st.resize.method == "Restart" and st.restarts == 1 and st.resizes == 1 and st.cluster_size.worker == 2
    assert deleted(plan) == {f"mnist-worker-{i}": 5 for i in range(3)}  # nothing stops first: all at once
    assert counted_restarts(st) == 0 and st.phase == "Restarting"


# --- more workers ----------------------------------------------------------------------------------------


def test_a_scale_up_creates_the_new_workers_beside_the_run_and_waits_for_them():
    job = ps_job(workers=4)
    plan = reconcile(job, status(**sized(1, 2)), observed(job, run_pods(job, 1, 2)), later(5), CFG)
    assert created(plan) == ["mnist-worker-2", "mnist-worker-3"] and deleted(plan) == {}
    assert tf_config(plan, "mnist-worker-3")["task"] == {"type": "worker", "index": 3}
    assert len(tf_config(plan, "mnist-worker-3")["cluster"]["worker"]) == 4
    st = plan.status
    assert st.cluster_size.worker == 2 and st.resize is None and st.workers == "2/2 (want 4)"
    assert st.workers_left_out == 2 and st.reason == "WorkersPending" and "WorkersLeftOut" in reasons(plan)
    # one of them cannot be scheduled yet: the run goes on at 2, nothing restarts
    pods = [*run_pods(job, 1, 2), pod(job, "worker", 2), pod(job, "worker", 3, "Pending", scheduled=False)]
    waiting = reconcile(job, st, observed(job, pods), later(10), CFG)
    assert waiting.status.resize is None and deleted(waiting) == {} and created(waiting) == []


def test_a_grow_stops_the_chief_first_then_restarts_every_pod_at_the_new_size_from_its_save():
    job = ps_job(workers=4)
    before = status(**sized(1, 2), progress={"step": 480}, checkpoint={"step": 400, "path": "/ckpt/ckpt-400"})
    pods = run_pods(job, 1, 4)
    plan = reconcile(job, before, observed(job, pods), later(5), CFG)
    st = plan.status
    assert deleted(plan) == {"mnist-chief-0": None}  # its own grace: it saves on SIGTERM
    assert st.resize.method == "Restart" and st.resize.to.worker == 4 and st.resize.completed is None
    assert st.cluster_size.worker == 2 and st.restarts == 0 and C.is_true(st, RESIZING)
    # still stopping: the same decision, nothing new (an operator restart here repeats it harmlessly)
    pods[0] = pod(job, "chief", 0, "Running", deleting=True)
    again = reconcile(job, st, observed(job, pods), later(6), CFG)
    assert deleted(again) == {} and again.status.restarts == 0 and created(again) == []
    # the chief saved step 512 and exited: every other pod goes, the new run is at 4 workers
    saved = termination_line("chief/0", format_stopped(512, 0, "/ckpt/ckpt-512", ""))
    pods[0] = pod(job, "chief", 0, "Failed", exit_code=6, message=saved)
    restart = reconcile(job, st, observed(job, pods), later(20), CFG)
    st = restart.status
    assert st.restarts == 1 and st.resizes == 1 and counted_restarts(st) == 0 and st.phase == "Restarting"
    assert st.cluster_size.worker == 4 and st.checkpoint.step == 512
    assert (st.resize.step, st.resize.resumed_from, st.resize.steps_lost) == (512, 512, 0)
    assert set(deleted(restart)) == {"mnist-chief-0", "mnist-ps-0", *(f"mnist-worker-{i}" for i in range(4))}
    # the new run: created at 4 workers, and once it runs the resize is complete
    new = reconcile(job, st, observed(job, []), later(25), CFG)
    assert created(new) == ["mnist-chief-0", "mnist-ps-0", *(f"mnist-worker-{i}" for i in range(4))]
    assert len(tf_config(new, "mnist-chief-0")["cluster"]["worker"]) == 4
    done = reconcile(job, new.status, observed(job, run_pods(job, 1, 4, restart=1)), later(40), CFG)
    assert done.status.phase == "Running" and done.status.resize.completed is not None
    assert not C.is_true(done.status, RESIZING) and "Resized" in reasons(done) and done.status.workers == "4/4"


def test_the_pass_that_restarts_for_a_resize_creates_the_new_runs_pods_of_the_new_run():
    job = ps_job(workers=3)
    st = reconcile(job, status(**sized(1, 2)), observed(job, run_pods(job, 1, 3)), later(5), CFG).status
    plan = reconcile(job, st, observed(job, run_pods(job, 1, 3)[1:]), later(9), CFG)  # the chief is gone
    assert plan.status.restarts == 1
    chief = next(a.manifest for a in plan.creates() if a.manifest["metadata"]["name"] == "mnist-chief-0")
    assert chief["metadata"]["labels"]["tfps.dev/restart"] == "1"
    assert len(tf_config(plan, "mnist-chief-0")["cluster"]["worker"]) == 3


def test_steps_the_chief_reported_but_did_not_save_are_the_resizes_cost():
    job = ps_job(workers=3)
    st = status(**sized(1, 2), progress={"step": 900}, checkpoint={"step": 800, "path": "/c/ckpt-800"})
    pods = run_pods(job, 1, 3)
    st = reconcile(job, st, observed(job, pods), later(5), CFG).status
    pods[0] = pod(job, "chief", 0, "Failed", exit_code=137)  # killed before it could save
    st = reconcile(job, st, observed(job, pods), later(200), CFG).status
    assert (st.resize.resumed_from, st.resize.steps_lost) == (800, 100)


def test_a_chief_that_reached_its_target_while_stopping_for_a_resize_ends_training():
    job = ps_job(workers=3)
    st = reconcile(job, status(**sized(1, 2)), observed(job, run_pods(job, 1, 3)), later(5), CFG).status
    pods = run_pods(job, 1, 3)
    summary = termination_line("chief/0", "completed step 100/100; final checkpoint /c/ckpt-100")
    pods[0] = pod(job, "chief", 0, "Succeeded", exit_code=0, message=summary, deleting=True)
    plan = reconcile(job, st, observed(job, pods), later(9), CFG)
    assert plan.status.restarts == 0 and plan.status.phase == "Exporting"
    assert plan.status.resize.completed is not None and plan.status.checkpoint.step == 100


# --- parameter servers ----------------------------------------------------------------------------------


def test_a_new_ps_count_takes_effect_through_a_restart():
    job = ps_job(workers=2, ps=2)
    plan = reconcile(job, status(**sized(1, 2)), observed(job, run_pods(job, 1, 2)), later(5), CFG)
    assert plan.status.resize.method == "Restart" and plan.status.resize.to.ps == 2
    assert deleted(plan) == {"mnist-chief-0": None} and created(plan) == []


# --- Pending workers -------------------------------------------------------------------------------------


def _pending_pods(job, age: float) -> list[dict]:
    pods = run_pods(job, 1, 4)
    pods[-1] = pod(job, "worker", 3, "Pending", scheduled=False, unschedulable="0/2 nodes: Insufficient cpu")
    pods[-2] = pod(job, "worker", 2, "Pending", scheduled=False, created=T0)
    pods[-1]["metadata"]["creationTimestamp"] = T0.strftime("%Y-%m-%dT%H:%M:%SZ")
    return pods


def test_an_elastic_job_leaves_out_workers_pending_past_the_timeout_but_not_below_its_minimum():
    job = ps_job(workers=4, minReplicas=3, pendingTimeoutSeconds=60)
    early = reconcile(job, status(**sized(1, 4)), observed(job, _pending_pods(job, 0)), later(30), CFG)
    assert early.status.resize is None and deleted(early) == {}
    plan = reconcile(job, status(**sized(1, 4)), observed(job, _pending_pods(job, 0)), later(61), CFG)
    st = plan.status
    assert st.resize.reason == "WorkersPending" and st.resize.to.worker == 3  # 2 pending, minimum 3
    assert st.resize.method == "Restart" and deleted(plan) == {"mnist-chief-0": None}


def test_a_job_that_is_not_elastic_waits_for_its_pending_workers():
    job = ps_job(workers=4)
    plan = reconcile(job, status(**sized(1, 4)), observed(job, _pending_pods(job, 0)), later(3600), CFG)
    assert plan.status.resize is None and deleted(plan) == {}
    assert plan.status.reason == "Unschedulable"


def test_left_out_workers_come_back_once_pods_in_their_place_run():
    job = ps_job(workers=4, minReplicas=2, pendingTimeoutSeconds=60)
    left_out = {
        "from": {"ps": 1, "worker": 4},
        "to": {"ps": 1, "worker": 3},
        "method": "Restart",
        "reason": "WorkersPending",
        "completed": T0.isoformat(),
    }
    st = status(**sized(1, 3), workersLeftOut=1, restarts=1, resizes=1, resize=left_out)
    pods = [*run_pods(job, 1, 3, restart=1), pod(job, "worker", 3, "Pending", scheduled=False, restart=1)]
    plan = reconcile(job, st, observed(job, pods), later(5), CFG)
    assert plan.status.resize.reason == "WorkersPending" and plan.status.reason == "WorkersPending"
    assert deleted(plan) == {} and created(plan) == []
    pods[-1] = pod(job, "worker", 3, restart=1)
    grow = reconcile(job, st, observed(job, pods), later(90), CFG)
    assert grow.status.resize.reason == "CapacityFreed" and grow.status.resize.to.worker == 4


# --- gang scheduling and Kueue ---------------------------------------------------------------------------


def test_gang_min_member_and_kueues_min_count_follow_the_minimum():
    job = ps_job(workers=4, minReplicas=2)
    assert min_member(job) == 1 + 1 + 2
    wl = workload(make_job(), desired_pods(job, CFG), None)
    pod_sets = {p["name"]: p for p in wl["spec"]["podSets"]}
    assert "minCount" not in pod_sets["worker"]
    wl = workload(job, desired_pods(job, CFG), None)
    pod_sets = {p["name"]: p for p in wl["spec"]["podSets"]}
    assert pod_sets["worker"]["count"] == 4 and pod_sets["worker"]["minCount"] == 2
    assert "minCount" not in pod_sets["ps"]


def test_a_partial_admission_runs_the_workers_kueue_admitted():
    job = ps_job(workers=4, spec={"runPolicy": {"schedulingPolicy": {"queue": "team"}}}, minReplicas=2)
    cfg = replace(CFG, kueue=True)
    wl = {
        "metadata": {"name": "psjob-mnist", "uid": "w1"},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "chief", "count": 1},
                    {"name": "ps", "count": 1},
                    {"name": "worker", "count": 3},
                ],
            },
        },
    }
    obs = observe([], None, observed(job).existing, workload=workload_obs(wl))
    plan = reconcile(job, status(phase="Pending"), obs, later(1), cfg)
    assert plan.status.cluster_size.worker == 3 and plan.status.workers_left_out == 1
    assert created(plan) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]
