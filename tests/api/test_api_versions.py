"""The two served versions on a real kube-apiserver (hack/cluster): v1beta1, stored, and v1alpha1, deprecated,
with the same schema and no conversion webhook (docs/install.md, "API versions").

* Round trip: a job written as either version reads back as the other with the same spec and status, for
  generated jobs (tests/reliability/strategies.py) and for the job that sets every field; v1alpha1 writes
  carry the deprecation warning.
* Storage migration: a job stored while v1alpha1 was the storage version stays so in etcd (read there
  directly) until ``tfps migrate-storage`` rewrites it; then etcd holds it as v1beta1 and the CRD's
  ``status.storedVersions`` is ``[v1beta1]`` alone.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability.strategies import valid_jobs
from support.crd import install_crd
from tfps_operator.api import models as m
from tfps_operator.api.crd import crd

from .full_job import full_job

pytestmark = pytest.mark.cluster

OLD, NEW = "v1alpha1", "v1beta1"
ETCD = f"http://127.0.0.1:{os.environ.get('TFPS_ETCD_PORT', '16379')}"


@pytest.fixture(scope="module")
def objs(k8s: Any, psjob_crd: dict[str, Any]) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(k8s)


def in_etcd(ns: str, name: str) -> dict[str, Any]:
    """The job as etcd holds it (custom resources are stored as JSON)."""
    key = base64.b64encode(f"/registry/{m.GROUP}/{m.PLURAL}/{ns}/{name}".encode()).decode()
    req = urllib.request.Request(f"{ETCD}/v3/kv/range", data=json.dumps({"key": key}).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        (kv,) = json.load(resp)["kvs"]
    return json.loads(base64.b64decode(kv["value"]))


def round_trip(objs: Any, ns: str, body: dict[str, Any], write: str, read: str) -> None:
    body = copy.deepcopy(body)
    body["apiVersion"] = f"{m.GROUP}/{write}"
    body["metadata"] = {"name": body["metadata"]["name"], "namespace": ns}
    status = body.pop("status", None)
    made = objs.create_namespaced_custom_object(m.GROUP, write, ns, m.PLURAL, body, field_validation="Strict")
    name = made["metadata"]["name"]
    try:
        if status:
            objs.patch_namespaced_custom_object_status(m.GROUP, write, ns, m.PLURAL, name, {"status": status})
        written = objs.get_namespaced_custom_object(m.GROUP, write, ns, m.PLURAL, name)
        other = objs.get_namespaced_custom_object(m.GROUP, read, ns, m.PLURAL, name)
        assert other["apiVersion"] == f"{m.GROUP}/{read}"
        assert (other["spec"], other.get("status")) == (written["spec"], written.get("status")), (write, read)
        assert other["metadata"]["uid"] == written["metadata"]["uid"]
    finally:
        objs.delete_namespaced_custom_object(m.GROUP, write, ns, m.PLURAL, name)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job=valid_jobs(), old_first=st.booleans())
def test_a_job_written_as_one_version_reads_the_same_as_the_other(
    objs: Any, api_namespace: str, job: dict[str, Any], old_first: bool
) -> None:
    write, read = (OLD, NEW) if old_first else (NEW, OLD)
    round_trip(objs, api_namespace, job, write, read)


def test_the_job_with_every_field_and_its_status_round_trips_both_ways(objs: Any, api_namespace: str) -> None:
    wire = full_job(name="full-rt").to_wire()
    round_trip(objs, api_namespace, wire, OLD, NEW)
    round_trip(objs, api_namespace, wire, NEW, OLD)


def test_writing_the_deprecated_version_warns(api_namespace: str, kubectl: Any) -> None:
    body = full_job(name="warned").to_wire()
    body.pop("status")
    body["apiVersion"] = f"{m.GROUP}/{OLD}"
    body["metadata"] = {"name": "warned", "namespace": api_namespace}
    out = kubectl("-n", api_namespace, "create", "-f", "-", input=json.dumps(body))
    assert f"{m.GROUP}/{OLD} PSTrainingJob is deprecated; use {m.GROUP}/{NEW}" in out.stderr, out.stderr
    kubectl("-n", api_namespace, "delete", "psjob", "warned", "--wait=false")


# Alone (tests/README.md, "Parallel runs"): it swaps the shared CRD's storage version, and `tfps migrate-storage`
# rewrites every job in every namespace and narrows storedVersions, which other tests' jobs would change under it.
@pytest.mark.serial
def test_migrate_storage_rewrites_what_the_older_storage_version_wrote(
    objs: Any, api_namespace: str, kubeconfig: str
) -> None:
    body = full_job(name="stored-old").to_wire()
    body.pop("status")
    body["metadata"] = {"namespace": api_namespace}
    try:
        install_crd(kubeconfig, manifest=crd(storage=OLD))  # as `tfps crd --storage-version v1alpha1` prints it
        # The API server takes a moment to switch its storage; write until etcd shows the older version.
        for attempt in range(50):
            name = f"stored-old-{attempt}"
            meta = {**body["metadata"], "name": name}
            objs.create_namespaced_custom_object(m.GROUP, NEW, api_namespace, m.PLURAL, {**body, "metadata": meta})
            if in_etcd(api_namespace, name)["apiVersion"] == f"{m.GROUP}/{OLD}":
                break
        else:
            pytest.fail("the API server never stored a job as v1alpha1 after the CRD's storage version changed")
    finally:
        install_crd(kubeconfig)  # the generated CRD again: v1beta1 stored
    from kubernetes import client

    ext = client.ApiextensionsV1Api(objs.api_client)
    assert OLD in ext.read_custom_resource_definition("pstrainingjobs.tfps.dev").status.stored_versions
    before = objs.get_namespaced_custom_object(m.GROUP, NEW, api_namespace, m.PLURAL, name)
    assert in_etcd(api_namespace, name)["apiVersion"] == f"{m.GROUP}/{OLD}"  # reading did not rewrite it

    env = {**os.environ, "KUBECONFIG": kubeconfig}
    tfps = [os.path.join(os.path.dirname(sys.executable), "tfps"), "migrate-storage"]
    out = subprocess.run(tfps, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"-> ['{NEW}']" in out.stdout, out.stdout

    stored = in_etcd(api_namespace, name)
    assert stored["apiVersion"] == f"{m.GROUP}/{NEW}", "tfps migrate-storage left the job stored as v1alpha1"
    after = objs.get_namespaced_custom_object(m.GROUP, NEW, api_namespace, m.PLURAL, name)
    assert after["spec"] == before["spec"] and after["metadata"]["generation"] == before["metadata"]["generation"]
    assert ext.read_custom_resource_definition("pstrainingjobs.tfps.dev").status.stored_versions == [NEW]
