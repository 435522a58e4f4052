"""Operator settings: command-line flags first, then ``TFPS_*`` environment variables, then defaults.

:class:`BuildConfig` is the part the pure builders need (image, ports, who may reach the pods);
:class:`OperatorSettings` adds how the process itself runs.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tfps_wire.job_settings import DEFAULT_PROGRESS_PORT

from .reconcile.leadership import Timings

DEFAULT_TRAINER_IMAGE = "tfps-trainer:0.1.0"
"""Matches ``trainerImage`` in charts/tfps-operator/values.yaml."""

OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "tfps-operator", "app.kubernetes.io/component": "operator"}
"""The labels the chart puts on the operator's pods (charts/tfps-operator/templates/_helpers.tpl)."""

PREFIX = "tfps.dev"
"""Finalizer and annotation prefix of everything the operator (and Kopf on its behalf) writes."""
FINALIZER = f"{PREFIX}/finalizer"
DEFAULT_MONITOR_SECONDS = 10.0
"""How often the progress monitor polls a Running job's chief (``TFPS_MONITOR_SECONDS``)."""
DEFAULT_STALL_SECONDS = 3600.0
"""No new checkpoint for this long marks a Running job Stalled (``TFPS_STALL_SECONDS``; 0 = off)."""


@dataclass(frozen=True)
class BuildConfig:
    """What the manifest builders need besides the job itself."""

    default_image: str = DEFAULT_TRAINER_IMAGE
    progress_port: int = DEFAULT_PROGRESS_PORT
    operator_namespace_labels: Mapping[str, str] = field(default_factory=dict)
    """namespaceSelector of the operator in the NetworkPolicy; empty = any namespace."""
    operator_pod_labels: Mapping[str, str] = field(default_factory=lambda: dict(OPERATOR_POD_LABELS))
    metrics_scraper: tuple[Mapping[str, str] | None, Mapping[str, str]] | None = None
    """Default scraper admitted to the trainers' progress port (GET /metrics) when a job names none: (namespace
    labels, or None for the job's own namespace; pod labels). None = no scraper (chart: trainerMetrics.scraper)."""
    run_as_user: int = 1000
    """Default uid/gid of trainer pods (the trainer image's non-root user)."""
    gang_scheduler_name: str | None = None
    """schedulerName of the gang scheduler (scheduler-plugins' Coscheduling profile), or None: no gang
    scheduling. When set, every job gets a PodGroup and its trainer pods join it and use that scheduler."""
    kueue: bool = False
    """Integrate with Kueue: a job that names a LocalQueue runs only while Kueue admits the Workload the
    operator creates for it (reconcile/kueue.py). Off: queue names are ignored."""
    stall_seconds: float | None = DEFAULT_STALL_SECONDS
    """Default bound of the stall rule (reconcile/stall.py) when a job sets no
    ``runPolicy.stallSeconds``; None or 0 = off. Read by the reconciler, not the builders."""
    relaxed_namespaces: frozenset[str] = frozenset()
    """Namespaces whose jobs may ask for pods beyond Pod Security baseline plus no root (hostPath,
    privileged, root...; api/podsecurity.py); ``*`` = every namespace. Read by the reconciler."""

    def relaxes(self, namespace: str) -> bool:
        """Whether jobs of ``namespace`` escape the relaxable pod security rules."""
        return "*" in self.relaxed_namespaces or namespace in self.relaxed_namespaces


