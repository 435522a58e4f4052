"""Steps the serving tests play on kwok, shared by test_operator_serving.py (KServe's CRDs) and
test_operator_kserve_controller.py (KServe's controller): the chief's success, the exporter's result, and
waiting for the job's Serving condition."""

from __future__ import annotations

from typing import Any

from operator_harness import Cluster

from tfps_wire.export_result import ArtifactResult, ExportSucceeded, encode

ARTIFACT_PATH = {"savedmodel": "savedmodel", "onnx": "model.onnx"}


def train(kube: Cluster, job: str) -> str:
    """Play the chief's success; returns the export pod's name."""
    kube.wait_until(lambda: f"{job}-chief-0" in kube.trainer_pods(job), timeout=20, what="chief created")
    kube.finish_pod(f"{job}-chief-0", "Succeeded", 0)
    kube.wait_phase(job, "Exporting")
    return kube.wait_until(lambda: next(iter(kube.pods(f"job-name={job}-export")), None), timeout=30, what="export pod")


def export_ok(step: int, *formats: str) -> str:
    """The exporter's termination message for a complete export of ``formats`` at ``step``."""
    return encode(
        ExportSucceeded(
            step=step,
            path=f"exports/{step}",
            manifest=f"exports/{step}/manifest.json",
            artifacts=[
                ArtifactResult(
                    format=f, path=f"exports/{step}/{ARTIFACT_PATH[f]}", bytes=5, sha256="ab" * 32, max_error=0.0
                )
                for f in formats
            ],
        )
    )


def serving_condition(kube: Cluster, job: str, reason: str, timeout: float = 30) -> dict[str, Any]:
    """The job's Serving condition, once its reason is ``reason``."""
    return kube.wait_until(
        lambda: (c := kube.condition(job, "Serving")) is not None and c["reason"] == reason and c,
        timeout=timeout,
        interval=0.3,
        what=f"{job} Serving={reason} (have {kube.condition(job, 'Serving')})",
    )
