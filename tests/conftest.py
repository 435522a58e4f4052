"""Shared fixtures for the cluster tier: a real control plane from ``hack/cluster``.

Fixture names are a contract other test modules rely on:

* ``cluster`` (session): brings ``hack/cluster`` up if ``hack/cluster status`` fails; a :class:`Cluster`.
* ``kubeconfig`` (session): the admin kubeconfig path as ``str``.
* ``k8s`` (session): a ``kubernetes.client.ApiClient`` for that kubeconfig.
* ``kubectl`` (session): ``kubectl(*args, input=None, check=True, timeout=60)`` with the cached binary.
* ``namespace`` (function): a fresh namespace ``t-<test>-<rand>`` (``t-<test>-w<N><rand>`` on pytest-xdist
  worker gw<N>), deleted (without waiting) afterwards.
* ``make_namespace`` (function): ``make_namespace(labels=None) -> name`` for extra or labelled namespaces.
* ``wait_until`` (session): ``wait_until(fn, timeout=..., interval=..., what=...)`` polls until ``fn()`` is truthy.

Nothing here is collected unless a test asks for one of these fixtures, so ``-m "not cluster"``
never starts the control plane.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parent.parent
HACK_CLUSTER = REPO / "hack" / "cluster"
T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    """A running hack/cluster control plane."""

    kubeconfig: Path
    server: str
    bin: Path  # kubectl, helm, kwok, etcd, kube-* (symlinks into ~/.cache/tfps)

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses that should talk to this cluster."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against this cluster; raise with stderr on failure if ``check``."""
        cmd = [str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc


def _hack_cluster(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HACK_CLUSTER), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _server_of(kubeconfig: Path) -> str:
    import yaml

    cfg = yaml.safe_load(kubeconfig.read_text())
    return cfg["clusters"][0]["cluster"]["server"]


def poll(fn: Callable[[], T], *, timeout: float = 60, interval: float = 0.5, what: str = "condition") -> T:
    """Call ``fn`` until it returns something truthy; fail the test naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")
        time.sleep(interval)


@contextlib.contextmanager
def _alarm_paused() -> Iterator[None]:
    """Suspend a pending SIGALRM timer (pytest-timeout's signal method) and restore what was left of it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    left, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if left:
            signal.setitimer(signal.ITIMER_REAL, left, interval)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    status = _hack_cluster("status", timeout=60)
    if status.returncode != 0:
        # A cold `up` builds Kubernetes (~20-30 min on 2 cores): longer than pytest-timeout's per-test
        # limit, which also runs during fixture setup. Hold that alarm while `up` runs, then re-arm it.
        with _alarm_paused():
            up = _hack_cluster("up", timeout=3600)
        if up.returncode != 0:
            pytest.fail(
                f"hack/cluster up failed (exit {up.returncode})\n{up.stdout[-4000:]}\n{up.stderr[-4000:]}",
                pytrace=False,
            )
    else:
        # `up` is a no-op on a ready cluster but refreshes the .cluster/bin links.
        _hack_cluster("up", timeout=120)
    state = Path(os.environ.get("TFPS_CLUSTER_DIR") or REPO / ".cluster")  # as hack/cluster resolves it
    kubeconfig = state / "kubeconfig"
    return Cluster(kubeconfig=kubeconfig, server=_server_of(kubeconfig), bin=state / "bin")


@pytest.fixture(scope="session")
def kubeconfig(cluster: Cluster) -> str:
    return str(cluster.kubeconfig)


@pytest.fixture(scope="session")
def k8s(kubeconfig: str) -> Iterator[Any]:
    from kubernetes import config

    api = config.new_client_from_config(config_file=kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="session")
def kubectl(cluster: Cluster) -> Callable[..., subprocess.CompletedProcess[str]]:
    return cluster.kubectl


@pytest.fixture(scope="session")
def wait_until() -> Callable[..., Any]:
    return poll


def _namespace_name(nodeid: str) -> str:
    """``t-<test>-<rand>``; under pytest-xdist ``t-<test>-w<N><rand>``: no two workers make the same name."""
    from support.parallel import worker_tag

    test = re.sub(r"[^a-z0-9]+", "-", nodeid.split("::")[-1].lower()).strip("-")
    test = test.removeprefix("test-")[:40].strip("-") or "x"
    return f"t-{test}-{worker_tag()}{secrets.token_hex(3)}"


@pytest.fixture
def make_namespace(request: pytest.FixtureRequest, k8s: Any) -> Iterator[Callable[..., str]]:
    """Factory: ``make_namespace(labels=None)`` creates a namespace and waits for its default ServiceAccount.

    Pods cannot be created until the controller-manager has made the ``default`` ServiceAccount, so the
    factory waits for it. All namespaces made are deleted at teardown in the background (not awaited).
    """
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(k8s)
    made: list[str] = []

    def make(labels: dict[str, str] | None = None) -> str:
        for attempt in range(3):
            name = _namespace_name(request.node.nodeid)
            meta = client.V1ObjectMeta(name=name, labels={"tfps.dev/test": "true", **(labels or {})})
            try:
                core.create_namespace(client.V1Namespace(metadata=meta))
                break
            except ApiException as e:  # 409: the name is taken (an earlier run's namespace still Terminating)
                if e.status != 409 or attempt == 2:
                    raise
        made.append(name)

        def default_sa() -> bool:
            try:
                core.read_namespaced_service_account("default", name)
                return True
            except ApiException as e:
                if e.status != 404:
                    raise
                return False

        poll(default_sa, timeout=30, interval=0.2, what=f"ServiceAccount default in namespace {name}")
        return name

    yield make
    for name in made:
        try:
            # No kubelet confirms a graceful pod deletion for pods kwok ignores (annotation
            # kwok.x-k8s.io/status=custom); force-delete pods so the namespace cannot hang Terminating.
            core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
            core.delete_namespace(name, propagation_policy="Background", grace_period_seconds=0)
        except ApiException as e:
            if e.status != 404:
                raise


@pytest.fixture
def namespace(make_namespace: Callable[..., str]) -> str:
    return make_namespace()
