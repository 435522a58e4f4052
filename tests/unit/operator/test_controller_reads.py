"""The reconcile loop decides from the watch indexes and its own unechoed writes, and reads nothing.

A recording stand-in for :class:`~tfps_operator.kube.client.Kube` (no API server: the loop's I/O
against a real one is covered by tests/operator) counts what one pass sends.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

from support.operator_helpers import UID
from tfps_operator.controller import Controller, _JobState
from tfps_operator.kube.client import COMPONENT, ApiError
from tfps_operator.kube.watched import RECENT_TTL_SECONDS, ChildRef, RecentWrites, Views, child_ref
from tfps_operator.reconcile.observed import PodObs, pod_obs
from tfps_operator.settings import BuildConfig, OperatorSettings

SETTINGS = OperatorSettings(build=BuildConfig(default_image="tfps-trainer:test"))


def job_body(rv: int = 10, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "mnist", "namespace": "team-a", "uid": UID, "generation": 1, "resourceVersion": str(rv)},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 100},
            "storage": {"claimName": "data"},
            "export": {"preflight": False},
            "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 2}},
        },
        **({"status": status} if status else {}),
    }


class RecordingKube:
    """Answers like the API server would for one job, and records every call."""

    def __init__(
        self, job: dict[str, Any], conflict_once: bool = False, refuse: dict[str, tuple[int, str]] | None = None
    ):
        self.job, self.calls, self.conflict_once = job, [], conflict_once
        self.rv = itertools.count(int(job["metadata"]["resourceVersion"]) + 1)
        self.dry_runs: list[str] = []
        self.refuse = refuse or {}
        """``Kind/name`` -> (status, message) the dry-run of that child answers."""

    async def dry_run_create(self, manifest: dict[str, Any]) -> None:
        key = f"{manifest['kind']}/{manifest['metadata']['name']}"
        self.dry_runs.append(key)
        if key in self.refuse:
            status, message = self.refuse[key]
            raise ApiError(status, "Invalid", message, "POST", key)

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("GET", kind, name))
        return self.job if kind == "PSTrainingJob" else None

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any], rv: str | None) -> dict[str, Any]:
        self.calls.append(("PATCH", "status", name))
        if self.conflict_once or (rv and rv != self.job["metadata"]["resourceVersion"]):
            self.conflict_once = False
            self.job = {**self.job, "metadata": {**self.job["metadata"], "resourceVersion": str(next(self.rv))}}
            raise ApiError(409, "Conflict", "the object has been modified", "PATCH", name)
        merged = {**(self.job.get("status") or {}), **{k: v for k, v in status.items() if v is not None}}
        self.job = {
            **self.job,
            "status": merged,
            "metadata": {**self.job["metadata"], "resourceVersion": str(next(self.rv))},
        }
        # The API server answers with the whole object, its managedFields included.
        return {**self.job, "metadata": {**self.job["metadata"], "managedFields": [{"manager": COMPONENT}]}}

    async def create_or_adopt(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        self.calls.append(("POST", manifest["kind"], manifest["metadata"]["name"]))
        meta = {
            **manifest["metadata"],
            "uid": f"uid-{manifest['metadata']['name']}",
            "resourceVersion": str(next(self.rv)),
        }
        return {**manifest, "metadata": meta}, True

    async def delete(self, kind: str, namespace: str, name: str, uid: str | None = None) -> bool:
        self.calls.append(("DELETE", kind, name))
        return True

    async def event(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.calls.append(("POST", "Event", reason))


def empty_views() -> Views:
    return Views(pods={}, export_jobs={}, children=({},))


def one_pass(controller: Controller, state: _JobState, live: dict[str, Any], views: Views) -> float | None:
    return asyncio.run(controller.reconcile_once("team-a", "mnist", state, live, views))


def test_a_new_job_is_built_without_a_single_read_and_a_second_pass_creates_nothing():
    kube = RecordingKube(job_body())
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    state = _JobState()
    one_pass(controller, state, job_body(), empty_views())
    verbs = [c[0] for c in kube.calls]
    assert "GET" not in verbs
    created = sorted(f"{c[1]}/{c[2]}" for c in kube.calls if c[0] == "POST" and c[1] != "Event")
    assert created == [
        "NetworkPolicy/mnist",
        "Pod/mnist-chief-0",
        "Pod/mnist-ps-0",
        "Pod/mnist-worker-0",
        "Pod/mnist-worker-1",
        "Service/mnist",
    ], created
    # A brand-new job: children first, then ONE status write that already reports them.
    assert [c for c in kube.calls if c[0] == "PATCH"] == [("PATCH", "status", "mnist")]
    assert kube.calls.index(("PATCH", "status", "mnist")) == 6
    assert kube.job["status"]["phase"] == "Pending" and kube.job["status"]["replicaStatuses"]["worker"]["active"] == 2
    assert {c["type"]: c["status"] for c in kube.job["status"]["conditions"]}["Created"] == "True"
    assert ("POST", "Event", "Accepted") in kube.calls
    # every child from the job's templates was validated first, one pod of each replica type (not the
    # Service and NetworkPolicy, which the operator builds alone)
    assert sorted(kube.dry_runs) == ["Job/mnist-export", "Pod/mnist-chief-0", "Pod/mnist-ps-0", "Pod/mnist-worker-0"]

    # The watch has echoed nothing yet and the live body is still the old one: the next pass must
    # neither create again nor write again.
    kube.calls.clear()
    one_pass(controller, state, job_body(), empty_views())
    assert kube.calls == []


def test_a_restart_is_durable_before_its_pods_are_recreated():
    """Only a brand-new job's children may precede its status: a restart is counted first."""
    kube = RecordingKube(job_body())
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    state = _JobState()
    one_pass(controller, state, job_body(), empty_views())
    import dataclasses

    pods = state.recent.pods([])
    ps = next(p for p in pods if p.role == "ps")
    failed = [
        dataclasses.replace(p, phase="Failed", exit_code=1)
        if p.name == ps.name
        else dataclasses.replace(p, phase="Running", scheduled=True, ready=True)
        for p in pods
    ]
    running = dict(kube.job["status"], phase="Running")
    kube.calls.clear()
    views = Views(pods={("team-a", "mnist"): failed}, export_jobs={}, children=({},))
    state.written = None
    one_pass(controller, state, {**kube.job, "status": running}, views)
    writes = [c for c in kube.calls if c[0] in ("PATCH", "DELETE", "POST") and c[1] != "Event"]
    assert writes and writes[0] == ("PATCH", "status", "mnist"), writes
    assert kube.job["status"]["restarts"] == 1


