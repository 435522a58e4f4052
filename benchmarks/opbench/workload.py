"""N equivalent jobs (1 chief + 2 PS + 3 workers, no export, cleanPodPolicy Running) for either operator,
a watch of pods and jobs that timestamps what the harness sees, and the kubelet's part (chief succeeded)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client, watch

IMAGE = "tfps-trainer:0.1.0"
REPLICAS = {"chief": 1, "ps": 2, "worker": 3}
PODS_PER_JOB = sum(REPLICAS.values())
KINDS = {"tfps": ("tfps.dev", "v1alpha1", "pstrainingjobs"), "tfjob": ("kubeflow.org", "v1", "tfjobs")}


def tfps_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "image": IMAGE,
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 10},
            "replicas": {"chief": {"replicas": 1}, "ps": {"replicas": 2}, "worker": {"replicas": 3}},
            "storage": {"claimName": "data"},
            "export": {"enabled": False},
            "runPolicy": {"cleanPodPolicy": "Running"},
        },
    }


def tfjob_job(name: str) -> dict[str, Any]:
    def spec(n: int) -> dict[str, Any]:
        return {
            "replicas": n,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": IMAGE,
                            "args": ["python", "-m", "tfps_trainer"],
                            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
                        }
                    ]
                }
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            "tfReplicaSpecs": {"Chief": spec(1), "PS": spec(2), "Worker": spec(3)},
        },
    }


def job_manifest(operator: str, name: str) -> dict[str, Any]:
    return tfps_job(name) if operator == "tfps" else tfjob_job(name)


def job_state(operator: str, obj: dict[str, Any]) -> str | None:
    """'Running' / 'Succeeded' / 'Failed' as the job's status says, else None."""
    st = obj.get("status") or {}
    if operator == "tfps":
        return st.get("phase") if st.get("phase") in ("Running", "Succeeded", "Failed") else None
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    for t in ("Succeeded", "Failed", "Running"):
        if conds.get(t) == "True":
            return t
    return None


class RawWatch(watch.Watch):
    """Events as plain dicts: skips the client's model deserialization (the harness shares the CPU)."""

    def get_return_type(self, func: Any) -> None:
        return None


class Observer:
    """Watches pods and jobs of one namespace; records the first time each fact is seen (time.time())."""

    def __init__(self, api: Any, namespace: str, operator: str):
        self.api, self.ns, self.op = api, namespace, operator
        self.pod_added: dict[str, float] = {}
        self.pod_job: dict[str, str] = {}
        self.pod_container: dict[str, tuple[str, str]] = {}
        self.pod_running: dict[str, float] = {}
        self.pod_deleted: dict[str, float] = {}
        """Pods seen going (deletionTimestamp set) or gone (DELETED)."""
        self.job_state: dict[tuple[str, str], float] = {}
        self.cond = threading.Condition()
        self._stop = threading.Event()
        self._watches: list[RawWatch] = []
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def start(self) -> None:
        core = client.CoreV1Api(self.api)
        custom = client.CustomObjectsApi(self.api)
        g, v, p = KINDS[self.op]
        rv_pods = core.list_namespaced_pod(self.ns).metadata.resource_version
        rv_jobs = custom.list_namespaced_custom_object(g, v, self.ns, p)["metadata"]["resourceVersion"]
        self._spawn(self._on_pod, core.list_namespaced_pod, rv_pods, self.ns)
        self._spawn(self._on_job, custom.list_namespaced_custom_object, rv_jobs, g, v, self.ns, p)

    def _spawn(self, handler: Callable[[str, Any], None], fn: Callable[..., Any], rv: str, *args: Any) -> None:
        def loop() -> None:
            resource_version = rv
            while not self._stop.is_set():
                w = RawWatch()
                self._watches.append(w)
                try:
                    for ev in w.stream(
                        fn,
                        *args,
                        resource_version=resource_version,
                        timeout_seconds=60,
                        allow_watch_bookmarks=True,
                        _request_timeout=90,
                    ):
                        now = time.time()
                        obj = ev["object"]
                        raw = obj if isinstance(obj, dict) else self.api.sanitize_for_serialization(obj)
                        resource_version = raw["metadata"].get("resourceVersion", resource_version)
                        if ev["type"] != "BOOKMARK":
                            handler(ev["type"], raw, now)
                        if self._stop.is_set():
                            break
                except Exception as exc:  # keep watching; a gap would show as a missing timestamp
                    if not self._stop.is_set():
                        self.errors.append(repr(exc))
                        time.sleep(0.2)

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        self._threads.append(t)

    def _on_pod(self, kind: str, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        owner = next((r["name"] for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
        if owner is None:
            return
        with self.cond:
            if kind == "ADDED" and name not in self.pod_added:
                self.pod_added[name] = now
                self.pod_job[name] = owner
                c = pod["spec"]["containers"][0]
                self.pod_container[name] = (c["name"], c.get("image", IMAGE))
            if (pod.get("status") or {}).get("phase") == "Running" and name not in self.pod_running:
                self.pod_running[name] = now
            if (kind == "DELETED" or pod["metadata"].get("deletionTimestamp")) and name not in self.pod_deleted:
                self.pod_deleted[name] = now
            self.cond.notify_all()

    def _on_job(self, kind: str, job: dict[str, Any], now: float) -> None:
        state = job_state(self.op, job)
        if state is None:
            return
        key = (job["metadata"]["name"], state)
        with self.cond:
            self.job_state.setdefault(key, now)
            self.cond.notify_all()

    def wait(self, pred: Callable[[], bool], timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def stop(self) -> None:
        self._stop.set()
        for w in self._watches:
            w.stop()

    def pods_by_job(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = defaultdict(list)
        with self.cond:
            for pod, t in self.pod_added.items():
                out[self.pod_job[pod]].append(t)
        return out


def create_jobs(api: Any, operator: str, namespace: str, names: list[str], threads: int = 8) -> dict[str, float]:
    """Create every job as fast as the harness can (``threads`` in flight); returns each job's send time."""
    custom = client.CustomObjectsApi(api)
    g, v, p = KINDS[operator]
    sent: dict[str, float] = {}

    def one(name: str) -> None:
        sent[name] = time.time()
        custom.create_namespaced_custom_object(g, v, namespace, p, job_manifest(operator, name))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, names))
    return sent


def finish_chief(api: Any, namespace: str, pod: str, container: tuple[str, str]) -> float:
    """Play kubelet: the chief's container exited 0 (pod Succeeded). Returns when the patch was sent."""
    t = time.time()
    client.CoreV1Api(api).patch_namespaced_pod_status(
        pod,
        namespace,
        {
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [
                    {
                        "name": container[0],
                        "image": container[1],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": 0,
                                "reason": "Completed",
                                "startedAt": "2026-01-01T00:00:00Z",
                                "finishedAt": "2026-01-01T00:00:01Z",
                            }
                        },
                    }
                ],
            }
        },
    )
    return t
