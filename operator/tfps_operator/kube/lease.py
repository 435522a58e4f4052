"""The leader Lease's requests: read it, create it, replace it guarded by its resourceVersion. Never behind
the write gate (these are how a replica learns whether it may write)."""

from __future__ import annotations

from typing import Any

from .client import Kube, _path


async def read(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return await kube.get("Lease", namespace, name)


async def create(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Raises ApiError 409 when another replica created it first."""
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec}
    out: dict[str, Any] = await kube.request(
        "POST",
        _path("Lease", namespace),
        what=f"Lease/{name}",
        body=body,
        query=[("fieldManager", kube.field_manager)],
        gated=False,
    )
    return out


async def replace(kube: Kube, lease: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """PUT ``lease`` with ``spec``; its ``metadata.resourceVersion`` makes this fail (409) when another
    replica wrote the lease since it was read."""
    meta = lease["metadata"]
    body = {**lease, "spec": spec}
    out: dict[str, Any] = await kube.request(
        "PUT",
        _path("Lease", meta["namespace"], meta["name"]),
        what=f"Lease/{meta['name']}",
        body=body,
        query=[("fieldManager", kube.field_manager)],
        gated=False,
    )
    return out
