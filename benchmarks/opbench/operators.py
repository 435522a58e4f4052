"""The two operators as local processes, each with its own kubeconfig identity, loopback listeners only,
and their resource use read from /proc (peak RSS = VmHWM, CPU = utime + stime)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cluster

REPO = cluster.REPO
TFPS_CACHE = Path(os.environ.get("TFPS_CACHE", Path.home() / ".cache" / "tfps"))


def tfps_binary() -> Path:
    """``tfps`` from a venv with the operator's base dependencies only (what operator/Dockerfile
    installs): the dev venv also holds the test tools' ``kubernetes`` client, which Kopf imports
    when present (about 40 MiB the shipped operator does not carry). Built once per
    pyproject.toml + constraints.txt; the operator runs this checkout's sources (PYTHONPATH), not those
    the venv's editable install points at."""
    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes() + (REPO / "constraints.txt").read_bytes()).hexdigest()[
        :12
    ]
    venv = TFPS_CACHE / "operator-venv" / key
    tfps = venv / "bin" / "tfps"
    if not (venv / ".complete").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "-c", str(REPO / "constraints.txt"), "-e", str(REPO)],
            check=True,
        )
        (venv / ".complete").touch()
    return tfps


TFJOB_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # hard-coded in training-operator (pkg/cert)
TFJOB_SECRET = "training-operator-webhook-cert"  # its --webhook-secret-name default
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Variant:
    """One operator configuration of the comparison."""

    key: str  # result key: tfps, tfjob, tfjob-qps
    operator: str  # tfps | tfjob
    label: str
    extra_args: list[str] = field(default_factory=list)


VARIANTS = {
    "tfps": Variant("tfps", "tfps", "tfps-operator (defaults)"),
    "tfjob": Variant("tfjob", "tfjob", "training-operator v1.9.3 (defaults: --kube-api-qps=20 --kube-api-burst=30)"),
    "tfjob-qps": Variant(
        "tfjob-qps",
        "tfjob",
        "training-operator v1.9.3 (--kube-api-qps=1000 --kube-api-burst=2000)",
        ["--kube-api-qps=1000", "--kube-api-burst=2000"],
    ),
}


def proc_stats(pid: int) -> dict[str, float]:
    """Current and peak resident memory (MiB) and CPU seconds of ``pid`` (plus its reaped children)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = {
        line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if line.startswith(("VmRSS", "VmHWM"))
    }
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in stat[11:15])
    return {
        "rss_mib": kb["VmRSS"] / 1024,
        "peak_rss_mib": kb["VmHWM"] / 1024,
        "cpu_s": (utime + stime + cutime + cstime) / CLK_TCK,
    }


class OperatorProc:
    def __init__(self, variant: Variant, namespace: str, kubeconfig: str, log_path: Path, api: Any):
        self.v, self.ns, self.kubeconfig, self.log_path, self.api = variant, namespace, kubeconfig, log_path, api
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_url = ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _argv_env(self) -> tuple[list[str], dict[str, str]]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TFPS_", "KUBERNETES_"))}
        env["KUBECONFIG"] = self.kubeconfig
        if self.v.operator == "tfps":
            health, metrics = free_port(), free_port()
            env.update(
                {"TFPS_BIND_ADDRESS": "127.0.0.1", "TFPS_HEALTH_PORT": str(health), "TFPS_METRICS_PORT": str(metrics)}
            )
            self.health_url = f"http://127.0.0.1:{health}/healthz"
            # This checkout's sources first on the path: the venv's editable install points at the
            # checkout that built it, which may be another one with the same pyproject.toml.
            env["PYTHONPATH"] = os.pathsep.join(str(REPO / d) for d in ("operator", "wire", "trainer_image"))
            return [
                str(tfps_binary()),
                "operator",
                "--kubeconfig",
                self.kubeconfig,
                "--namespace",
                self.ns,
                *self.v.extra_args,
            ], env
        from .tfjob import binary

        probe = free_port()
        env["MY_POD_NAMESPACE"] = self.ns  # where its cert rotator keeps the webhook Secret
        self.health_url = f"http://127.0.0.1:{probe}/readyz"
        return [
            str(binary()),
            "--enable-scheme=tfjob",
            f"--namespace={self.ns}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{probe}",
            f"--webhook-server-port={free_port()}",
            *self.v.extra_args,
        ], env

    def start(self, timeout: float = 120) -> None:
        if self.v.operator == "tfjob":
            self._prepare_tfjob()
        argv, env = self._argv_env()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        mounted = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.v.key} exited {self.proc.returncode}; log {self.log_path}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:]
                )
            if self.v.operator == "tfjob" and not mounted:
                mounted = self._mount_webhook_secret()
            try:
                with urllib.request.urlopen(self.health_url, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.v.key} not ready after {timeout}s; log {self.log_path}")

    # training-operator's cert rotator fills a Secret and waits for the kubelet to mount it as files in
    # its cert dir (then marks itself ready and starts the controllers). Out of cluster, we play kubelet.
    def _prepare_tfjob(self) -> None:
        from kubernetes import client

        shutil.rmtree(TFJOB_CERT_DIR, ignore_errors=True)
        client.CoreV1Api(self.api).create_namespaced_secret(self.ns, {"metadata": {"name": TFJOB_SECRET}})

    def _mount_webhook_secret(self) -> bool:
        from kubernetes import client

        data = client.CoreV1Api(self.api).read_namespaced_secret(TFJOB_SECRET, self.ns).data or {}
        if "tls.crt" not in data or "tls.key" not in data:
            return False
        TFJOB_CERT_DIR.mkdir(parents=True, exist_ok=True)
        for k in ("tls.crt", "tls.key", "ca.crt"):
            if k in data:
                (TFJOB_CERT_DIR / k).write_bytes(base64.b64decode(data[k]))
        return True

    def stats(self) -> dict[str, float]:
        return proc_stats(self.pid)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
