"""`tfps operator`: configure logging, metrics and Kopf, then run the handlers until SIGTERM.

Leader election: with ``--peering NAME`` (env ``TFPS_PEERING``) Kopf peering is used: every replica
registers in the KopfPeering (per namespace) or ClusterKopfPeering (all namespaces) object NAME and
only the one with the highest priority acts; the others pause, and take over when its heartbeat
stops. The priority is ``TFPS_PEERING_PRIORITY`` or a random number, so two replicas never share it
(Kopf pauses *all* operators of equal priority). The peering CRDs must be installed
(``python -m tfps_operator.peering | kubectl apply -f -``). Without ``--peering`` the operator runs
standalone: run exactly one replica.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
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
        "standalone": s.peering is None,
        "peering_name": s.peering,
        "priority": s.peering_priority,
        "liveness_endpoint": f"http://{s.bind_address}:{s.health_port}/healthz",
        "memo": kopf.Memo(settings=s),
    }


def main(args: Any) -> int:
    try:
        s = from_args(args)
    except ValueError as exc:
        raise SystemExit(f"tfps operator: {exc}") from None
    if s.peering and s.peering_priority is None:
        s = dataclasses.replace(s, peering_priority=secrets.randbelow(2**31 - 2) + 1)
    if s.kubeconfig:
        os.environ["KUBECONFIG"] = s.kubeconfig  # Kopf's own login reads it
    _configure_logging(s)
    metrics.serve(s.metrics_port, s.bind_address)
    from . import handlers  # noqa: F401 - registers the handlers

    log.info(
        "starting: namespaces=%s peering=%s health=%s:%d metrics=%s:%d",
        list(s.namespaces) or "all",
        s.peering or "standalone",
        s.bind_address,
        s.health_port,
        s.bind_address,
        s.metrics_port,
    )
    asyncio.run(kopf.operator(**kopf_kwargs(s)))
    return 0
