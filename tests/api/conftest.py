"""Fixtures of the API tests: the CRD installed once per session, and one namespace per module."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def psjob_crd(kubeconfig: str) -> dict[str, Any]:
    """The PSTrainingJob CRD, server-side applied (idempotent; never deleted: it is cluster-scoped
    and other test modules may hold jobs)."""
    from support.crd import install_crd

    return install_crd(kubeconfig)


@pytest.fixture(scope="module")
def api_namespace(k8s: Any, psjob_crd: dict[str, Any]) -> Iterator[str]:
    """A namespace for one module's jobs (no pods run here, so no need to wait for a ServiceAccount)."""
    from kubernetes import client

    from support.parallel import worker_tag

    core = client.CoreV1Api(k8s)
    name = f"t-api-{worker_tag()}{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"tfps.dev/test": "true"})))
    yield name
    core.delete_namespace(name, propagation_policy="Background", grace_period_seconds=0)
