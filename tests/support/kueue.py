"""Kueue objects for the tests (``kueue.x-k8s.io/v1beta2``, served by hack/cluster's Kueue)."""

from __future__ import annotations

from typing import Any

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
API = (GROUP, VERSION)
API_VERSION = f"{GROUP}/{VERSION}"


def resource_flavor(
    name: str, node_labels: dict[str, str] | None = None, tolerations: list[dict[str, Any]] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, namespace: str, flavor: str, cpu: str, **spec: Any) -> dict[str, Any]:
    """A ClusterQueue for ``namespace`` alone with ``cpu`` of quota on ``flavor`` (and memory to spare)."""
    quota = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"}]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": quota}]}
            ],
            **spec,
        },
    }


def local_queue(name: str, cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue_name},
    }