@dataclass(frozen=True)
class OperatorSettings:
    namespaces: tuple[str, ...] = ()
    """Namespaces to serve; empty = all namespaces."""
    log_format: Literal["plain", "json"] = "plain"
    health_port: int = 8080
    metrics_port: int = 9090
    bind_address: str = "127.0.0.1"
    """Address of the health and metrics servers: 0.0.0.0 in a pod, loopback elsewhere."""
    leader_election: bool = False
    """Replicas elect a leader on a Lease (:mod:`tfps_operator.elector`); only the leader acts. Off: run
    exactly one replica."""
    lease_name: str = "tfps-operator"
    lease_namespace: str = "default"
    """Where the leader Lease lives: the operator's own namespace (``TFPS_OPERATOR_NAMESPACE``)."""
    identity: str = ""
    """This replica in the Lease, the User-Agent and Events: ``POD_NAME`` (or the host name) and a random
    suffix, so that a restarted replica is a new candidate (client-go does the same)."""
    lease_timings: Timings = field(default_factory=Timings)
    kubeconfig: str | None = None
    verbose: bool = False
    resync_seconds: float = 60.0
    """Every job is reconciled at least this often, even without events."""
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 300.0
    """Backoff bounds when the API server refuses to create a child (quota, invalid template)."""
    monitor_seconds: float = DEFAULT_MONITOR_SECONDS
    """Poll interval of the progress monitor (tfps_operator.monitor)."""
    settle_seconds: float = 0.2
    """When an event wakes a job's loop within this long of its last pass, wait this long first, so a
    burst of events about the job (its six pods scheduled, then running) lands in one pass and one
    status write instead of six. An event after a quiet spell is acted on at once."""
    status_interval_seconds: float = 3.0
    """A status change that is only counts or wording (pods scheduled one by one) is written at most
    this long after the previous write; a phase, condition or restart change is written at once."""
    status_interval_max_seconds: float = 30.0
    """Each progress-only write in a row doubles that spacing, up to this (a slow start is still
    reported, with fewer writes the longer it takes)."""
    api_timeout_seconds: float = 30.0
    """Longest one call of the operator's own API client may take, connect to last byte."""
    api_connect_timeout_seconds: float = 5.0
    """Longest opening a connection to the API server may take."""
    api_max_connections: int = 16
    """Connections of the operator's own API client open at once for requests (watches have their
    own); more requests wait for one."""
    max_concurrent_passes: int = 32
    """Workers draining the work queue: jobs reconciled (or chiefs polled) at once; the others wait
    their turn (bounds the memory of a burst of new jobs)."""
    build: BuildConfig = field(default_factory=BuildConfig)


