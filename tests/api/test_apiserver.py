"""The CRD in a real kube-apiserver (hack/cluster): what it accepts, defaults, rejects and stores.

Unknown fields: the API server *rejects* them when the client asks for strict field validation
(``fieldValidation=Strict``, which ``kubectl apply``/``create`` send by default) and *prunes* them
otherwise (the server's default for raw API clients, with a warning). ``tfps validate`` rejects them.
Both behaviours are tested below.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tfps_operator.api import models as m
from tfps_operator.api.validate import JobValidationError, validate_job

from .cases import INVALID, Case, base_job, server_defaulted_spec
from .full_job import full_job

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
G, V, P = m.GROUP, m.VERSION, m.PLURAL


@pytest.fixture(scope="module")
def objs(k8s: Any, psjob_crd: dict[str, Any]) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(k8s)


def _create(objs: Any, ns: str, body: dict, *, dry_run: bool = False, strict: bool = True) -> dict:
    kw: dict[str, Any] = {}
    if dry_run:
        kw["dry_run"] = "All"
    if strict:
        kw["field_validation"] = "Strict"
    return objs.create_namespaced_custom_object(G, V, ns, P, body, **kw)


def _rejection(call: Any) -> str:
    """Run ``call``; it must fail with 400/422. Returns the server's message (with causes)."""
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as info:
        call()
    assert info.value.status in (400, 422), info.value
    body = json.loads(info.value.body)
    causes = [f"{c.get('field', '')}: {c.get('message', '')}" for c in (body.get("details") or {}).get("causes") or []]
    return "\n".join([body.get("message", ""), *causes])


