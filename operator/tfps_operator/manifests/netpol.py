"""NetworkPolicy of a job: TensorFlow's gRPC runtime has no authentication, so its port is open to
the job's own pods only; the progress port is open to the operator, which pulls training progress, and,
when the job or the operator's settings name one, to a metrics scraper (GET /metrics on that port)."""

from __future__ import annotations

from collections.abc import Mapping
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
    ingress: list[dict[str, Any]] = [
        {"from": [{"podSelector": own_pods}], "ports": [{"protocol": "TCP", "port": job.spec.training.port}]},
        {"from": [operator_peer], "ports": [{"protocol": "TCP", "port": cfg.progress_port}]},
    ]
    scraper = scraper_peer(job, cfg)
    if scraper is not None:
        ingress.append({"from": [scraper], "ports": [{"protocol": "TCP", "port": cfg.progress_port}]})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": labels.child_metadata(
            job, names.network_policy_name(name), labels.base_labels(name, "network-policy")
        ),
        "spec": {
            "podSelector": own_pods,
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def scraper_peer(job: PSTrainingJob, cfg: BuildConfig) -> dict[str, Any] | None:
    """The NetworkPolicy peer of the metrics scraper: ``spec.metrics.scrapeFrom``, else the operator's
    default (``cfg.metrics_scraper``), else None. Without namespace labels it is a pod of the job's own
    namespace."""
    own = job.spec.metrics.scrape_from if job.spec.metrics else None
    ns_labels: Mapping[str, str] | None
    pod_labels: Mapping[str, str]
    if own is not None:
        ns_labels, pod_labels = own.namespace_labels, own.pod_labels
    elif cfg.metrics_scraper is not None:
        ns_labels, pod_labels = cfg.metrics_scraper
    else:
        return None
    peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(pod_labels)}}
    if ns_labels is not None:
        peer["namespaceSelector"] = {"matchLabels": dict(ns_labels)}
    return peer