def test_a_refused_status_write_reads_the_job_once_in_the_next_pass_which_decides_nothing_else():
    kube = RecordingKube(job_body(), conflict_once=True)
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    state = _JobState()
    assert one_pass(controller, state, job_body(), empty_views()) == 0.0  # the next pass comes at once
    assert kube.calls[-1] == ("PATCH", "status", "mnist") and ("GET", "PSTrainingJob", "mnist") not in kube.calls
    kube.calls.clear()
    assert one_pass(controller, state, job_body(), empty_views()) == 0.0  # the watch is still behind
    assert kube.calls == [("GET", "PSTrainingJob", "mnist")]
    kube.calls.clear()
    one_pass(controller, state, job_body(), empty_views())  # live body still stale: the read one wins
    assert kube.calls == [("PATCH", "status", "mnist"), ("POST", "Event", "Accepted")]  # no child created twice


def test_a_newer_body_from_the_watch_after_a_refused_write_needs_no_read():
    kube = RecordingKube(job_body(), conflict_once=True)
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    state = _JobState()
    one_pass(controller, state, job_body(), empty_views())
    kube.calls.clear()
    one_pass(controller, state, kube.job, empty_views())  # the watch delivered the newer body
    assert kube.calls == [("PATCH", "status", "mnist"), ("POST", "Event", "Accepted")]