def _get(objs: Any, ns: str, name: str) -> dict | None:
    from kubernetes.client.rest import ApiException

    try:
        return objs.get_namespaced_custom_object(G, V, ns, P, name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_crd_is_established_and_structural(psjob_crd: dict[str, Any]) -> None:
    conds = {c["type"]: c for c in psjob_crd["status"]["conditions"]}
    assert conds["Established"]["status"] == "True"
    assert "NonStructuralSchema" not in conds or conds["NonStructuralSchema"]["status"] == "False"
    assert psjob_crd["status"]["acceptedNames"]["shortNames"] == ["psjob", "psjobs"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_is_accepted_and_defaulted_like_the_client(objs: Any, api_namespace: str, path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    stored = _create(objs, api_namespace, doc)
    expected = server_defaulted_spec(doc)
    assert stored["spec"] == expected, "server-side defaulting differs from the models' defaults"
    # defaults the example does not set are visible in the stored object
    spec = stored["spec"]
    assert spec["runPolicy"]["cleanPodPolicy"] == "Running"
    assert spec["training"]["port"] == 2222
    assert spec["export"]["onnx"]["opset"] in (17, doc["spec"]["export"].get("onnx", {}).get("opset"))
    assert spec["replicas"]["worker"]["restartPolicy"] in (
        "OnFailure",
        doc["spec"]["replicas"]["worker"].get("restartPolicy"),
    )
    assert spec["storage"]["mountPath"] == "/tfps"


def test_minimal_job_gets_every_default(objs: Any, api_namespace: str) -> None:
    doc = base_job("minimal")
    stored = _create(objs, api_namespace, doc)
    assert stored["spec"] == server_defaulted_spec(doc)
    assert "chief" not in stored["spec"]["replicas"] and "ps" not in stored["spec"]["replicas"]
    assert stored["spec"]["strategy"] == "ParameterServer"
    assert stored["spec"]["replicas"]["evaluator"] == {"replicas": 0, "restartPolicy": "OnFailure", "recreateLimit": 10}
    assert stored["spec"]["storage"]["volumeClaimTemplate"] == {"accessModes": ["ReadWriteMany"], "size": "10Gi"}
    assert stored["spec"]["training"]["checkpoint"] == {"everySteps": 100, "keep": 3}


def test_program_directories_on_the_leads_volume_are_stored_as_the_client_reads_them(
    objs: Any, api_namespace: str
) -> None:
    doc = base_job("own-dirs")
    doc["spec"]["strategy"] = "MultiWorkerMirrored"
    doc["spec"]["model"] = {
        "command": ["python", "keras_mnist.py"],
        "directories": {
            "checkpoints": "/train/checkpoint",
            "savedModel": "/train/saved_model",
            "tensorboard": "/train",
        },
    }
    doc["spec"]["replicas"]["worker"]["template"] = {
        "spec": {
            "volumes": [{"name": "training", "persistentVolumeClaim": {"claimName": "strategy-volume"}}],
            "volumeMounts": [{"name": "training", "mountPath": "/train"}],
        }
    }
    stored = _create(objs, api_namespace, doc)
    assert stored["spec"] == server_defaulted_spec(doc)
    assert stored["spec"]["model"]["directories"]["savedModel"] == "/train/saved_model"


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_invalid_manifest_is_rejected_everywhere(objs: Any, api_namespace: str, case: Case) -> None:
    name = f"bad-{abs(hash(case.id)) % 10**8}" if not case.path.startswith("metadata.name") else None
    body = case.manifest(name) if name else case.manifest()
    dry = _rejection(lambda: _create(objs, api_namespace, body, dry_run=True))
    real = _rejection(lambda: _create(objs, api_namespace, body))
    for msg in (dry, real):
        assert case.path in msg, f"{case.id}: API server message does not name {case.path}:\n{msg}"
    stored_name = (body.get("metadata") or {}).get("name")
    if stored_name and len(stored_name) <= 63:
        assert _get(objs, api_namespace, stored_name) is None
    with pytest.raises(JobValidationError) as info:
        validate_job(body)
    assert case.path in [e.path for e in info.value.errors]


def test_unknown_fields_are_pruned_without_strict_validation(objs: Any, api_namespace: str) -> None:
    doc = base_job("pruned")
    doc["spec"]["foo"] = 1
    doc["spec"]["training"]["learningRate"] = 0.1
    doc["spec"]["model"]["args"] = {"kept": {"free": "form"}}
    stored = _create(objs, api_namespace, doc, strict=False)
    assert "foo" not in stored["spec"] and "learningRate" not in stored["spec"]["training"]
    assert stored["spec"]["model"]["args"] == {"kept": {"free": "form"}}  # free-form is preserved
    validate_job(stored)  # what is stored is valid


def test_kubectl_apply_rejects_unknown_fields(kubectl: Any, api_namespace: str, psjob_crd: Any) -> None:
    doc = base_job("kubectl-unknown")
    doc["metadata"]["namespace"] = api_namespace
    doc["spec"]["training"]["stepz"] = 10
    proc = kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.training.stepz"' in proc.stderr


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        (
            {"storage": {"claimName": "data", "mountPath": "/"}},
            "spec.storage.mountPath",
            "must not be /: the job's volume would hide the container's whole filesystem",
        ),
        (
            {"storage": {"claimName": "data", "mountPath": "/usr/local/tfps"}},
            "spec.storage.mountPath",
            "must not be at, under or above /usr (a system directory of the container): the job's volume would hide it",
        ),
        (
            {"replicas": {"worker": {"template": {"spec": {"volumeMounts": [{"name": "x", "mountPath": "/tmp/x"}]}}}}},
            "spec.replicas.worker.template.spec.volumeMounts",
            "/tmp/x: must not be at or under /tmp (the trainer's scratch space and HOME)",
        ),
        (
            {"replicas": {"ps": {"template": {"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}}}}},
            "spec.replicas.ps.template.spec.volumes",
            "tmp: the operator names its own volumes so (storage, tmp, code, storage-credentials): pick another name",
        ),
    ],
    ids=["storage-root", "storage-system-dir", "template-mount-tmp", "template-volume-tmp"],
)
def test_kubectl_apply_refuses_what_the_operators_pods_rely_on_naming_the_field(
    kubectl: Any, api_namespace: str, psjob_crd: Any, spec: dict[str, Any], field: str, reason: str
) -> None:
    """As a new user meets it: ``kubectl apply`` of a job that takes a path or name the operator's pods rely
    on is refused by the API server, with the field and the reason, and nothing is stored."""
    doc = base_job("reserved")
    doc["metadata"]["namespace"] = api_namespace
    for key, value in spec.items():
        doc["spec"][key] = {**doc["spec"].get(key, {}), **value}
    proc = kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert proc.returncode != 0, proc.stdout
    assert f"{field}: Invalid value: " in proc.stderr and reason in proc.stderr, proc.stderr
    assert kubectl("get", "psjob", "reserved", "-n", api_namespace, check=False).returncode != 0


def _started(objs: Any, ns: str, name: str) -> None:
    objs.patch_namespaced_custom_object_status(
        G, V, ns, P, name, {"status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}
    )


def test_worker_and_ps_counts_resize_a_started_job_and_chief_and_evaluator_counts_do_not(
    objs: Any, api_namespace: str
) -> None:
    """Semantics: a root-level CEL transition rule compares the chief and evaluator counts with oldSelf
    whenever the stored object has status.startTime; worker and ps counts may change (a resize). The
    main resource cannot change status and /status cannot change spec, so only the operator (setting
    startTime) freezes the counts."""
    name = "immutable"
    _create(objs, api_namespace, base_job(name))
    objs.patch_namespaced_custom_object(
        G, V, api_namespace, P, name, {"spec": {"replicas": {"worker": {"replicas": 3}}}}
    )
    _started(objs, api_namespace, name)
    old = _get(objs, api_namespace, name)
    assert old["status"]["startTime"] and old["spec"]["replicas"]["worker"]["replicas"] == 3

    resized = {"spec": {"replicas": {"worker": {"replicas": 4}, "ps": {"replicas": 2}}}}
    objs.patch_namespaced_custom_object(G, V, api_namespace, P, name, resized)
    assert _get(objs, api_namespace, name)["spec"]["replicas"]["ps"]["replicas"] == 2
    patch = {
        "spec": {
            "replicas": {"evaluator": {"replicas": 1}},
            "training": {"checkpoint": {"everySteps": 10}},
        }
    }
    for dry in ("All", None):
        msg = _rejection(
            lambda dry=dry: objs.patch_namespaced_custom_object(
                G, V, api_namespace, P, name, patch, **({"dry_run": dry} if dry else {})
            )
        )
        assert "spec.replicas" in msg and "chief, evaluator, dispatcher and dataWorker counts are immutable" in msg, msg
    new = copy.deepcopy(_get(objs, api_namespace, name))
    new["spec"]["replicas"]["evaluator"] = {"replicas": 1}
    new["spec"]["training"]["checkpoint"] = {"everySteps": 10}
    with pytest.raises(
        JobValidationError, match="spec.replicas: chief, evaluator, dispatcher and dataWorker counts are immutable"
    ):
        validate_job(new, old=_get(objs, api_namespace, name))
    # other fields, and the rest of a replica spec, stay mutable
    objs.patch_namespaced_custom_object(
        G,
        V,
        api_namespace,
        P,
        name,
        {"spec": {"training": {"steps": 900}, "replicas": {"worker": {"restartPolicy": "Never"}}}},
    )
    cur = _get(objs, api_namespace, name)
    cur["spec"]["runPolicy"]["suspend"] = True
    objs.replace_namespaced_custom_object(G, V, api_namespace, P, name, cur)
    assert _get(objs, api_namespace, name)["spec"]["replicas"]["worker"]["replicas"] == 4


def test_the_scale_subresource_sets_the_worker_count_within_max_replicas(objs: Any, api_namespace: str) -> None:
    """kubectl scale and an HPA write /scale: the API server maps it onto spec.replicas.worker.replicas,
    and the CRD's rules still hold (maxReplicas)."""
    name = "scalable"
    job = base_job(name)
    job["spec"]["replicas"]["worker"].update(minReplicas=1, maxReplicas=6)
    _create(objs, api_namespace, job)
    _started(objs, api_namespace, name)
    objs.patch_namespaced_custom_object_scale(G, V, api_namespace, P, name, {"spec": {"replicas": 5}})
    assert _get(objs, api_namespace, name)["spec"]["replicas"]["worker"]["replicas"] == 5
    scale = objs.get_namespaced_custom_object_scale(G, V, api_namespace, P, name)
    assert scale["spec"]["replicas"] == 5
    msg = _rejection(
        lambda: objs.patch_namespaced_custom_object_scale(G, V, api_namespace, P, name, {"spec": {"replicas": 7}})
    )
    assert "spec.replicas.worker.replicas" in msg and "maxReplicas" in msg, msg
    objs.patch_namespaced_custom_object_status(
        G,
        V,
        api_namespace,
        P,
        name,
        {"status": {"clusterSize": {"ps": 1, "worker": 4}, "workerSelector": "tfps.dev/job-name=scalable"}},
    )
    scale = objs.get_namespaced_custom_object_scale(G, V, api_namespace, P, name)
    assert scale["status"] == {"replicas": 4, "selector": "tfps.dev/job-name=scalable"}


def test_status_cannot_be_changed_through_the_main_resource(objs: Any, api_namespace: str) -> None:
    name = "status-guard"
    _create(objs, api_namespace, base_job(name))
    objs.patch_namespaced_custom_object(G, V, api_namespace, P, name, {"status": {"startTime": "2026-01-01T00:00:00Z"}})
    assert (
        "status" not in _get(objs, api_namespace, name) or "startTime" not in _get(objs, api_namespace, name)["status"]
    )
    # so the immutability rule cannot be bypassed by a user clearing startTime in the same update
    _started(objs, api_namespace, name)
    msg = _rejection(
        lambda: objs.patch_namespaced_custom_object(
            G,
            V,
            api_namespace,
            P,
            name,
            {
                "spec": {"replicas": {"evaluator": {"replicas": 1}}, "training": {"checkpoint": {"everySteps": 10}}},
                "status": None,
            },
        )
    )
    assert "immutable" in msg


def test_fully_populated_job_round_trips(objs: Any, api_namespace: str) -> None:
    job = full_job("full", api_namespace)
    wire = job.to_wire()
    _create(objs, api_namespace, {k: v for k, v in wire.items() if k != "status"})
    objs.patch_namespaced_custom_object_status(G, V, api_namespace, P, "full", {"status": wire["status"]})
    back = m.PSTrainingJob.model_validate(_get(objs, api_namespace, "full"))
    assert back.spec == job.spec
    assert back.status == job.status
    assert validate_job(_get(objs, api_namespace, "full")).spec == job.spec


def test_printer_columns_short_names_and_category(objs: Any, kubectl: Any, api_namespace: str) -> None:
    name = "columns"
    _create(objs, api_namespace, base_job(name))
    objs.patch_namespaced_custom_object_status(
        G, V, api_namespace, P, name, {"status": {"phase": "Running", "workers": "2/2", "checkpoint": {"step": 200}}}
    )
    for resource in ("psjob", "psjobs", "pstrainingjobs.tfps.dev", "tfps"):
        out = kubectl("get", resource, "-n", api_namespace, name if resource != "tfps" else "-o=wide").stdout
        assert name in out, (resource, out)
    lines = kubectl("get", "psjob", name, "-n", api_namespace).stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "STEP", "WORKERS", "REASON", "AGE"]
    assert lines[1].split()[:4] == [name, "Running", "200", "2/2"]


def test_kubectl_explain_documents_the_spec(kubectl: Any, wait_until: Any, psjob_crd: Any) -> None:
    def explain() -> str:
        proc = kubectl("explain", "psjob.spec.export", check=False)
        return proc.stdout if proc.returncode == 0 and "formats" in proc.stdout else ""

    out = " ".join(wait_until(explain, timeout=60, interval=1, what="kubectl explain psjob.spec.export").split())
    assert "verified deployable artifacts" in out  # the ExportSpec docstring
    for field in ("enabled", "formats", "tflite", "onnx", "verify", "backoffLimit"):
        assert field in out
    calib = " ".join(kubectl("explain", "psjob.spec.export.tflite.calibrationSamples").stdout.split())
    assert "calibrate int8" in calib
