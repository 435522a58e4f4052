"""`tfps operator`: configure logging, metrics and Kopf, then run the handlers until SIGTERM.

Leader election: with ``--leader-elect`` (env ``TFPS_LEADER_ELECTION=true``) every replica competes for
the Lease ``TFPS_LEASE_NAME`` (default ``tfps-operator``) in the operator's namespace, and only the
holder acts (:mod:`tfps_operator.elector`). Without it the operator acts at once: run exactly one replica.
Kopf always runs standalone: it logs in, watches the jobs and serves the liveness probe.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import kopf

from . import metrics
from .settings import OperatorSettings, from_args

log = logging.getLogger("tfps_operator")


class _QuietWakeups(logging.Filter):
    """Drops Kopf's "Handler 'pod_event' succeeded." lines: the wake-up handlers run for every event
    about every child (thousands a minute on a busy cluster) and do nothing worth a line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not isinstance(record.msg, str):
            return True
        return not (record.msg.startswith("Handler '") and record.msg.endswith("_event' succeeded."))


def _configure_logging(s: OperatorSettings) -> None:
    kopf.configure(verbose=s.verbose, log_format=kopf.LogFormat.JSON if s.log_format == "json" else kopf.LogFormat.FULL)
    logging.getLogger("tfps_operator").setLevel(logging.DEBUG if s.verbose else logging.INFO)
    for noisy in ("aiohttp.access", "celpy"):  # whole response bodies, CEL internals
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not s.verbose:
        logging.getLogger("kopf.objects").addFilter(_QuietWakeups())


def kopf_kwargs(s: OperatorSettings) -> dict[str, Any]:
    """Arguments of :func:`kopf.operator` for these settings."""
    return {
        "clusterwide": not s.namespaces,
        "namespaces": list(s.namespaces),
        "standalone": True,
        "liveness_endpoint": f"http://{s.bind_address}:{s.health_port}/healthz",
        "memo": kopf.Memo(settings=s),
    }


def main(args: Any) -> int:
    try:
        s = from_args(args)
    except ValueError as exc:
        raise SystemExit(f"tfps operator: {exc}") from None
    if s.kubeconfig:
        os.environ["KUBECONFIG"] = s.kubeconfig  # Kopf's own login reads it
    _configure_logging(s)
    metrics.serve(s.metrics_port, s.bind_address)
    from . import handlers  # noqa: F401 - registers the handlers

    log.info(
        "starting: namespaces=%s leader election=%s health=%s:%d metrics=%s:%d",
        list(s.namespaces) or "all",
        f"Lease {s.lease_namespace}/{s.lease_name} as {s.identity}" if s.leader_election else "off",
        s.bind_address,
        s.health_port,
        s.bind_address,
        s.metrics_port,
    )
    asyncio.run(kopf.operator(**kopf_kwargs(s)))
    return 0