def test_refused_creates_are_reported_by_the_next_pass_then_retried_after_the_back_off():
    class RefusingKube(RecordingKube):
        refusing = True

        async def create_or_adopt(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
            if self.refusing and manifest["metadata"]["name"] == "mnist-worker-1":
                self.calls.append(("POST", "Pod", "mnist-worker-1"))
                raise ApiError(403, "Forbidden", "exceeded quota: pods=4", "POST", "pods")
            return await super().create_or_adopt(manifest)

    kube = RefusingKube(job_body())
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    state = _JobState()
    # A brand-new job: its children first; one refused, so no status yet, and the next pass comes now.
    assert one_pass(controller, state, job_body(), empty_views()) == 0.0
    assert not [c for c in kube.calls if c[0] == "PATCH"] and ("POST", "Pod", "mnist-worker-1") in kube.calls
    kube.calls.clear()
    # That pass reports the refusal (status and Event), creates nothing, and waits the back-off.
    backoff = one_pass(controller, state, job_body(), empty_views())
    assert backoff is not None and backoff > 0
    assert not [c for c in kube.calls if c[0] == "POST" and c[1] != "Event"]
    assert ("POST", "Event", "CreateFailed") in kube.calls and ("POST", "Event", "Accepted") in kube.calls
    created = {c["type"]: c for c in kube.job["status"]["conditions"]}["Created"]
    assert created["status"] == "False" and "Pod/mnist-worker-1: exceeded quota" in created["message"]
    # After the back-off: refused again, reported again without a second Event, a longer back-off.
    kube.calls.clear()
    assert one_pass(controller, state, kube.job, empty_views()) == 0.0
    assert kube.calls == [("POST", "Pod", "mnist-worker-1")]
    kube.calls.clear()
    assert one_pass(controller, state, kube.job, empty_views()) > backoff
    assert kube.calls == []  # the condition already says so: nothing to write
    # Quota freed: created, and the job's back-off starts afresh.
    kube.refusing = False
    kube.calls.clear()
    one_pass(controller, state, kube.job, empty_views())
    assert ("POST", "Pod", "mnist-worker-1") in kube.calls
    one_pass(controller, state, kube.job, empty_views())  # the pass after reports every child there
    assert {c["type"]: c["status"] for c in kube.job["status"]["conditions"]}["Created"] == "True"
    assert controller.queue.add_rate_limited(("job", "team-a", "mnist")) == SETTINGS.retry_base_seconds


def test_the_live_body_wins_once_it_is_as_new_as_our_write():
    state = _JobState()
    state.written = job_body(rv=12, phase="Pending")
    assert state.freshest(job_body(rv=11))["metadata"]["resourceVersion"] == "12"
    newer = job_body(rv=13, phase="Running")
    assert state.freshest(newer)["status"]["phase"] == "Running" and state.written is None


def test_our_write_is_kept_trimmed_and_released_when_the_watch_echoes_it():
    kube = RecordingKube(job_body())
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    key = "team-a/mnist"
    state = controller.jobs[key] = _JobState()
    one_pass(controller, state, job_body(), empty_views())
    assert state.written is not None and "managedFields" not in state.written["metadata"]
    written_rv = int(state.written["metadata"]["resourceVersion"])
    controller.job_event("MODIFIED", job_body(rv=written_rv - 1))  # an older body: still needed
    assert state.written is not None
    controller.job_event("MODIFIED", job_body(rv=written_rv))  # the echo: no longer held
    assert state.written is None


def test_bodies_are_kept_compact_and_each_read_is_a_fresh_copy():
    controller = Controller(RecordingKube(job_body()), SETTINGS)  # type: ignore[arg-type]
    body = {**job_body(rv=7), "metadata": {**job_body(rv=7)["metadata"], "managedFields": [{"manager": "x"}]}}
    controller.job_event("ADDED", body)
    first = controller.bodies.get("team-a/mnist")
    assert first is not None and "managedFields" not in first["metadata"] and first["spec"] == body["spec"]
    first["spec"]["training"] = {"steps": 1}
    assert controller.bodies.get("team-a/mnist")["spec"] == body["spec"]  # a pass cannot change the kept body
    controller.job_event("DELETED", body)
    assert controller.bodies.get("team-a/mnist") is None and "team-a/mnist" not in controller.bodies


# --- RecentWrites -----------------------------------------------------------------------------------


def pod(name: str, uid: str, phase: str = "Pending", deleting: bool = False) -> PodObs:
    meta: dict[str, Any] = {"name": name, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod_obs({"kind": "Pod", "metadata": meta, "status": {"phase": phase}})


def test_a_created_pod_counts_until_the_watch_reports_it_then_the_index_decides():
    recent = RecentWrites()
    recent.record_create({"kind": "Pod", "metadata": {"name": "j-ps-0", "uid": "u1"}}, now=0.0)
    assert [p.name for p in recent.pods([])] == ["j-ps-0"]
    recent.seen("Pod/j-ps-0", "u1")
    assert recent.pods([]) == []  # reported (and since gone): the index is the truth


def test_a_deleted_pod_is_going_until_the_watch_reports_it():
    recent = RecentWrites()
    recent.record_delete("u1", now=0.0)
    (p,) = recent.pods([pod("j-ps-0", "u1", "Running")])
    assert p.deleting and not p.active
    recent.seen("Pod/j-ps-0", "u1")
    (p,) = recent.pods([pod("j-ps-0", "u1", "Running")])
    assert not p.deleting


def test_a_new_incarnation_replaces_a_stale_terminating_one_but_not_a_live_one():
    recent = RecentWrites()
    recent.record_create({"kind": "Pod", "metadata": {"name": "j-ps-0", "uid": "new"}}, now=0.0)
    assert [p.uid for p in recent.pods([pod("j-ps-0", "old", "Running", deleting=True)])] == ["new"]
    assert [p.uid for p in recent.pods([pod("j-ps-0", "other", "Running")])] == ["other"]


def test_unechoed_writes_expire():
    recent = RecentWrites()
    recent.record_create({"kind": "Pod", "metadata": {"name": "j-ps-0", "uid": "u1"}}, now=100.0)
    recent.record_delete("u2", now=100.0)
    recent.expire(now=100.0 + RECENT_TTL_SECONDS - 1)
    assert recent.created and recent.deleted
    recent.expire(now=100.0 + RECENT_TTL_SECONDS + 1)
    assert not recent.created and not recent.deleted


def test_existing_children_are_only_those_this_job_controls():
    ours = {
        "kind": "Service",
        "metadata": {"name": "j-workers", "uid": "s1", "ownerReferences": [{"controller": True, "uid": UID}]},
    }
    theirs = {
        "kind": "NetworkPolicy",
        "metadata": {"name": "j", "uid": "n1", "ownerReferences": [{"controller": True, "uid": "someone"}]},
    }
    indexed: list[ChildRef] = [child_ref("Service", ours), child_ref("NetworkPolicy", theirs)]
    recent = RecentWrites()
    assert recent.existing(indexed, UID) == {"Service/j-workers"}
    recent.record_create({**ours, "kind": "PersistentVolumeClaim", "metadata": {**ours["metadata"], "name": "j-data"}})
    assert recent.existing(indexed, UID) == {"Service/j-workers", "PersistentVolumeClaim/j-data"}


# --- status writes: counts wait, transitions do not -------------------------------------------------


def test_only_counts_and_wording_count_as_a_minor_status_change():
    from tfps_operator.api.models import PSTrainingJobStatus
    from tfps_operator.reconcile.writes import minor_status_change

    def st(**kw: Any) -> PSTrainingJobStatus:
        base = {
            "phase": "Pending",
            "workers": "0/2",
            "replicaStatuses": {"worker": {"active": 2}},
            "conditions": [{"type": "Scheduled", "status": "False", "reason": "Scheduling", "message": "2 pods"}],
        }
        return PSTrainingJobStatus.model_validate({**base, **kw})

    assert not minor_status_change(st(), st())  # no change at all
    assert minor_status_change(st(), st(workers="1/2", replicaStatuses={"worker": {"active": 2, "ready": 1}}))
    assert minor_status_change(
        st(), st(conditions=[{"type": "Scheduled", "status": "False", "reason": "Scheduling", "message": "1 pod"}])
    )
    assert not minor_status_change(st(), st(phase="Running"))
    # all pods scheduled is progress, not news; a scheduling problem is news
    assert minor_status_change(
        st(), st(conditions=[{"type": "Scheduled", "status": "True", "reason": "AllPodsScheduled"}])
    )
    assert not minor_status_change(
        st(),
        st(conditions=[{"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes"}]),
    )
    assert not minor_status_change(
        st(), st(conditions=[{"type": "Created", "status": "False", "reason": "CreateFailed"}])
    )
    assert not minor_status_change(st(), st(restarts=1))


def test_a_pass_that_only_moves_counts_right_after_a_write_defers_it():
    import dataclasses

    kube = RecordingKube(job_body())
    controller = Controller(kube, dataclasses.replace(SETTINGS, status_interval_seconds=60.0))  # type: ignore[arg-type]
    state = _JobState()
    one_pass(controller, state, job_body(), empty_views())  # children created, then Pending + Created=True
    scheduled = [dataclasses.replace(p, scheduled=True) for p in state.recent.pods([])][:1]
    kube.calls.clear()
    views = Views(pods={("team-a", "mnist"): scheduled}, export_jobs={}, children=({},))
    delay = one_pass(controller, state, job_body(), views)
    assert kube.calls == [] and 0 < delay <= 60.0  # one pod scheduled: only the Scheduled message moved
    state.memory = dataclasses.replace(state.memory, last_status_write=state.memory.last_status_write - 61.0)
    one_pass(controller, state, job_body(), views)
    assert kube.calls == [("PATCH", "status", "mnist")]


def test_at_most_max_concurrent_passes_jobs_reconcile_at_once():
    import dataclasses

    class CountingKube(RecordingKube):
        """Creates take a moment; records how many jobs have a create in flight at once."""

        def __init__(self) -> None:
            super().__init__(job_body())
            self.in_flight: dict[str, int] = {}
            self.most_jobs_at_once = 0

        async def create_or_adopt(self, manifest: dict[str, Any]) -> tuple[dict[str, Any], bool]:
            job = manifest["metadata"]["labels"]["tfps.dev/job-name"]
            self.in_flight[job] = self.in_flight.get(job, 0) + 1
            self.most_jobs_at_once = max(self.most_jobs_at_once, sum(1 for n in self.in_flight.values() if n))
            await asyncio.sleep(0.01)
            self.in_flight[job] -= 1
            return await super().create_or_adopt(manifest)

        async def patch_status(
            self, namespace: str, name: str, status: dict[str, Any], rv: str | None
        ) -> dict[str, Any]:
            self.calls.append(("PATCH", "status", name))
            return {
                **job_body(),
                "metadata": {**job_body()["metadata"], "name": name, "resourceVersion": "99"},
                "status": status,
            }

    def named(i: int) -> dict[str, Any]:
        body = job_body()
        return {**body, "metadata": {**body["metadata"], "name": f"j{i}", "uid": f"{UID[:-2]}{i:02d}"}}

    kube = CountingKube()
    controller = Controller(kube, dataclasses.replace(SETTINGS, max_concurrent_passes=2))  # type: ignore[arg-type]

    async def all_jobs() -> list[float | None]:
        return await asyncio.gather(
            *(controller.reconcile_once("team-a", f"j{i}", _JobState(), named(i), empty_views()) for i in range(6))
        )

    delays = asyncio.run(all_jobs())
    assert all(d is not None for d in delays)
    created = {name for verb, _kind, name in kube.calls if verb == "POST" and _kind == "Pod"}
    assert {f"j{i}-chief-0" for i in range(6)} <= created  # every job got its pods...
    assert kube.most_jobs_at_once == 2  # ...never more than two jobs at a time


def test_a_new_run_the_api_server_refuses_creates_nothing_and_fails_as_invalid_spec():
    refusal = (
        'Pod "mnist-worker-0" is invalid: spec.tolerations[0].operator: Unsupported value: "Sometimes": '
        'supported values: "Equal", "Exists"'
    )
    refuse = {f"Pod/mnist-worker-{i}": (422, refusal.replace("worker-0", f"worker-{i}")) for i in range(2)}
    refuse["Job/mnist-export"] = (409, "already exists")  # an existing child is no refusal
    kube = RecordingKube(job_body(), refuse=refuse)
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    state = _JobState()
    one_pass(controller, state, job_body(), empty_views())
    assert len(kube.dry_runs) == 4  # a pod of each replica type, the export Job
    assert not [c for c in kube.calls if c[0] == "POST" and c[1] != "Event"]  # nothing created
    st = kube.job["status"]
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert st["phase"] == "Failed" and st["reason"] == "InvalidSpec" and failed["reason"] == "InvalidSpec"
    assert ("spec.replicas.worker.template (Pod/mnist-worker-0): " + refusal) in failed["message"]
    assert "mnist-worker-1" not in failed["message"]  # one refusal per replica type's template
    assert ("POST", "Event", "InvalidSpec") in kube.calls
    kube.calls.clear()
    kube.dry_runs.clear()
    one_pass(controller, state, kube.job, empty_views())
    assert kube.dry_runs == [] and not [c for c in kube.calls if c[0] == "POST" and c[1] != "Event"]


def test_an_exceeded_quota_is_no_refusal_the_create_retries_it():
    from tfps_operator.reconcile.admission import is_refusal

    assert not is_refusal(403, 'pods "a" is forbidden: exceeded quota: q, requested: pods=1')
    assert is_refusal(403, 'pods "a" is forbidden: violates PodSecurity "restricted:latest": privileged')
    assert is_refusal(422, "x") and is_refusal(400, "x") and not is_refusal(409, "x") and not is_refusal(504, "x")


async def until(condition: Callable[[], object], timeout: float = 30) -> None:
    """Yield to the event loop until ``condition()`` holds; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout}s"
        await asyncio.sleep(0.01)


def test_the_pool_reconciles_a_watched_job_once_per_burst_and_forgets_a_deleted_one():
    kube = RecordingKube(job_body())
    controller = Controller(kube, SETTINGS)  # type: ignore[arg-type]
    controller.views = empty_views()

    async def go() -> None:
        synced = asyncio.Event()
        pool = asyncio.ensure_future(controller.work([synced]))
        controller.job_event(None, job_body())
        controller.job_event("MODIFIED", job_body())  # the same job twice before a worker is free: one key
        assert len(controller.queue) == 1
        await asyncio.sleep(0.05)
        assert not kube.calls  # no worker starts before the informers are synced
        synced.set()
        # the pass is over once its next look is scheduled (a safety net, not a bound: a loaded machine is slow)
        await until(lambda: controller.queue.delayed())
        assert "team-a/mnist" in controller.jobs
        assert [c for c in kube.calls if c[1] == "Pod"]  # its children created
        assert ("PATCH", "status", "mnist") in kube.calls and controller.queue.delayed() == 1
        calls = len(kube.calls)
        controller.child_event("team-a", "mnist", "Pod/mnist-ps-0", "uid-mnist-ps-0", changed=False)
        assert len(controller.queue) == 0  # an event that changes no record queues nothing
        controller.job_event("DELETED", job_body())
        await asyncio.sleep(controller.settings.settle_seconds)  # its pass is not due before
        await until(lambda: "team-a/mnist" not in controller.jobs)
        assert controller.queue.delayed() == 0
        assert len(kube.calls) == calls  # nothing sent for a deleted job
        controller.queue.shut_down()
        await pool

    asyncio.run(go())


def test_a_delete_collection_counts_the_pods_it_stands_for_without_reading_the_answer():
    from tfps_operator.api.models import PSTrainingJobStatus
    from tfps_operator.kube.executor import execute
    from tfps_operator.reconcile.plan import Delete, DeletePods, Plan

    class CollectionKube:
        def __init__(self) -> None:
            self.collections: list[tuple[str, str, str | None]] = []

        async def delete_collection(self, kind: str, ns: str, labels: str, fields: str | None = None) -> None:
            self.collections.append((kind, labels, fields))  # the API server's answer is never read

        async def event(self, *_: Any) -> None:
            pass

    kube = CollectionKube()
    status = PSTrainingJobStatus.model_validate({"phase": "Succeeded"})
    going = (Delete("Pod", "mnist-ps-0", "u-ps"), Delete("Pod", "mnist-worker-0", "u-w0"))
    plan = Plan(status=status, actions=[DeletePods("tfps.dev/job-name=mnist", "status.phase=Running", going)])
    out = asyncio.run(execute(kube, job_body(), status, plan))  # type: ignore[arg-type]
    assert kube.collections == [("Pod", "tfps.dev/job-name=mnist", "status.phase=Running")]
    assert out.deleted == ["u-ps", "u-w0"]  # going until the watch reports them
