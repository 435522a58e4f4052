"""The job's headless Service: gives every trainer pod the DNS name TF_CONFIG uses."""

from __future__ import annotations

from typing import Any

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from . import labels, names


def headless_service(job: PSTrainingJob, cfg: BuildConfig) -> dict[str, Any]:
    """``clusterIP: None`` with ``publishNotReadyAddresses``, so PS and worker names resolve before
    the pods are ready (TensorFlow servers must find each other while starting)."""
    name = job.metadata.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": labels.child_metadata(job, names.service_name(name), labels.base_labels(name, "service")),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": labels.job_selector(name),
            "ports": [
                {
                    "name": "grpc",
                    "port": job.spec.training.port,
                    "targetPort": job.spec.training.port,
                    "protocol": "TCP",
                },
                {"name": "progress", "port": cfg.progress_port, "targetPort": cfg.progress_port, "protocol": "TCP"},
            ],
        },
    }
