"""Drive the real operator against the real API server: start/kill it, create jobs, play kubelet.

kwok makes trainer pods Running; a test decides how a pod ends by patching its status subresource,
as a kubelet would (hack/README.md, "Driving pod outcomes with kwok").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import kueue
from support.parallel import free_ports

REPO = Path(__file__).resolve().parents[2]
TFPS = Path(sys.executable).with_name("tfps")
GROUP, VERSION, PLURAL = "tfps.dev", "v1beta1", "pstrainingjobs"


def free_port() -> int:
    """A loopback port for a listener a test starts; none that another pytest-xdist worker may pick."""
    (port,) = free_ports(1)
    return port


class OperatorProcess:
    """``tfps operator --namespace NS`` as a subprocess, health and metrics on loopback."""

    def __init__(
        self,
        kubeconfig: str,
        namespaces: list[str],
        log_path: Path,
        extra_env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ):
        self.kubeconfig, self.namespaces, self.log_path = kubeconfig, namespaces, log_path
        self.extra_env, self.extra_args = extra_env or {}, extra_args or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = self.metrics_port = 0

    def start(self, timeout: float = 60) -> OperatorProcess:
        self.health_port, self.metrics_port = free_ports(2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TFPS_") and k != "KUBERNETES_SERVICE_HOST"}
        env.update(
            {
                "KUBECONFIG": self.kubeconfig,
                "TFPS_BIND_ADDRESS": "127.0.0.1",
                "TFPS_HEALTH_PORT": str(self.health_port),
                "TFPS_METRICS_PORT": str(self.metrics_port),
                "TFPS_RESYNC_SECONDS": "10",
                "TFPS_RETRY_BASE_SECONDS": "0.5",
                "TFPS_RETRY_MAX_SECONDS": "2",
                **self.extra_env,
            }
        )
        args = [str(TFPS), "operator", "--kubeconfig", self.kubeconfig, "--verbose", *self.extra_args]
        for ns in self.namespaces:
            args += ["--namespace", ns]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"operator exited {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        pytest.fail(f"operator not healthy after {timeout}s:\n{self.log()[-4000:]}")

    def __enter__(self) -> OperatorProcess:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Leaving a ``with`` block stops the operator; a block that failed shows its log first."""
        if exc_type is not None:
            sys.stderr.write(f"\n--- operator log ---\n{self.log()[-8000:]}\n")
        self.stop()

    def kill(self) -> None:
        """SIGKILL: no cleanup, as when the node dies."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def wait_metrics(self, *lines: str, timeout: float = 30) -> str:
        """``/metrics`` once it holds every one of ``lines``. The operator records a pass's metrics after
        the pass's status, children and Events are written, so what a test saw of those may not be there yet."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.metrics()
            missing = [line for line in lines if line not in text]
            if not missing:
                return text
            if time.monotonic() >= deadline:
                raise AssertionError(f"not on /metrics after {timeout}s: {missing}\n{text[-3000:]}")
            time.sleep(0.2)

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        """The (labels, value) samples of ``name`` on ``/metrics``, parsed by prometheus_client."""
        from prometheus_client.parser import text_string_to_metric_families

        families = text_string_to_metric_families(self.metrics())
        return [(s.labels, s.value) for family in families for s in family.samples if s.name == name]

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=5) as r:
            return json.loads(r.read().decode() or "{}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Cluster:
    """Sync helpers over the ``kubernetes`` client for one namespace."""

    def __init__(self, api: Any, namespace: str, wait_until: Callable[..., Any]):
        from kubernetes import client

        self.api, self.ns, self.wait_until = api, namespace, wait_until
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.net = client.NetworkingV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def d(self, obj: Any) -> Any:
        return self.api.sanitize_for_serialization(obj)

    # --- jobs ---
    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the job at the version its ``apiVersion`` names (both are served)."""
        version = str(body.get("apiVersion", f"{GROUP}/{VERSION}")).rpartition("/")[2]
        return self.custom.create_namespaced_custom_object(GROUP, version, self.ns, PLURAL, body)

    def job(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.rest import ApiException

        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def patch_job(self, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, patch)

    def delete_job(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def status(self, name: str) -> dict[str, Any]:
        return (self.job(name) or {}).get("status") or {}

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status(name).get("conditions", []) if c["type"] == type_), None)

    # The default timeouts below are safety nets: an operator pass, the scheduler and kwok take seconds on a
    # loaded machine against a slow API server; a test that waits on a timer of its own passes a longer one.
    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        return self.wait_until(
            lambda: (s := self.status(name)).get("phase") == phase and s,
            timeout=timeout,
            interval=0.2,
            what=f"{name} phase {phase} (status: {self.status(name)})",
        )

    # --- pods ---
    def pods(self, selector: str = "") -> dict[str, dict[str, Any]]:
        items = self.core.list_namespaced_pod(self.ns, label_selector=selector).items
        return {p.metadata.name: self.d(p) for p in items}

    def trainer_pods(self, job: str) -> dict[str, dict[str, Any]]:
        return self.pods(f"tfps.dev/job-name={job},tfps.dev/replica-type")

    def wait_pods_running(self, job: str, names: list[str], timeout: float = 60) -> dict[str, dict[str, Any]]:
        def ok() -> Any:
            pods = self.trainer_pods(job)
            live = {n: p for n, p in pods.items() if not p["metadata"].get("deletionTimestamp")}
            return (
                live
                if sorted(live) == sorted(names) and all(p["status"].get("phase") == "Running" for p in live.values())
                else None
            )

        return self.wait_until(
            ok, timeout=timeout, interval=0.2, what=f"pods {names} Running (have {sorted(self.trainer_pods(job))})"
        )

    def finish_pod(
        self, name: str, phase: str, exit_code: int, message: str = "", reason: str = "", image_id: str = ""
    ) -> None:
        """Play kubelet: the container ended with ``exit_code`` and wrote ``message`` to its termination log;
        ``image_id``: the image's digest as the node resolved it (``containerStatuses[].imageID``)."""
        pod = self.core.read_namespaced_pod(name, self.ns)
        container = pod.spec.containers[0]
        term = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:05Z",
        }
        if message:
            term["message"] = message
        self.core.patch_namespaced_pod_status(
            name,
            self.ns,
            {
                "status": {
                    "phase": phase,
                    "containerStatuses": [
                        {
                            "name": container.name,
                            "image": container.image,
                            "imageID": image_id,
                            "ready": False,
                            "restartCount": 0,
                            "state": {"terminated": term},
                        }
                    ],
                }
            },
        )

    def children(self, job: str) -> dict[str, str]:
        """uids of the job's live children by ``Kind/name``: claim, Service, NetworkPolicy, trainer pods and
        batch Jobs and Kueue Workloads (export pods left out)."""
        sel = f"tfps.dev/job-name={job}"
        out: dict[str, str] = {}
        for kind, items in (
            ("PersistentVolumeClaim", self.core.list_namespaced_persistent_volume_claim(self.ns, label_selector=sel)),
            ("Service", self.core.list_namespaced_service(self.ns, label_selector=sel)),
            ("NetworkPolicy", self.net.list_namespaced_network_policy(self.ns, label_selector=sel)),
            ("Pod", self.core.list_namespaced_pod(self.ns, label_selector=f"{sel},tfps.dev/replica-type")),
            ("Job", self.batch.list_namespaced_job(self.ns, label_selector=sel)),
        ):
            live = (o for o in items.items if not o.metadata.deletion_timestamp)
            out.update({f"{kind}/{o.metadata.name}": o.metadata.uid for o in live})
        workloads = self.custom.list_namespaced_custom_object(*kueue.API, self.ns, "workloads", label_selector=sel)
        for w in workloads["items"]:
            if not w["metadata"].get("deletionTimestamp"):
                out[f"Workload/{w['metadata']['name']}"] = w["metadata"]["uid"]
        return out

    def events(self, name: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [self.d(e) for e in items]

    def event_reasons(self, name: str) -> set[str]:
        return {e["reason"] for e in self.events(name)}

    def bound_claim(self, name: str = "data") -> str:
        """A PVC bound to a static hostPath PV (no provisioner in hack/cluster); the PV is cluster-scoped."""
        pv = f"{self.ns}-{name}"
        self.core.create_persistent_volume(
            {
                "metadata": {"name": pv, "labels": {"tfps.dev/test": "true"}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "manual",
                    "persistentVolumeReclaimPolicy": "Delete",
                    "hostPath": {"path": f"/tmp/{pv}"},
                    "claimRef": {"namespace": self.ns, "name": name},
                },
            }
        )
        self.core.create_namespaced_persistent_volume_claim(
            self.ns,
            {
                "metadata": {"name": name},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "manual",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        self.wait_until(
            lambda: self.core.read_namespaced_persistent_volume_claim(name, self.ns).status.phase == "Bound",
            timeout=30,
            interval=0.2,
            what=f"PVC {name} Bound",
        )
        return name


KWOK_HANDS_OFF = {"metadata": {"annotations": {"kwok.x-k8s.io/status": "custom"}}}
"""A pod template kwok leaves alone: its status and its deletion are the test's to play."""


def job_body(
    name: str,
    *,
    ps: int = 1,
    workers: int = 2,
    claim: str = "data",
    export: bool = False,
    run_policy: dict[str, Any] | None = None,
    chief_template: dict[str, Any] | None = None,
    export_spec: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    chief: dict[str, Any] = {"replicas": 1}
    if chief_template:
        chief["template"] = chief_template
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "training": {"steps": 10},
            "replicas": {"chief": chief, "ps": {"replicas": ps}, "worker": {"replicas": workers}},
            "storage": {"claimName": claim},
            "export": {"enabled": export, "preflight": False, **(export_spec or {})},
            "runPolicy": run_policy or {},
            **spec,
        },
    }


NODES, CPU_PER_NODE = 2, 3
"""The contended pool (tests/operator/conftest.py ``pool``): two nodes of 3 cpu; a job of
:func:`contended_job` is 4 pods of 1 cpu (chief, ps, 2 workers): one fits, two do not."""
PODS_PER_JOB = 4


def contended_job(name: str, template: dict[str, Any], **run_policy: Any) -> dict[str, Any]:
    body = job_body(name, ps=1, workers=2, run_policy=run_policy)
    for role in ("chief", "ps", "worker"):
        body["spec"]["replicas"][role]["template"] = template
    return body


def bound(kube: Cluster, job: str) -> list[str]:
    return sorted(
        n
        for n, p in kube.trainer_pods(job).items()
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    )
