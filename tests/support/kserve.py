"""KServe's own CRDs (``hack/kserve manifests``: the pinned module's ``config/crd/full``) in a real API server,
for as long as a test needs them: installed by server-side apply, removed after, so the shared cluster has no
KServe API otherwise (and a test can prove what a job does without it)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION, PLURAL = "serving.kserve.io", "v1beta1", "inferenceservices"
FIELD_MANAGER = "tfps-tests"


def manifests_dir() -> Path:
    out = subprocess.run([str(REPO / "hack" / "kserve"), "manifests"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _served(api_client: Any) -> bool:
    """Whether ``/apis/serving.kserve.io/v1beta1`` lists InferenceServices: the discovery the operator reads,
    which answers 404 for some seconds after ``/apis`` already names the group of a new CRD."""
    from kubernetes.client.rest import ApiException

    try:
        resources = client_resources(api_client)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return PLURAL in resources


def client_resources(api_client: Any) -> list[str]:
    """The resources ``/apis/serving.kserve.io/v1beta1`` lists (ApiException 404 while it is not served)."""
    from kubernetes import client

    answer = client.CustomObjectsApi(api_client).get_api_resources(GROUP, VERSION)
    return [r.name for r in answer.resources or []]


def _wait(api_client: Any, served: bool, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _served(api_client) != served:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{GROUP}/{VERSION} still {'not ' if served else ''}served after {timeout}s")
        time.sleep(0.2)


def remove(api_client: Any, timeout: float = 60) -> None:
    """Delete KServe's CRDs (and with them every InferenceService) and wait until the API is gone."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    for path in sorted(manifests_dir().glob("*.yaml")):
        try:
            ext.delete_custom_resource_definition(yaml.safe_load(path.read_text())["metadata"]["name"])
        except ApiException as e:
            if e.status != 404:
                raise
    _wait(api_client, False, timeout)


@contextmanager
def installed(api_client: Any, timeout: float = 60) -> Iterator[None]:
    """KServe's CRDs, established and served, for the ``with`` block."""
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)
    try:
        for path in sorted(manifests_dir().glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            ext.patch_custom_resource_definition(
                crd["metadata"]["name"],
                crd,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type="application/apply-patch+yaml",
            )
        _wait(api_client, True, timeout)
        yield
    finally:
        remove(api_client, timeout)
