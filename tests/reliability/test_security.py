"""Least privilege of what the operator builds, on every job shape the API accepts (hypothesis):

* the NetworkPolicy selects exactly the job's pods (trainer and export pods; not another job's, not
  the operator's) and opens exactly the gRPC port to them and the progress port to the operator;
* no pod carries an API token (automountServiceAccountToken false, no projected token volume);
* the pods pass PodSecurity ``restricted``: asserted by the real API server (server-side dry-run of
  the built trainer pods and export Job in a namespace enforcing ``restricted``).

Operator-created pods in a real cluster are checked too: tests/operator (restricted namespace) and
the soak's audit (every pod created during the soak: no token, restricted namespace).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings

from tfps_operator.api.validate import validate_job
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.netpol import network_policy
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.settings import OPERATOR_POD_LABELS, BuildConfig

from .strategies import any_resources, valid_jobs

CFG = BuildConfig(
    default_image="tfps-trainer:test", operator_namespace_labels={"kubernetes.io/metadata.name": "tfps-system"}
)
COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
}
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) == {"matchLabels"}, selector  # only matchLabels is used: nothing to misread
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _pods(body: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    job = validate_job(body, rules=False)
    pods = list(desired_pods(job, CFG).values())
    tpl = export_job(job, CFG)["spec"]["template"]
    return job, pods + [{"metadata": tpl["metadata"], "spec": tpl["spec"]}]


@given(valid_jobs(), valid_jobs())
@settings(max_examples=200, **COMMON)
def test_network_policy_selects_exactly_the_jobs_pods_and_ports(
    body: dict[str, Any], other_body: dict[str, Any]
) -> None:
    name = body["metadata"]["name"]
    if other_body["metadata"]["name"] == name:  # another job: any other valid name
        other_body["metadata"]["name"] = name[:46] + ("-yy" if name.endswith("-zz") else "-zz")
    job, pods = _pods(body)
    _, others = _pods(other_body)
    np = network_policy(job, CFG)
    spec = np["spec"]
    for pod in pods:
        assert selects(spec["podSelector"], pod["metadata"]["labels"]), f"{pod['metadata'].get('name')} not protected"
    for pod in others:
        assert not selects(spec["podSelector"], pod["metadata"]["labels"]), "another job's pod is selected"
    assert not selects(spec["podSelector"], OPERATOR_POD_LABELS)
    assert spec["policyTypes"] == ["Ingress"]
    grpc, progress = spec["ingress"]
    assert grpc["ports"] == [{"protocol": "TCP", "port": job.spec.training.port}]
    assert grpc["from"] == [{"podSelector": spec["podSelector"]}], "gRPC (no authentication) is open to the job only"
    assert progress["ports"] == [{"protocol": "TCP", "port": CFG.progress_port}]
    assert progress["from"] == [
        {
            "namespaceSelector": {"matchLabels": dict(CFG.operator_namespace_labels)},
            "podSelector": {"matchLabels": dict(CFG.operator_pod_labels)},
        }
    ]
    opened = {job.spec.training.port, CFG.progress_port}
    for pod in pods:
        for c in pod["spec"]["containers"]:
            assert {p["containerPort"] for p in c.get("ports", [])} <= opened, (
                "a listening port the policy does not cover"
            )


@given(valid_jobs())
@settings(max_examples=200, **COMMON)
def test_no_pod_carries_an_api_token(body: dict[str, Any]) -> None:
    _, pods = _pods(body)
    for pod in pods:
        spec = pod["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert "serviceAccountName" not in spec and "serviceAccount" not in spec
        for v in spec["volumes"]:
            assert not any("serviceAccountToken" in s for s in (v.get("projected") or {}).get("sources", []))
        for c in spec["containers"]:
            assert not [m for m in c["volumeMounts"] if m["mountPath"].startswith(TOKEN_PATH)]
            assert not [e for e in c["env"] if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]]


@pytest.mark.cluster
@given(body=valid_jobs())
@settings(max_examples=12, **COMMON)
def test_the_api_server_admits_every_built_pod_under_podsecurity_restricted(
    body: dict[str, Any], kubectl: Any, restricted_namespace: str
) -> None:
    import json

    body["metadata"]["namespace"] = restricted_namespace
    job = validate_job(body, rules=False)
    ej = export_job(job, CFG)
    tpl = ej["spec"]["template"]
    # The export Job's pods are made by the Job controller: admit its template as a pod too.
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "export-probe", **tpl["metadata"]},
        "spec": tpl["spec"],
    }
    items = [*desired_pods(job, CFG).values(), ej, probe]
    # kubectl sends the manifests as they are (int quantities included, as the operator does); the
    # sync Python client would refuse some client-side. PodSecurity answers dry-run requests too.
    out = kubectl(
        "create",
        "--dry-run=server",
        "-n",
        restricted_namespace,
        "-o",
        "name",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        check=False,
    )
    assert out.returncode == 0, f"refused: {out.stderr}"
    assert len(out.stdout.split()) == len(items)


def test_extended_resource_requests_without_limits_are_refused_by_the_api() -> None:
    """Resources that Kubernetes refuses in a Pod are refused by the API: accepted, the job could never
    create its pods."""
    from tfps_operator.api.validate import JobValidationError

    body = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "gpu"},
        "spec": {
            "model": {"module": "m"},
            "training": {"steps": 10},
            "replicas": {"worker": {"replicas": 1, "resources": {"requests": {"nvidia.com/gpu": 1}}}},
        },
    }
    with pytest.raises(JobValidationError, match="nvidia.com/gpu"):
        validate_job(body)
    body["spec"]["replicas"]["worker"]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
    with pytest.raises(JobValidationError, match="nvidia.com/gpu"):
        validate_job(body)
    body["spec"]["replicas"]["worker"]["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}
    with pytest.raises(JobValidationError, match="cpu"):
        validate_job(body)


def _whole_number_only(errors: list[Any], resources: dict[str, Any]) -> bool:
    """The one place the API is knowingly stricter than Pod validation: an extended resource (or a
    hugepages limit) must be written as a whole number (CEL ``isInteger``), so ``1000m`` or ``1.0``
    GPUs are refused though their value is whole. True when every error is that case."""
    from tfps_operator.api.quantity import parse

    def whole_value_written_otherwise(e: Any) -> bool:
        key = e.message.split(":", 1)[0]
        value = (resources.get("limits") or {}).get(key)
        if "whole number" not in e.message or value is None:
            return False
        q = parse(str(value))
        if key.startswith("hugepages-"):
            return (q.value / parse(key[len("hugepages-") :]).value).denominator == 1
        return q.value.denominator == 1

    return bool(errors) and all(whole_value_written_otherwise(e) for e in errors)


@pytest.mark.cluster
@given(resources=any_resources())
@settings(max_examples=40, **COMMON)
def test_the_api_accepts_only_resources_a_pod_can_have(
    resources: dict[str, Any], kubectl: Any, psjob_crd: Any, restricted_namespace: str
) -> None:
    """Three verdicts on random resources (requests without limits, above, below or equal to them in
    other notations, fractional GPUs, hugepages, unknown names): ``validate_job``, the API server on the
    PSTrainingJob (CRD schema + CEL, dry-run) and the API server on the Pod the operator builds from it
    (dry-run). The first two agree; a job accepted has a Pod the API server admits."""
    import json

    from tfps_operator.api.validate import JobValidationError

    body = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "res", "namespace": restricted_namespace},
        "spec": {
            "model": {"module": "m"},
            "training": {"steps": 10},
            "replicas": {"worker": {"replicas": 1, "resources": resources}},
        },
    }
    try:
        validate_job(body)
        client_errors: list[Any] = []
    except JobValidationError as e:
        client_errors = e.errors
    job_out = kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(body), check=False)
    assert (job_out.returncode == 0) == (not client_errors), (
        f"API server and tfps validate disagree on {resources}: server {job_out.stderr.strip() or 'accepted'};"
        f" client {client_errors}"
    )
    for err in client_errors:
        assert err.path in job_out.stderr, f"{err} not named by the server: {job_out.stderr}"
    built = {**body, "metadata": {**body["metadata"], "uid": "5e1f0000-0000-4000-8000-00000000beef"}}
    pod = desired_pods(validate_job(built, rules=False), CFG)["res-worker-0"]
    pod_out = kubectl(
        "create",
        "--dry-run=server",
        "-n",
        restricted_namespace,
        "-o",
        "name",
        "-f",
        "-",
        input=json.dumps(pod),
        check=False,
    )
    event("job accepted" if not client_errors else "job refused")
    if not client_errors:
        assert pod_out.returncode == 0, f"the job is accepted but its pod is not: {pod_out.stderr}"
    elif pod_out.returncode == 0:
        assert _whole_number_only(client_errors, resources), (
            f"a pod Kubernetes admits, refused by the API: {client_errors}"
        )
        event("stricter: whole numbers")


@pytest.fixture(scope="module")
def psjob_crd(kubeconfig: str) -> str:
    from support.crd import install_crd

    return install_crd(kubeconfig)["metadata"]["name"]  # not the CRD: hypothesis prints fixture values


@pytest.fixture(scope="module")
def restricted_namespace(k8s: Any) -> Any:
    import secrets

    from kubernetes import client

    from support.parallel import worker_tag

    core = client.CoreV1Api(k8s)
    name = f"t-restricted-{worker_tag()}{secrets.token_hex(3)}"
    core.create_namespace(
        {
            "metadata": {
                "name": name,
                "labels": {
                    "tfps.dev/test": "true",
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            }
        }
    )
    import time

    deadline = time.monotonic() + 30
    while not core.list_namespaced_service_account(name, field_selector="metadata.name=default").items:
        assert time.monotonic() < deadline, "no default ServiceAccount"
        time.sleep(0.2)
    yield name
    core.delete_namespace(name)
