"""Install the generated PSTrainingJob CRD into a real API server, idempotently.

``install_crd(kubeconfig)`` server-side-applies ``crds/pstrainingjobs.tfps.dev.yaml`` (the committed
file, which a unit test keeps equal to ``tfps crd``) with its own field manager, forcing conflicts,
then waits until the CRD is Established and the resource is served. Safe to call from several test
modules and sessions: an unchanged CRD is a no-op apply; a changed one is updated in place. The CRD
is cluster-scoped and never deleted here (deleting it would delete every test's jobs). Several processes
(pytest-xdist workers) may apply it at the same moment: the API server retries an apply over a concurrent
write itself, and a 409 that still reaches us is retried here.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "crds" / "pstrainingjobs.tfps.dev.yaml"
FIELD_MANAGER = "tfps-tests"


def crd_manifest() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))


def install_crd(kubeconfig: str, timeout: float = 60, manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply the CRD (``manifest``, else the committed file) and wait until PSTrainingJobs can be created.
    Returns the stored CRD."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    manifest = manifest or crd_manifest()
    name = manifest["metadata"]["name"]
    api_client = config.new_client_from_config(config_file=kubeconfig)
    try:
        ext = client.ApiextensionsV1Api(api_client)
        for attempt in range(5):
            try:
                ext.patch_custom_resource_definition(  # a dict body is sent as JSON, which is valid YAML
                    name,
                    manifest,
                    field_manager=FIELD_MANAGER,
                    force=True,
                    _content_type="application/apply-patch+yaml",
                )
                break
            except ApiException as e:
                # Several pytest-xdist workers apply it at once: a 409 (a create raced by another's) is retried.
                if e.status != 409 or attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
        group, versions = manifest["spec"]["group"], [v["name"] for v in manifest["spec"]["versions"]]
        plural = manifest["spec"]["names"]["plural"]
        deadline = time.monotonic() + timeout
        while True:
            crd = api_client.sanitize_for_serialization(ext.read_custom_resource_definition(name))
            conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
            if conds.get("Established") == "True" and conds.get("NamesAccepted") == "True":
                try:  # every version served? (discovery can lag Established by a moment)
                    for version in versions:
                        client.CustomObjectsApi(api_client).list_cluster_custom_object(group, version, plural, limit=1)
                    return crd
                except ApiException as e:
                    if e.status != 404:
                        raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established after {timeout}s: conditions {conds}")
            time.sleep(0.2)
    finally:
        api_client.close()
