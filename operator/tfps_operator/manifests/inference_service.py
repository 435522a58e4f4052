"""The KServe InferenceService that serves a job's verified export (``spec.serving``).

Not a child of the job: it carries no ownerReference (a served model outlives its training job) and none
of the job's labels (KServe copies an InferenceService's labels onto its predictor pods, which must never
look like the job's pods to the operator's informers or to a cleanup by label). What made it is in its
annotations: :data:`JOB` (the job whose export it serves), :data:`EXPORTED_AT` (when that export completed,
which decides between two jobs naming one InferenceService) and :data:`SPEC_HASH` (of the spec written, to
tell when it must be written again).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from tfps_wire import serving_layout
from tfps_wire.uri import join

from ..api.models import PSTrainingJob, ServingSpec
from .jobsettings import job_root

API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
JOB = "tfps.dev/job"
EXPORTED_AT = "tfps.dev/exported-at"
STEP = "tfps.dev/step"
SPEC_HASH = "tfps.dev/spec-hash"
MODEL_FORMAT: dict[str, str] = {"tensorflow": "tensorflow", "onnx": "onnx"}
"""KServe's modelFormat name per runtime: KServe picks its TensorFlow Serving and Triton runtimes for them."""
PROTOCOL_VERSION: dict[str, str] = {"onnx": "v2"}
"""The inference protocol, where the runtime's differs from KServe's default (v1): KServe picks a runtime only
among those serving the model's protocol, and Triton serves v2 alone (TF Serving's runtime serves v1)."""


def serving_name(job: PSTrainingJob) -> str:
    s = job.spec.serving
    return (s.name if s and s.name else None) or job.metadata.name


def storage_uri(job: PSTrainingJob, export_path: str) -> str:
    """The storage URI of the runtime's base path in the export at ``export_path`` (relative to the job's
    root): ``pvc://<claim>/<namespace>/<job>/<export>/kserve/<runtime>`` on a volume, the same under the
    job's ``gs://`` root in object storage."""
    assert job.spec.serving is not None
    st = job.spec.storage
    if st.uri:
        export_dir = join(job_root("", job), export_path)
    elif st.claim_name:
        export_dir = join(f"pvc://{st.claim_name}", job.metadata.namespace, job.metadata.name, export_path)
    else:
        raise ValueError("spec.serving needs spec.storage.claimName or spec.storage.uri")
    return serving_layout.base_path(export_dir, job.spec.serving.runtime)


def _predictor(serving: ServingSpec, uri: str) -> dict[str, Any]:
    model: dict[str, Any] = {"modelFormat": {"name": MODEL_FORMAT[serving.runtime]}, "storageUri": uri}
    if serving.runtime in PROTOCOL_VERSION:
        model["protocolVersion"] = PROTOCOL_VERSION[serving.runtime]
    if serving.resources is not None:
        model["resources"] = serving.resources.to_wire()
    predictor: dict[str, Any] = {
        "minReplicas": serving.min_replicas,
        "maxReplicas": serving.max_replicas or serving.min_replicas,
        "model": model,
    }
    if serving.service_account_name:
        predictor["serviceAccountName"] = serving.service_account_name
    return predictor


def inference_service(job: PSTrainingJob, export_path: str, step: int, exported_at: datetime) -> dict[str, Any]:
    """The InferenceService serving the export at ``export_path`` (its ``step``, completed at ``exported_at``)."""
    assert job.spec.serving is not None
    spec = {"predictor": _predictor(job.spec.serving, storage_uri(job, export_path))}
    annotations = {
        DEPLOYMENT_MODE: "RawDeployment",
        JOB: job.metadata.name,
        EXPORTED_AT: exported_at.isoformat(),
        STEP: str(step),
    }
    annotations[SPEC_HASH] = spec_hash(spec, annotations)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": serving_name(job), "namespace": job.metadata.namespace, "annotations": annotations},
        "spec": spec,
    }


def spec_hash(spec: dict[str, Any], annotations: dict[str, str]) -> str:
    """A short digest of what the operator writes (the spec and its own annotations)."""
    doc = json.dumps({"spec": spec, "annotations": annotations}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()[:16]
