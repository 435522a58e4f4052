"""The serving handoff on the real API server with KServe's own CRDs (v0.15.2, hack/kserve): the InferenceService
the operator writes is accepted by KServe's schema, names the verified export's version on the claim, is not
owned by the job, and is rolled forward by a newer job's export; a failed verification never produces one;
without KServe the job says so and succeeds. (KServe's controller: test_operator_kserve_controller.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from operator_harness import KWOK_HANDS_OFF, Cluster, job_body
from serving_steps import export_ok, serving_condition, train

from support import kserve
from tfps_wire.export_result import ExportFailed, encode

# Alone (tests/README.md, "Parallel runs"): they install and remove KServe's cluster-scoped CRDs (and with them
# every InferenceService), which the other KServe tests need there or gone.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240), pytest.mark.serial]


def _served_job(job: str, **serving: Any) -> dict[str, Any]:
    return job_body(job, export=True, chief_template=KWOK_HANDS_OFF, serving=serving or {"runtime": "tensorflow"})


def _isvc(kube: Cluster, name: str) -> dict[str, Any] | None:
    from kubernetes.client.rest import ApiException

    try:
        return kube.custom.get_namespaced_custom_object(kserve.GROUP, kserve.VERSION, kube.ns, kserve.PLURAL, name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_without_kserve_the_job_succeeds_and_says_it_is_not_served(kube, k8s, operator):
    kserve.remove(k8s)  # a leftover of an interrupted run
    kube.create_job(_served_job("j"))
    kube.finish_pod(train(kube, "j"), "Succeeded", 0, export_ok(10, "savedmodel"))
    kube.wait_phase("j", "Succeeded")
    cond = serving_condition(kube, "j", "KServeNotInstalled")
    assert cond["status"] == "False" and "exports/10" in cond["message"]
    kube.wait_until(lambda: "NotServed" in kube.event_reasons("j"), timeout=10, what="NotServed event")


def test_a_verified_export_is_served_and_a_newer_one_rolls_it_forward(kube, k8s, operator):
    with kserve.installed(k8s):
        kube.create_job(_served_job("j", name="ranker", minReplicas=1, maxReplicas=2))
        kube.finish_pod(train(kube, "j"), "Succeeded", 0, export_ok(10, "savedmodel"))
        kube.wait_phase("j", "Succeeded")
        cond = serving_condition(kube, "j", "InferenceServiceApplied")
        isvc = _isvc(kube, "ranker")
        assert isvc is not None  # KServe's own schema accepted it
        uri = f"pvc://data/{kube.ns}/j/exports/10/kserve/tensorflow"
        assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"
        assert "ownerReferences" not in isvc["metadata"]  # outlives the job
        assert isvc["spec"]["predictor"]["model"]["storageUri"] == uri
        assert isvc["spec"]["predictor"]["model"]["modelFormat"]["name"] == "tensorflow"
        assert (isvc["spec"]["predictor"]["minReplicas"], isvc["spec"]["predictor"]["maxReplicas"]) == (1, 2)
        assert cond["status"] == "True" and uri in cond["message"]
        assert kube.status("j")["serving"] == {
            "inferenceService": "ranker",
            "runtime": "tensorflow",
            "storageUri": uri,
            "step": 10,
        }
        kube.wait_until(lambda: "Served" in kube.event_reasons("j"), timeout=10, what="Served event")

        # a retrained model: another job naming the same InferenceService rolls it forward to its version
        kube.create_job(_served_job("k", name="ranker"))
        kube.finish_pod(train(kube, "k"), "Succeeded", 0, export_ok(20, "savedmodel"))
        serving_condition(kube, "k", "InferenceServiceApplied")
        isvc = _isvc(kube, "ranker")
        assert isvc is not None
        assert (
            isvc["spec"]["predictor"]["model"]["storageUri"] == f"pvc://data/{kube.ns}/k/exports/20/kserve/tensorflow"
        )
        assert isvc["metadata"]["annotations"]["tfps.dev/job"] == "k"
        # the older job sees it superseded at its next pass and never rolls it back
        serving_condition(kube, "j", "Superseded", timeout=30)
        assert _isvc(kube, "ranker")["metadata"]["annotations"]["tfps.dev/job"] == "k"  # type: ignore[index]

        # deleting the training job leaves the model served
        kube.delete_job("k")
        kube.wait_until(lambda: kube.job("k") is None, timeout=20, what="job k deleted")
        assert _isvc(kube, "ranker") is not None


def test_a_failed_verification_never_reaches_kserve(kube, k8s, operator):
    with kserve.installed(k8s):
        kube.create_job(
            job_body(
                "j",
                export=True,
                chief_template=KWOK_HANDS_OFF,
                export_spec={"backoffLimit": 0},
                serving={"runtime": "tensorflow"},
            )
        )
        refusal = ExportFailed(reason="VerificationFailed", message="savedmodel: max abs error 7e10 > tolerance 1e-05")
        kube.finish_pod(train(kube, "j"), "Failed", 7, encode(refusal))
        kube.wait_phase("j", "Failed", timeout=40)
        cond = serving_condition(kube, "j", "ExportNotVerified")
        assert "7e10" in cond["message"]
        kube.wait_until(lambda: "NotServed" in kube.event_reasons("j"), timeout=10, what="NotServed event")
        assert _isvc(kube, "j") is None
