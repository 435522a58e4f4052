"""The serving handoff's decisions (reconcile/serving.py): an InferenceService only for a complete, verified
export, in the runtime's layout, not owned by the job; rolled forward by a newer export, never back; a failed
verification, a missing KServe or a foreign InferenceService said in condition Serving and one Event."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from support.operator_helpers import CFG, T0, later, make_job, observed, status
from tfps_operator.manifests import inference_service as isvc_m
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.reconcile.observed import InferenceServiceObs, ServingObs, inference_service_obs
from tfps_operator.reconcile.plan import ApplyInferenceService

CLAIM = {"claimName": "models"}
EXPORT = {
    "jobName": "mnist-export",
    "step": 100,
    "path": "exports/100",
    "artifacts": [
        {"format": "savedmodel", "path": "exports/100/savedmodel", "sha256": "a" * 64},
        {"format": "onnx", "path": "exports/100/model.onnx", "sha256": "b" * 64},
    ],
}
DONE = later(600)


def _job(job_name: str = "mnist", **serving: Any):
    return make_job(job_name, storage=CLAIM, serving=serving or {"runtime": "tensorflow"})


def _succeeded(**extra: Any):
    fields = {"phase": "Succeeded", "startTime": T0.isoformat(), "completionTime": DONE.isoformat(), "export": EXPORT}
    return status(**{**fields, **extra})


def _pass(job, st, serving: ServingObs | None, at=None):
    obs = replace(observed(job, []), serving=serving)
    return reconcile(job, st, obs, at or later(700), CFG)


def _applies(plan) -> list[ApplyInferenceService]:
    return [a for a in plan.actions if isinstance(a, ApplyInferenceService)]


def _as_stored(manifest: dict[str, Any], rv: str = "7", **status_: Any) -> InferenceServiceObs:
    """The InferenceService as the API server returns what the operator wrote (KServe may add to it)."""
    return inference_service_obs({**manifest, "metadata": {**manifest["metadata"], "resourceVersion": rv}, **status_})


def test_a_verified_export_creates_an_unowned_raw_deployment_naming_its_version_on_the_claim():
    job = _job()
    plan = _pass(job, _succeeded(), ServingObs(installed=True))
    (apply,) = _applies(plan)
    m = apply.manifest
    assert apply.resource_version is None  # a create
    assert (m["apiVersion"], m["kind"], m["metadata"]["name"]) == (
        "serving.kserve.io/v1beta1",
        "InferenceService",
        "mnist",
    )
    assert m["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"
    assert "ownerReferences" not in m["metadata"] and "labels" not in m["metadata"]  # outlives the job
    model = m["spec"]["predictor"]["model"]
    assert model == {
        "modelFormat": {"name": "tensorflow"},
        "storageUri": "pvc://models/team-a/mnist/exports/100/kserve/tensorflow",
    }
    assert plan.status.serving.storage_uri == model["storageUri"] and plan.status.serving.step == 100
    cond = C.get(plan.status, C.SERVING)
    assert (cond.status, cond.reason) == ("False", "Applying")


def test_once_kserve_holds_it_the_job_says_served_with_one_event():
    job = _job()
    (apply,) = _applies(_pass(job, _succeeded(), ServingObs(installed=True)))
    stored = _as_stored(
        apply.manifest, status={"url": "http://mnist.team-a", "conditions": [{"type": "Ready", "status": "True"}]}
    )
    plan = _pass(job, _succeeded(), ServingObs(installed=True, isvc=stored))
    assert not _applies(plan)
    cond = C.get(plan.status, C.SERVING)
    assert (cond.status, cond.reason) == ("True", "InferenceServiceApplied")
    assert "step 100" in cond.message and "Ready=True" in cond.message and "http://mnist.team-a" in cond.message
    assert [e.reason for e in plan.events] == ["Served"]
    again = _pass(job, plan.status, ServingObs(installed=True, isvc=stored))
    assert not again.events and not _applies(again)


def test_onnx_on_object_storage_names_the_triton_repository_of_its_version():
    job = make_job(
        storage={"uri": "gs://bucket/prefix"},
        serving={
            "runtime": "onnx",
            "name": "ranker",
            "minReplicas": 2,
            "maxReplicas": 4,
            "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
            "serviceAccountName": "reader",
        },
    )
    (apply,) = _applies(_pass(job, _succeeded(), ServingObs(installed=True)))
    p = apply.manifest["spec"]["predictor"]
    assert apply.manifest["metadata"]["name"] == "ranker"
    assert p["model"]["storageUri"] == "gs://bucket/prefix/team-a/mnist/exports/100/kserve/triton"
    assert p["model"]["modelFormat"] == {"name": "onnx"}
    assert p["model"]["protocolVersion"] == "v2"  # Triton serves v2 alone: KServe picks no runtime for v1
    assert (p["minReplicas"], p["maxReplicas"], p["serviceAccountName"]) == (2, 4, "reader")
    assert p["model"]["resources"] == {"limits": {"cpu": "2", "memory": "4Gi"}}


def test_a_failed_verification_never_reaches_kserve_and_says_so_once():
    job = _job()
    st = status(
        phase="Failed",
        reason="ExportFailed",
        completionTime=DONE.isoformat(),
        conditions=[
            {
                "type": "Failed",
                "status": "True",
                "reason": "ExportFailed",
                "message": "VerificationFailed: savedmodel off by 7e10",
            }
        ],
    )
    plan = _pass(job, st, ServingObs(installed=True))
    assert not _applies(plan)
    cond = C.get(plan.status, C.SERVING)
    assert (cond.status, cond.reason) == ("False", "ExportNotVerified") and "off by 7e10" in cond.message
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "NotServed")]
    assert not _pass(job, plan.status, ServingObs(installed=True)).events


def test_the_runtimes_format_failed_is_not_served_even_when_the_job_succeeded():
    job = _job(runtime="onnx")
    export = {
        **EXPORT,
        "artifacts": EXPORT["artifacts"][:1],
        "failed": [{"format": "onnx", "reason": "VerificationFailed", "message": "onnx output off by 3"}],
    }
    plan = _pass(job, _succeeded(export=export), ServingObs(installed=True))
    assert not _applies(plan)
    cond = C.get(plan.status, C.SERVING)
    assert cond.reason == "ExportNotVerified" and "off by 3" in cond.message


def test_without_kserve_the_job_says_so_and_nothing_is_applied():
    plan = _pass(_job(), _succeeded(), ServingObs(installed=False))
    assert not _applies(plan)
    cond = C.get(plan.status, C.SERVING)
    assert cond.reason == "KServeNotInstalled" and "exports/100" in cond.message
    assert [e.reason for e in plan.events] == ["NotServed"]
    assert plan.status.phase == "Succeeded"


def test_not_looked_up_decides_nothing():
    plan = _pass(_job(), _succeeded(), None)
    assert not _applies(plan) and C.get(plan.status, C.SERVING) is None


def test_a_newer_export_rolls_forward_and_an_older_never_rolls_back():
    old_job, new_job = _job("retrain-1", name="ranker"), _job("retrain-2", name="ranker")
    (first,) = _applies(_pass(old_job, _succeeded(), ServingObs(installed=True)))
    served_old = _as_stored(first.manifest)
    newer = _succeeded(completionTime=later(900).isoformat(), export={**EXPORT, "step": 200, "path": "exports/200"})
    plan = _pass(new_job, newer, ServingObs(installed=True, isvc=served_old), at=later(950))
    (roll,) = _applies(plan)
    assert roll.resource_version == "7"  # a patch of what was read
    assert roll.manifest["spec"]["predictor"]["model"]["storageUri"] == (
        "pvc://models/team-a/retrain-2/exports/200/kserve/tensorflow"
    )
    assert roll.manifest["metadata"]["annotations"][isvc_m.JOB] == "retrain-2"
    assert "from pvc://models/team-a/retrain-1/exports/100" in C.get(plan.status, C.SERVING).message
    served_new = _as_stored(roll.manifest, rv="8")
    back = _pass(old_job, _succeeded(), ServingObs(installed=True, isvc=served_new), at=later(1000))
    assert not _applies(back)
    cond = C.get(back.status, C.SERVING)
    assert cond.reason == "Superseded" and "retrain-2" in cond.message


def test_a_spec_change_is_written_again():
    job = _job()
    (apply,) = _applies(_pass(job, _succeeded(), ServingObs(installed=True)))
    bigger = _job(runtime="tensorflow", minReplicas=3)
    (patch,) = _applies(_pass(bigger, _succeeded(), ServingObs(installed=True, isvc=_as_stored(apply.manifest))))
    assert patch.manifest["spec"]["predictor"]["minReplicas"] == 3


def test_an_inference_service_tfps_did_not_write_is_left_alone():
    foreign = InferenceServiceObs(name="mnist", resource_version="3", storage_uri="gs://someone/else")
    plan = _pass(_job(), _succeeded(), ServingObs(installed=True, isvc=foreign))
    assert not _applies(plan)
    assert C.get(plan.status, C.SERVING).reason == "NameTaken"


def test_a_job_without_serving_is_untouched():
    job = make_job(storage=CLAIM)
    plan = _pass(job, _succeeded(), ServingObs(installed=True))
    assert not _applies(plan) and plan.status.serving is None and C.get(plan.status, C.SERVING) is None
