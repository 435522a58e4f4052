"""Operator crash-consistency soak: SIGKILL the operator at random (seeded) moments while several
PSTrainingJobs go through their lifecycles, restart it each time, then audit everything.

The operator runs as a subprocess and kwok fakes the kubelets; this driver plays kubelet (patches pod
status) exactly like tests/operator (it imports that harness: ``operator_harness``). Each job follows
a *fate* — a list of steps ``(what, ready(), act())`` — chosen by the seeded RNG, and has an expected
end: phase, condition reason, restart count, and how many times each child may be created.

Audit after the last kill (operator left running):

* every job reached its expected phase/reason, ``status.restarts`` equals the whole-job restarts
  injected (a failure seen across a crash is never counted twice), export results are in status;
* creations, counted from a watch of pods and batch Jobs for the whole soak: every trainer pod
  created exactly as often as its fate requires (per restart epoch), at most one export Job per job,
  so a crash never duplicates a child;
* nothing orphaned: every pod, Service, NetworkPolicy, PVC and batch Job in the namespace is owned by
  a live job; deleted jobs left nothing; every live job has exactly one Service and NetworkPolicy;
* status matches reality: no trainer pod of a finished job is still running (cleanPodPolicy
  Running), every remaining trainer pod belongs to the final restart epoch;
* security: every pod created (watched) has ``automountServiceAccountToken: false`` and no projected
  ServiceAccount token volume or mount; the namespace enforces PodSecurity ``restricted``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from operator_harness import Cluster, OperatorProcess, job_body

from tfps_wire.export_result import ArtifactResult, ExportFailed, ExportSucceeded, encode

KWOK_HANDS_OFF = {"metadata": {"annotations": {"kwok.x-k8s.io/status": "custom"}}}
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ROLES4 = ("chief-0", "ps-0", "worker-0", "worker-1")

Step = tuple[str, Callable[[], Any], Callable[[], None]]


class SoakFailure(AssertionError):
    pass


@dataclass
class Expect:
    phase: str | None  # None: the job is deleted
    reason: str | None = None
    restarts: int = 0
    creations: dict[tuple[str, int], int] = field(default_factory=dict)
    """(pod suffix like 'worker-1', restart epoch) -> times created; unlisted suffixes of ROLES4 at epoch 0: 1."""
    export_jobs: int = 0
    export_result: ExportSucceeded | None = None


@dataclass
class SoakJob:
    name: str
    fate: str
    steps: list[Step]
    expect: Expect
    step: int = 0
    step_since: float = 0.0
    done_at: float | None = None
    uid: str | None = None


@dataclass
class Figures:
    seed: int
    kills: int = 0
    kills_while_jobs_in_flight: int = 0
    operator_starts: int = 0
    jobs: int = 0
    fates: Counter = field(default_factory=Counter)
    pod_failures_injected: int = 0
    actions_while_operator_down: int = 0
    pods_created: int = 0
    export_jobs_created: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["fates"] = dict(self.fates)
        return d


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class Recorder:
    """Watches pods and batch Jobs of the namespace for the whole soak; records every creation."""

    def __init__(self, kubeconfig: str, namespace: str):
        from kubernetes import client, config

        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.ns = namespace
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> first seen raw pod
        self.jobs: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.timeline: list[tuple[float, str, str, str, str]] = []
        """(wall time seen, ADDED|TERMINATING|DELETED, name, uid, restart label) of every pod: the evidence
        printed when a pod was created more often than its fate allows."""
        self._terminating: set[str] = set()
        self._lock = threading.Lock()  # the watch threads add to pods and jobs while the soak reads them
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, args=(self.core.list_namespaced_pod, self.pods), daemon=True),
            threading.Thread(target=self._watch, args=(self.batch.list_namespaced_job, self.jobs), daemon=True),
        ]

    def start(self) -> Recorder:
        for t in self._threads:
            t.start()
        return self

    def _watch(self, lister: Callable[..., Any], into: dict[str, dict[str, Any]]) -> None:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        rv = lister(self.ns).metadata.resource_version
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(lister, self.ns, resource_version=rv, timeout_seconds=5, allow_watch_bookmarks=True):
                    obj = ev["object"]
                    rv = obj.metadata.resource_version
                    if ev["type"] == "BOOKMARK":
                        continue
                    if into is self.pods:
                        self._note(ev["type"], obj)
                    if obj.metadata.uid not in into:
                        raw = self.api.sanitize_for_serialization(obj)
                        with self._lock:
                            into[obj.metadata.uid] = raw
                    if self._stop.is_set():
                        break
            except ApiException as e:  # 410 Gone: the soak would miss creations; say so
                self.errors.append(f"watch {lister.__name__} broke: {e.status} {e.reason}")
                return
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(0.5)
            finally:
                w.stop()

    def _note(self, kind: str, pod: Any) -> None:
        uid = pod.metadata.uid
        if kind == "MODIFIED":
            if not pod.metadata.deletion_timestamp or uid in self._terminating:
                return
            self._terminating.add(uid)
            kind = "TERMINATING"
        if kind in ("ADDED", "DELETED", "TERMINATING"):
            restart = (pod.metadata.labels or {}).get("tfps.dev/restart", "")
            self.timeline.append((time.time(), kind, pod.metadata.name, uid, restart))

    def created_pods(self) -> list[dict[str, Any]]:
        """Every pod seen so far, as first seen; a copy the watch threads do not change."""
        with self._lock:
            return list(self.pods.values())

    def created_jobs(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.jobs.values())

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        self.api.close()


class Soak:
    def __init__(
        self,
        kube: Cluster,
        kubeconfig: str,
        new_operator: Callable[[int], OperatorProcess],
        *,
        seed: int,
        kills: int,
        min_jobs: int,
        in_flight: int,
        kill_gap: tuple[float, float] = (3.0, 9.0),
        downtime: tuple[float, float] = (0.0, 3.0),
        step_timeout: float = 120.0,
        log: Callable[[str], None] = print,
    ):
        self.kube, self.kubeconfig, self.new_operator = kube, kubeconfig, new_operator
        # Two streams, so a seed fixes the sequence of fates (job i always gets the same one) and the
        # sequence of kill gaps/downtimes, however the timing interleaves them. One shared stream made
        # the fates depend on how many kills came first (the same seed gave s32-export, then s32-delete).
        self.fate_rng = random.Random(seed)
        self.kill_rng = random.Random(f"{seed}-kills")
        self.target_kills, self.min_jobs, self.in_flight = kills, min_jobs, in_flight
        self.kill_gap, self.downtime, self.step_timeout = kill_gap, downtime, step_timeout
        self.log = log
        self.figures = Figures(seed=seed)
        self.jobs: list[SoakJob] = []
        self.op: OperatorProcess | None = None
        self.op_down_until: float | None = None
        self.next_kill = 0.0
        self.recorder = Recorder(kubeconfig, kube.ns)
        self._pods: dict[str, dict[str, Any]] = {}
        self.operator_history: list[tuple[float, str]] = []
        """(wall time, "operator #n started" | "operator #n killed"), for the evidence of a failed audit."""

    # --- operator ------------------------------------------------------------------------------
    def _start_operator(self) -> None:
        self.op = self.new_operator(self.figures.operator_starts)
        self.operator_history.append((time.time(), f"operator #{self.figures.operator_starts} healthy"))
        self.figures.operator_starts += 1
        self.op_down_until = None
        self.next_kill = time.monotonic() + self.kill_rng.uniform(*self.kill_gap)

    def _maybe_kill(self, now: float) -> None:
        if self.op_down_until is not None:
            if now >= self.op_down_until:
                self._start_operator()
            return
        if self.figures.kills < self.target_kills and now >= self.next_kill:
            assert self.op is not None
            if self.op.proc is not None and self.op.proc.poll() is not None:
                raise SoakFailure(
                    f"the operator exited by itself ({self.op.proc.returncode}):\n{self.op.log()[-3000:]}"
                )
            self.op.kill()
            self.operator_history.append((time.time(), f"operator #{self.figures.operator_starts - 1} killed"))
            self.figures.kills += 1
            busy = [j.name for j in self.jobs if j.done_at is None]
            self.figures.kills_while_jobs_in_flight += bool(busy)
            self.op_down_until = now + self.kill_rng.uniform(*self.downtime)
            self.log(f"kill #{self.figures.kills} (jobs in flight: {', '.join(busy) or '-'})")

    # --- fates ---------------------------------------------------------------------------------
    def _pods_of(self, job: str) -> dict[str, dict[str, Any]]:
        return {n: p for n, p in self._pods.items() if p["metadata"]["labels"].get("tfps.dev/job-name") == job}

    def _live(self, job: str, epoch: int, phase: str = "Running") -> Callable[[], bool]:
        def ready() -> bool:
            pods = self._pods_of(job)
            want = [f"{job}-{s}" for s in ROLES4]
            return all(
                n in pods
                and not pods[n]["metadata"].get("deletionTimestamp")
                and pods[n]["metadata"]["labels"].get("tfps.dev/restart") == str(epoch)
                and (
                    pods[n]["status"].get("phase") == phase
                    or pods[n]["metadata"].get("annotations", {}).get("kwok.x-k8s.io/status") == "custom"
                )
                for n in want
            )

        return ready

    def _finish(self, job: str, pod: str, phase: str, code: int, message: str = "") -> Callable[[], None]:
        def act() -> None:
            if phase == "Failed":
                self.figures.pod_failures_injected += 1
            self.kube.finish_pod(f"{job}-{pod}" if not pod.startswith(job) else pod, phase, code, message)

        return act

    def _phase(self, job: str, phase: str) -> Callable[[], bool]:
        return lambda: self.kube.status(job).get("phase") == phase

    def _new_job(self, index: int) -> SoakJob:
        fate = self.fate_rng.choice(
            ["train", "worker", "ps", "backoff", "export", "export_fail", "delete", "suspend", "ttl"]
        )
        name = f"s{index}-{fate.replace('_', '')}"
        k = self.kube
        body = job_body(name)
        steps: list[Step]
        if fate == "train":
            steps = [("pods running", self._live(name, 0), self._finish(name, "chief-0", "Succeeded", 0))]
            expect = Expect("Succeeded", "TrainingSucceeded")
        elif fate == "ttl":
            body = job_body(name, run_policy={"ttlSecondsAfterFinished": 2})
            steps = [("pods running", self._live(name, 0), self._finish(name, "chief-0", "Succeeded", 0))]
            expect = Expect(None)
        elif fate == "worker":
            steps = [
                ("pods running", self._live(name, 0), self._finish(name, "worker-1", "Failed", 1, "worker OOM")),
                (
                    "worker-1 recreated",
                    lambda: self._recreated(name, "worker-1", 2),
                    self._finish(name, "chief-0", "Succeeded", 0),
                ),
            ]
            expect = Expect("Succeeded", "TrainingSucceeded", creations={("worker-1", 0): 2})
        elif fate == "ps":
            steps = [
                ("pods running", self._live(name, 0), self._finish(name, "ps-0", "Failed", 137)),
                ("epoch 1 running", self._live(name, 1), self._finish(name, "chief-0", "Succeeded", 0)),
            ]
            expect = Expect("Succeeded", "TrainingSucceeded", restarts=1, creations={**{(s, 1): 1 for s in ROLES4}})
        elif fate == "backoff":
            body = job_body(name, run_policy={"backoffLimit": 0})
            steps = [("pods running", self._live(name, 0), self._finish(name, "ps-0", "Failed", 137))]
            expect = Expect("Failed", "BackoffLimitExceeded")
        elif fate in ("export", "export_fail"):
            body = job_body(
                name,
                export=True,
                chief_template=KWOK_HANDS_OFF,
                export_spec={"backoffLimit": 0} if fate == "export_fail" else None,
            )
            result = ExportSucceeded(
                step=10,
                path="exports/10",
                manifest="exports/10/manifest.json",
                artifacts=[
                    ArtifactResult(
                        format="onnx",
                        path="exports/10/model.onnx",
                        bytes=4096 + index,
                        sha256=f"{index:064x}",
                        max_error=1e-7,
                    )
                ],
            )
            finish_export = (
                self._finish_export(name, "Succeeded", 0, encode(result))
                if fate == "export"
                else self._finish_export(
                    name,
                    "Failed",
                    7,
                    encode(
                        ExportFailed(
                            reason="VerificationFailed", message=f"onnx: max abs error 0.3 > tolerance 1e-05 ({name})"
                        )
                    ),
                )
            )
            steps = [
                ("pods created", self._live(name, 0), self._finish(name, "chief-0", "Succeeded", 0)),
                ("export pod", lambda: self._export_pod(name), finish_export),
            ]
            expect = (
                Expect("Succeeded", "ExportSucceeded", export_jobs=1, export_result=result)
                if fate == "export"
                else Expect("Failed", "ExportFailed", export_jobs=1)
            )
        elif fate == "delete":
            body["spec"]["storage"] = {"volumeClaimTemplate": {"size": "1Gi", "storageClassName": "none-such"}}
            steps = [
                (
                    "PVC and pods created",
                    lambda: self._pvc(name) and len(self._pods_of(name)) == 4,
                    lambda: k.delete_job(name),
                )
            ]
            expect = Expect(None)
        else:  # suspend
            steps = [
                (
                    "pods running",
                    self._live(name, 0),
                    lambda: k.patch_job(name, {"spec": {"runPolicy": {"suspend": True}}}),
                ),
                (
                    "suspended, pods gone",
                    lambda: self._phase(name, "Suspended")() and not self._pods_of(name),
                    lambda: k.patch_job(name, {"spec": {"runPolicy": {"suspend": False}}}),
                ),
                ("resumed", self._live(name, 0), self._finish(name, "chief-0", "Succeeded", 0)),
            ]
            expect = Expect("Succeeded", "TrainingSucceeded", creations={(s, 0): 2 for s in ROLES4})
        k.create_job(body)
        self.figures.jobs += 1
        self.figures.fates[fate] += 1
        self.log(f"job {name} ({fate}) created")
        return SoakJob(name, fate, steps, expect, step_since=time.monotonic())

    def _recreated(self, job: str, suffix: str, times: int) -> bool:
        name = f"{job}-{suffix}"
        made = [p for p in self.recorder.created_pods() if p["metadata"]["name"] == name]
        pod = self._pods_of(job).get(name)
        return (
            len(made) >= times
            and pod is not None
            and pod["status"].get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
        )

    def _export_pod(self, job: str) -> str | None:
        return next(
            (
                n
                for n, p in self._pods.items()
                if p["metadata"]["labels"].get("job-name") == f"{job}-export"
                and p["status"].get("phase") not in ("Succeeded", "Failed")
            ),
            None,
        )

    def _finish_export(self, job: str, phase: str, code: int, message: str) -> Callable[[], None]:
        def act() -> None:
            pod = self._export_pod(job)
            assert pod is not None
            if phase == "Failed":
                self.figures.pod_failures_injected += 1
            self.kube.finish_pod(pod, phase, code, message)

        return act

    def _pvc(self, job: str) -> bool:
        return bool(
            self.kube.core.list_namespaced_persistent_volume_claim(
                self.kube.ns, label_selector=f"tfps.dev/job-name={job}"
            ).items
        )

    def _is_done(self, j: SoakJob) -> bool:
        if j.step < len(j.steps):
            return False
        if j.expect.phase is None:
            return self.kube.job(j.name) is None
        st = self.kube.status(j.name)
        return st.get("phase") == j.expect.phase

    # --- the loop ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        self._pods = self.kube.pods()

    def run(self) -> Figures:
        t0 = time.monotonic()
        self.recorder.start()
        self._start_operator()
        index = 0
        try:
            while True:
                now = time.monotonic()
                self._maybe_kill(now)
                self._refresh()
                active = [j for j in self.jobs if j.done_at is None]
                more = self.figures.kills < self.target_kills or self.figures.jobs < self.min_jobs
                while more and len(active) < self.in_flight:
                    job = self._new_job(index)
                    index += 1
                    self.jobs.append(job)
                    active.append(job)
                for j in active:
                    self._advance(j, now)
                if not more and all(j.done_at is not None for j in self.jobs) and self.op_down_until is None:
                    break
                time.sleep(0.3)
        finally:
            self.figures.seconds = round(time.monotonic() - t0, 1)
        return self.figures

    def _advance(self, j: SoakJob, now: float) -> None:
        if j.step < len(j.steps):
            what, ready, act = j.steps[j.step]
            if ready():
                act()
                if self.op_down_until is not None:
                    self.figures.actions_while_operator_down += 1
                j.step += 1
                j.step_since = now
            elif now - j.step_since > self.step_timeout:
                pods = {
                    n: (p["status"].get("phase"), p["metadata"]["labels"].get("tfps.dev/restart"))
                    for n, p in self._pods_of(j.name).items()
                }
                raise SoakFailure(
                    f"job {j.name} ({j.fate}) stuck at step {what!r} for {self.step_timeout:.0f}s; "
                    f"status: {json.dumps(self.kube.status(j.name))[:1500]}\npods: {pods}"
                )
        elif self._is_done(j):
            j.done_at = now
            self.log(f"job {j.name} ({j.fate}) reached its end")
        elif now - j.step_since > self.step_timeout:
            raise SoakFailure(
                f"job {j.name} ({j.fate}) did not reach {j.expect.phase or 'deletion'} in {self.step_timeout:.0f}s; "
                f"status: {json.dumps(self.kube.status(j.name))[:1500]}"
            )

    # --- audit ---------------------------------------------------------------------------------
    def audit(self, settle: float = 60.0) -> list[str]:
        """Problems found (empty = all good). Waits up to ``settle`` s for garbage collection first."""
        deadline = time.monotonic() + settle
        while True:
            problems = self._audit_once()
            if not problems or time.monotonic() > deadline:
                break
            time.sleep(1)
        self.recorder.stop()
        self.figures.pods_created = len(self.recorder.pods)
        self.figures.export_jobs_created = len(self.recorder.jobs)
        return problems + self.recorder.errors

    def evidence(self, names: set[str]) -> str:
        """The watched lifetimes of ``names`` interleaved with the operator starts and kills."""
        if not names:
            return "  (no pod named)"
        events = [(t, f"  {_clock(t)} {what}") for t, what in self.operator_history]
        events += [
            (t, f"  {_clock(t)} {kind:<11} {name} (restart {restart}, uid {uid[:8]})")
            for t, kind, name, uid, restart in self.recorder.timeline
            if name in names
        ]
        return "timeline:\n" + "\n".join(line for _, line in sorted(events))

    def _audit_once(self) -> list[str]:
        k, ns = self.kube, self.kube.ns
        problems: list[str] = []
        live = {}
        for j in self.jobs:
            obj = k.job(j.name)
            if j.expect.phase is None:
                if obj is not None:
                    problems.append(
                        f"{j.name}: should be gone, still there (phase {obj.get('status', {}).get('phase')})"
                    )
                continue
            if obj is None:
                problems.append(f"{j.name}: deleted, expected {j.expect.phase}")
                continue
            live[obj["metadata"]["uid"]] = j
            st = obj.get("status") or {}
            cond = next((c for c in st.get("conditions", []) if c["type"] == st.get("phase")), {})
            if (st.get("phase"), cond.get("reason"), st.get("restarts", 0)) != (
                j.expect.phase,
                j.expect.reason,
                j.expect.restarts,
            ):
                problems.append(
                    f"{j.name} ({j.fate}): phase/reason/restarts {st.get('phase')}/{cond.get('reason')}/"
                    f"{st.get('restarts', 0)}, expected {j.expect.phase}/{j.expect.reason}/{j.expect.restarts}"
                )
            if j.expect.export_result is not None:
                exp = st.get("export") or {}
                arts = [(a["format"], a["bytes"], a["sha256"]) for a in exp.get("artifacts", [])]
                want = [(a.format, a.bytes, a.sha256) for a in j.expect.export_result.artifacts]
                if exp.get("jobName") != f"{j.name}-export" or exp.get("step") != 10 or arts != want:
                    problems.append(f"{j.name}: export status {exp} does not match the exporter's result {want}")
        job_uids = set(live)

        # creations, from the watch
        per_job: dict[str, Counter] = {}
        for pod in self.recorder.created_pods():
            lbl = pod["metadata"].get("labels") or {}
            if lbl.get("tfps.dev/replica-type"):
                job = lbl["tfps.dev/job-name"]
                suffix = pod["metadata"]["name"][len(job) + 1 :]
                per_job.setdefault(job, Counter())[(suffix, int(lbl["tfps.dev/restart"]))] += 1
            spec = pod.get("spec") or {}
            if spec.get("automountServiceAccountToken") is not False:
                problems.append(f"pod {pod['metadata']['name']}: automountServiceAccountToken is not false")
            for v in spec.get("volumes") or []:
                if any("serviceAccountToken" in s for s in (v.get("projected") or {}).get("sources") or []):
                    problems.append(f"pod {pod['metadata']['name']}: projected ServiceAccount token volume {v['name']}")
            for c in spec.get("containers") or []:
                if any(m.get("mountPath", "").startswith(TOKEN_PATH) for m in c.get("volumeMounts") or []):
                    problems.append(f"pod {pod['metadata']['name']}: API token mounted in {c['name']}")
        for j in self.jobs:
            want = Counter({(s, 0): 1 for s in ROLES4})
            want.update({key: n - want.get(key, 0) for key, n in j.expect.creations.items()})
            got = per_job.get(j.name, Counter())
            if +got != +want:
                problems.append(
                    f"{j.name} ({j.fate}): pods created {dict(sorted(got.items()))},"
                    f" expected {dict(sorted(want.items()))}"
                )
                problems.append(
                    self.evidence(
                        {f"{j.name}-{suffix}" for (suffix, _), n in (got - want).items() if n}
                        | {f"{j.name}-{suffix}" for (suffix, _), n in (want - got).items() if n}
                    )
                )
            ejs = [x for x in self.recorder.created_jobs() if x["metadata"]["name"] == f"{j.name}-export"]
            if len(ejs) != j.expect.export_jobs:
                problems.append(f"{j.name}: {len(ejs)} export Job(s) created, expected {j.expect.export_jobs}")

        # what exists now: owned by a live job, nothing orphaned or duplicated
        def owned(kind: str, items: list[Any]) -> None:
            for it in items:
                d = k.d(it)
                refs = d["metadata"].get("ownerReferences") or []
                name = d["metadata"]["name"]
                if kind == "Pod" and (d["metadata"].get("labels") or {}).get("job-name"):
                    continue  # export pods are owned by their batch Job, checked below
                if kind == "PersistentVolumeClaim" and name == "data":
                    continue  # the pre-bound claim the jobs share
                if not [r for r in refs if r.get("uid") in job_uids and r.get("controller")]:
                    problems.append(f"orphan {kind} {name} (owners {[r.get('name') for r in refs]})")

        pods = k.core.list_namespaced_pod(ns).items
        owned("Pod", pods)
        owned("Service", k.core.list_namespaced_service(ns).items)
        owned("NetworkPolicy", k.net.list_namespaced_network_policy(ns).items)
        owned("PersistentVolumeClaim", k.core.list_namespaced_persistent_volume_claim(ns).items)
        owned("Job", k.batch.list_namespaced_job(ns).items)
        services = Counter(s.metadata.name for s in k.core.list_namespaced_service(ns).items)
        netpols = Counter(n.metadata.name for n in k.net.list_namespaced_network_policy(ns).items)
        for j in live.values():
            if services[j.name] != 1 or netpols[j.name] != 1:
                problems.append(f"{j.name}: {services[j.name]} Service(s), {netpols[j.name]} NetworkPolicy(ies)")
        restarts = {j.name: (k.status(j.name) or {}).get("restarts", 0) for j in live.values()}
        for p in pods:
            lbl = p.metadata.labels or {}
            job = lbl.get("tfps.dev/job-name")
            if not lbl.get("tfps.dev/replica-type") or job not in restarts:
                continue
            if p.status.phase in ("Pending", "Running") and not p.metadata.deletion_timestamp:
                problems.append(f"{p.metadata.name}: still {p.status.phase} although its job is finished")
            if lbl.get("tfps.dev/restart") != str(restarts[job]):
                problems.append(
                    f"{p.metadata.name}: stale pod of restart epoch {lbl.get('tfps.dev/restart')} "
                    f"(job restarts {restarts[job]})"
                )
        return problems
