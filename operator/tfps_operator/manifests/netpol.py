"""NetworkPolicy of a job: TensorFlow's gRPC runtime has no authentication, so its port is open to
the job's own pods only; the progress port is open to the operator, which pulls training progress."""

from __future__ import annotations

from typing import Any

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from . import labels, names


def network_policy(job: PSTrainingJob, cfg: BuildConfig) -> dict[str, Any]:
    name = job.metadata.name
    own_pods = {"matchLabels": labels.job_selector(name)}
    operator_peer = {
        "namespaceSelector": {"matchLabels": dict(cfg.operator_namespace_labels)},
        "podSelector": {"matchLabels": dict(cfg.operator_pod_labels)},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": labels.child_metadata(
            job, names.network_policy_name(name), labels.base_labels(name, "network-policy")
        ),
        "spec": {
            "podSelector": own_pods,
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": own_pods}], "ports": [{"protocol": "TCP", "port": job.spec.training.port}]},
                {"from": [operator_peer], "ports": [{"protocol": "TCP", "port": cfg.progress_port}]},
            ],
        },
    }
