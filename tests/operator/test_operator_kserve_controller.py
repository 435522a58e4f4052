"""The serving handoff through KServe's own controller (v0.15.2's manager, built by ``hack/kserve build`` and run
by ``hack/kserve up`` against hack/cluster, with its webhooks, the inferenceservice-config ConfigMap in
RawDeployment mode and its TensorFlow Serving and Triton ClusterServingRuntimes): a verified export becomes a
predictor Deployment whose model mount and runtime arguments name that export's version, a newer export rolls
it forward, a failed verification never produces one.

Runs only where the manager is already built (``hack/kserve built``): the cold build takes 7-12 minutes on 2 cores,
more than the CI budget, like the real-node tier's builds (.ci/run)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from operator_harness import KWOK_HANDS_OFF, REPO, Cluster, job_body
from serving_steps import export_ok, serving_condition, train

from tfps_wire.export_result import ExportFailed, encode

# Alone (tests/README.md, "Parallel runs"): `hack/kserve up` and `down` (a module fixture) install and remove
# KServe's CRDs, webhooks and controller, which the other KServe tests need there or gone.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300), pytest.mark.serial]

HACK_KSERVE = str(REPO / "hack" / "kserve")
ISVC_LABEL = "serving.kserve.io/inferenceservice"
SOURCE_URI = "internal.serving.kserve.io/storage-initializer-sourceuri"


@pytest.fixture(scope="module")
def kserve_controller(k8s: Any) -> Iterator[None]:
    if subprocess.run([HACK_KSERVE, "built"], check=False).returncode != 0:
        pytest.skip(
            "KServe's manager is not built on this machine (`hack/kserve build`: 7-12 minutes cold, "
            "outside the CI budget; .ci/run runs this module only where it is cached)"
        )
    subprocess.run([HACK_KSERVE, "up"], check=True)
    try:
        yield
    finally:
        subprocess.run([HACK_KSERVE, "down"], check=True)


def _deployment(kube: Cluster, name: str) -> Any:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        return client.AppsV1Api(kube.api).read_namespaced_deployment(name, kube.ns)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def _predictor(kube: Cluster, isvc: str, uri: str, timeout: float = 60) -> Any:
    """The predictor Deployment KServe's controller made, once its pod template names ``uri``."""
    return kube.wait_until(
        lambda: (
            (d := _deployment(kube, f"{isvc}-predictor")) is not None
            and (d.spec.template.metadata.annotations or {}).get(SOURCE_URI) == uri
            and d
        ),
        timeout=timeout,
        interval=0.5,
        what=f"{isvc}-predictor naming {uri}",
    )


def _container(pod_spec: Any, name: str = "kserve-container") -> Any:
    return next(c for c in pod_spec.containers if c.name == name)


def _model_mount(pod: Any) -> tuple[str, str] | None:
    """(claim, path in it) that KServe's pod mutator mounts read-only at /mnt/models: KServe's default config
    (``enableDirectPvcVolumeMount: true``) mounts a ``pvc://`` URI's claim with the path as ``subPath``."""
    mount = next((m for m in _container(pod.spec).volume_mounts or [] if m.mount_path == "/mnt/models"), None)
    if mount is None:
        return None
    volume = next(v for v in pod.spec.volumes if v.name == mount.name)
    assert mount.read_only and volume.persistent_volume_claim is not None, (mount, volume)
    return volume.persistent_volume_claim.claim_name, mount.sub_path


def _predictor_pod_mount(kube: Cluster, isvc: str, path: str, timeout: float = 60) -> Any:
    """A predictor pod (created by the ReplicaSet, through KServe's pod mutator) that mounts ``path``."""
    return kube.wait_until(
        lambda: next(
            (
                p
                for p in kube.core.list_namespaced_pod(kube.ns, label_selector=f"{ISVC_LABEL}={isvc}").items
                if _model_mount(p) == ("data", path)
            ),
            None,
        ),
        timeout=timeout,
        interval=0.5,
        what=f"a {isvc} predictor pod mounting data/{path}",
    )


