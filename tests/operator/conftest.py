"""Fixtures for the operator tests: the CRD installed, a namespace with a bound claim, the operator running."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_harness import CPU_PER_NODE, NODES, Cluster, OperatorProcess


@pytest.fixture(scope="session")
def crd_installed(kubeconfig: str) -> None:
    from support.crd import install_crd

    install_crd(kubeconfig)


def _with_bound_claim(k8s: Any, namespace: str, wait_until: Callable[..., Any]) -> Iterator[Cluster]:
    """A :class:`Cluster` on ``namespace`` with a bound claim ``data``; its PV is removed afterwards."""
    c = Cluster(k8s, namespace, wait_until)
    c.bound_claim("data")
    yield c
    try:
        c.core.delete_persistent_volume(f"{namespace}-data")
    except Exception:
        pass


@pytest.fixture
def kube(k8s: Any, namespace: str, wait_until: Callable[..., Any], crd_installed: None) -> Iterator[Cluster]:
    yield from _with_bound_claim(k8s, namespace, wait_until)


@pytest.fixture
def restricted_kube(
    make_namespace: Callable[..., str], k8s: Any, wait_until: Callable[..., Any], crd_installed: None
) -> Iterator[Cluster]:
    """A namespace that enforces PodSecurity ``restricted``, with a bound claim ``data``."""
    ns = make_namespace(
        labels={
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        }
    )
    yield from _with_bound_claim(k8s, ns, wait_until)


@pytest.fixture
def start_operator(
    kubeconfig: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., OperatorProcess]]:
    """``start_operator(namespace, **kw)``: a running operator; stopped (and its log shown on failure) at teardown."""
    procs: list[OperatorProcess] = []

    def start(namespace: str, **kw: Any) -> OperatorProcess:
        op = OperatorProcess(kubeconfig, [namespace], tmp_path / f"operator-{len(procs)}.log", **kw)
        procs.append(op)
        return op.start()

    yield start
    for op in procs:
        op.stop()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        for op in procs:
            sys.stderr.write(f"\n--- {op.log_path.name} ---\n{op.log()[-6000:]}\n")


@pytest.fixture
def operator(kube: Cluster, start_operator: Callable[..., OperatorProcess]) -> OperatorProcess:
    return start_operator(kube.ns)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture
def pool(kube: Cluster) -> Iterator[dict[str, Any]]:
    """Kwok nodes of limited capacity, tainted so that only the pods of this test land there; the
    pod template that sends a job's pods there."""
    key = "tfps.dev/test-pool"
    names = [f"{kube.ns}-{i}"[:63] for i in range(NODES)]
    for i, name in enumerate(names):
        kube.core.create_node(
            {
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"type": "kwok", key: kube.ns, "kubernetes.io/hostname": name},
                },
                "spec": {
                    "taints": [{"key": key, "value": kube.ns, "effect": "NoSchedule"}],
                    "podCIDR": f"127.2.{i + 1}.0/24",
                    "podCIDRs": [f"127.2.{i + 1}.0/24"],
                },
                "status": {
                    "allocatable": {"cpu": str(CPU_PER_NODE), "memory": "8Gi", "pods": "20"},
                    "capacity": {"cpu": str(CPU_PER_NODE), "memory": "8Gi", "pods": "20"},
                },
            }
        )

    def ready() -> bool:
        return all(
            any(c.type == "Ready" and c.status == "True" for c in (kube.core.read_node(n).status.conditions or []))
            for n in names
        )

    kube.wait_until(ready, timeout=60, interval=0.5, what=f"pool nodes {names} Ready")
    template = {
        "spec": {
            "nodeSelector": {key: kube.ns},
            "tolerations": [{"key": key, "operator": "Equal", "value": kube.ns, "effect": "NoSchedule"}],
            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
        }
    }
    yield {"template": template, "nodes": names}
    for name in names:
        try:
            kube.core.delete_node(name)
        except Exception:
            pass