def _labels(raw: str) -> dict[str, str]:
    """``k=v,k2=v2`` -> dict; raises ValueError naming the bad item."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"bad label selector item {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def _named_labels(name: str, raw: str) -> dict[str, str]:
    try:
        return _labels(raw)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def _flag(name: str, env: Mapping[str, str]) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw not in ("", "0", "1", "true", "false"):
        raise ValueError(f"{name}: must be true or false, not {raw!r}")
    return raw in ("1", "true")


def _positive(name: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name}: must be > 0, not {raw!r}")
    return value


def _count(name: str, raw: Any) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a whole number, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name}: must be ≥ 1, not {raw!r}")
    return value


def _first(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "")), None)


def from_args(args: Any, environ: Mapping[str, str] | None = None) -> OperatorSettings:
    """Settings from the parsed ``tfps operator`` arguments and the environment."""
    env = os.environ if environ is None else environ
    in_cluster = bool(env.get("KUBERNETES_SERVICE_HOST"))
    namespaces = tuple(
        getattr(args, "namespace", None) or [n.strip() for n in env.get("TFPS_NAMESPACES", "").split(",") if n.strip()]
    )
    operator_ns = env.get("TFPS_OPERATOR_NAMESPACE")
    ns_labels = (
        _labels(env["TFPS_OPERATOR_NAMESPACE_LABELS"])
        if "TFPS_OPERATOR_NAMESPACE_LABELS" in env
        else {"kubernetes.io/metadata.name": operator_ns}
        if operator_ns
        else {}
    )
    pod_labels = (
        _labels(env["TFPS_OPERATOR_POD_LABELS"]) if "TFPS_OPERATOR_POD_LABELS" in env else dict(OPERATOR_POD_LABELS)
    )
    scraper = None
    if "TFPS_METRICS_SCRAPER_POD_LABELS" in env or "TFPS_METRICS_SCRAPER_NAMESPACE_LABELS" in env:
        scraper = (
            _named_labels("TFPS_METRICS_SCRAPER_NAMESPACE_LABELS", env["TFPS_METRICS_SCRAPER_NAMESPACE_LABELS"])
            if "TFPS_METRICS_SCRAPER_NAMESPACE_LABELS" in env
            else None,
            _named_labels("TFPS_METRICS_SCRAPER_POD_LABELS", env.get("TFPS_METRICS_SCRAPER_POD_LABELS", "")),
        )
    log_format = _first(getattr(args, "log_format", None), env.get("TFPS_LOG_FORMAT"), "plain")
    if log_format not in ("plain", "json"):
        raise ValueError(f"TFPS_LOG_FORMAT: must be plain or json, not {log_format!r}")
    timings = Timings(
        lease_duration=_positive("TFPS_LEASE_DURATION_SECONDS", env.get("TFPS_LEASE_DURATION_SECONDS", 15)),
        renew_deadline=_positive("TFPS_RENEW_DEADLINE_SECONDS", env.get("TFPS_RENEW_DEADLINE_SECONDS", 10)),
        retry_period=_positive("TFPS_RETRY_PERIOD_SECONDS", env.get("TFPS_RETRY_PERIOD_SECONDS", 2)),
    )
    timings.check()
    elect = bool(getattr(args, "leader_elect", False)) or _flag("TFPS_LEADER_ELECTION", env)
    return OperatorSettings(
        namespaces=namespaces,
        log_format=log_format,
        health_port=int(_first(getattr(args, "health_port", None), env.get("TFPS_HEALTH_PORT"), 8080)),
        metrics_port=int(_first(getattr(args, "metrics_port", None), env.get("TFPS_METRICS_PORT"), 9090)),
        bind_address=_first(env.get("TFPS_BIND_ADDRESS"), "0.0.0.0" if in_cluster else "127.0.0.1"),
        leader_election=elect,
        lease_name=env.get("TFPS_LEASE_NAME", "").strip() or "tfps-operator",
        lease_namespace=_first(env.get("TFPS_LEASE_NAMESPACE"), operator_ns, *namespaces[:1], "default"),
        identity=f"{env.get('POD_NAME') or socket.gethostname()}_{secrets.token_hex(4)}",
        lease_timings=timings,
        kubeconfig=_first(getattr(args, "kubeconfig", None), env.get("KUBECONFIG")),
        verbose=bool(getattr(args, "verbose", False)) or env.get("TFPS_VERBOSE", "") in ("1", "true"),
        resync_seconds=float(env.get("TFPS_RESYNC_SECONDS", 60)),
        retry_base_seconds=float(env.get("TFPS_RETRY_BASE_SECONDS", 1)),
        retry_max_seconds=float(env.get("TFPS_RETRY_MAX_SECONDS", 300)),
        monitor_seconds=_positive("TFPS_MONITOR_SECONDS", env.get("TFPS_MONITOR_SECONDS", DEFAULT_MONITOR_SECONDS)),
        settle_seconds=float(env.get("TFPS_SETTLE_SECONDS", 0.2)),
        status_interval_seconds=float(env.get("TFPS_STATUS_INTERVAL_SECONDS", 3.0)),
        status_interval_max_seconds=float(env.get("TFPS_STATUS_INTERVAL_MAX_SECONDS", 30.0)),
        api_timeout_seconds=_positive("TFPS_API_TIMEOUT_SECONDS", env.get("TFPS_API_TIMEOUT_SECONDS", 30.0)),
        api_connect_timeout_seconds=_positive(
            "TFPS_API_CONNECT_TIMEOUT_SECONDS", env.get("TFPS_API_CONNECT_TIMEOUT_SECONDS", 5.0)
        ),
        api_max_connections=_count("TFPS_API_MAX_CONNECTIONS", env.get("TFPS_API_MAX_CONNECTIONS", 16)),
        max_concurrent_passes=_count("TFPS_MAX_CONCURRENT_RECONCILES", env.get("TFPS_MAX_CONCURRENT_RECONCILES", 32)),
        build=BuildConfig(
            default_image=_first(
                getattr(args, "default_image", None), env.get("TFPS_DEFAULT_IMAGE"), DEFAULT_TRAINER_IMAGE
            ),
            progress_port=int(env.get("TFPS_PROGRESS_PORT", DEFAULT_PROGRESS_PORT)),
            operator_namespace_labels=ns_labels,
            operator_pod_labels=pod_labels,
            metrics_scraper=scraper,
            gang_scheduler_name=env.get("TFPS_GANG_SCHEDULER_NAME", "").strip() or None,
            kueue=env.get("TFPS_KUEUE", "").strip().lower() in ("1", "true"),
            relaxed_namespaces=frozenset(
                n.strip() for n in env.get("TFPS_RELAXED_NAMESPACES", "").split(",") if n.strip()
            ),
            stall_seconds=(
                None
                if env.get("TFPS_STALL_SECONDS", "").strip() in ("0", "0.0")
                else _positive("TFPS_STALL_SECONDS", env.get("TFPS_STALL_SECONDS", DEFAULT_STALL_SECONDS))
            ),
        ),
    )