def test_a_verified_savedmodel_becomes_a_tf_serving_predictor_and_a_newer_one_rolls_it_forward(
    kube, kserve_controller, operator
):
    kube.create_job(job_body("j", export=True, chief_template=KWOK_HANDS_OFF, serving={"name": "ranker"}))
    kube.finish_pod(train(kube, "j"), "Succeeded", 0, export_ok(10, "savedmodel"))
    serving_condition(kube, "j", "InferenceServiceApplied")
    path = f"{kube.ns}/j/exports/10/kserve/tensorflow"
    dep = _predictor(kube, "ranker", f"pvc://data/{path}")
    main = _container(dep.spec.template.spec)
    # KServe picked its TensorFlow Serving runtime: the base path holds the version directories
    assert main.image == "tensorflow/serving:2.6.2"
    assert "--model_base_path=/mnt/models" in main.args and "--model_name=ranker" in main.args
    assert dep.spec.template.metadata.labels[ISVC_LABEL] == "ranker"
    assert not any(k.startswith("tfps.dev/") for k in dep.spec.template.metadata.labels)
    _predictor_pod_mount(kube, "ranker", path)

    # a newer export of another job rolls the predictor forward to its version
    kube.create_job(job_body("k", export=True, chief_template=KWOK_HANDS_OFF, serving={"name": "ranker"}))
    kube.finish_pod(train(kube, "k"), "Succeeded", 0, export_ok(20, "savedmodel"))
    serving_condition(kube, "k", "InferenceServiceApplied")
    path = f"{kube.ns}/k/exports/20/kserve/tensorflow"
    dep = _predictor(kube, "ranker", f"pvc://data/{path}")
    assert "--model_base_path=/mnt/models" in _container(dep.spec.template.spec).args
    _predictor_pod_mount(kube, "ranker", path)


def test_a_verified_onnx_export_becomes_a_triton_predictor(kube, kserve_controller, operator):
    kube.create_job(
        job_body(
            "o",
            export=True,
            chief_template=KWOK_HANDS_OFF,
            export_spec={"formats": ["savedmodel", "onnx"], "required": ["savedmodel", "onnx"]},
            serving={"runtime": "onnx", "name": "ranker-onnx"},
        )
    )
    kube.finish_pod(train(kube, "o"), "Succeeded", 0, export_ok(30, "savedmodel", "onnx"))
    serving_condition(kube, "o", "InferenceServiceApplied")
    path = f"{kube.ns}/o/exports/30/kserve/triton"
    dep = _predictor(kube, "ranker-onnx", f"pvc://data/{path}")
    main = _container(dep.spec.template.spec)
    assert main.image == "nvcr.io/nvidia/tritonserver:23.05-py3"
    assert "--model-store=/mnt/models" in main.args
    _predictor_pod_mount(kube, "ranker-onnx", path)


def test_a_failed_verification_never_produces_a_predictor(kube, kserve_controller, operator):
    kube.create_job(
        job_body(
            "f",
            export=True,
            chief_template=KWOK_HANDS_OFF,
            export_spec={"backoffLimit": 0},
            serving={"name": "refused"},
        )
    )
    refusal = ExportFailed(reason="VerificationFailed", message="savedmodel: max abs error 7e10 > tolerance 1e-05")
    kube.finish_pod(train(kube, "f"), "Failed", 7, encode(refusal))
    kube.wait_phase("f", "Failed", timeout=40)
    serving_condition(kube, "f", "ExportNotVerified")
    # KServe's controller runs (the other tests see it reconcile): nothing reaches it
    assert (
        kube.custom.list_namespaced_custom_object("serving.kserve.io", "v1beta1", kube.ns, "inferenceservices")["items"]
        == []
    )
    assert _deployment(kube, "refused-predictor") is None
    assert kube.core.list_namespaced_pod(kube.ns, label_selector=f"{ISVC_LABEL}=refused").items == []
