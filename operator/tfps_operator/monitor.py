"""The progress monitor: pull a Running job's lead's progress into ``status.checkpoint`` and ``status.progress``.

The lead is the chief, or worker 0 of a job without one (:mod:`.strategies`); "the chief" below means it.

Trainer pods hold no API credentials, so the operator pulls: every ``monitor_seconds`` it GETs
``http://<chief pod IP>:<progress port>/status`` (the chief's :mod:`tfps_trainer.status_server` endpoint,
admitted from the operator's pods by the job's NetworkPolicy; the IP from the operator's pod index, the
job from the daemon's live body: the API server is only written to) with a short timeout, and
merge-patches the two fields it writes through the status subresource, only when they changed.
``progress`` is the monitor's alone. ``checkpoint`` is written by the reconciler too
(``kube.executor.OWNED_STATUS_FIELDS``): from the chief's success summary once the chief has exited,
which the monitor, polling only while the job is Running, may not have seen; the reconciler also reads
it for the stall rule (:mod:`.reconcile.stall`).

A poll is a timed key in the controller's work queue, queued again every ``monitor_seconds`` while
``status.phase`` is Running; the monitor keeps a small poller (the chief's address, the fields last
written) per Running job only. An unreachable chief or a bad answer is logged at debug level and counted
(``tfps_progress_polls_total``); it never ends the poller. Parsing and change detection are pure; the
answer's schema is :class:`tfps_wire.progress_report.ProgressReport`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from pydantic import ValidationError

from tfps_wire.progress_report import read_report

from . import metrics
from .api.models import CheckpointStatus, PSTrainingJobStatus, TrainingProgress
from .api.parse import JobValidationError, parse_job
from .kube.client import ApiError, Kube
from .kube.watched import Views
from .manifests import names
from .reconcile.observed import PodObs
from .settings import OperatorSettings
from .strategies import lead_of

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
"""The chief's status is a few hundred bytes; anything much larger is not it."""


# --- parsing (pure) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """What the chief reported, reduced to the fields the job status carries (None: absent or unusable)."""

    checkpoint: CheckpointStatus | None
    progress: TrainingProgress | None


def parse_report(raw: bytes | str, job_name: str | None = None) -> Report | None:
    """The chief's ``/status`` answer -> :class:`Report`; None when it is not a usable report at all
    (not a report, another job's or another role's, or neither a checkpoint nor a step in it). A bad
    checkpoint or a bad number is dropped on its own: the rest of the report still counts. A checkpoint
    counts only with all of its step, path and time."""
    report = read_report(raw)
    if report is None or report.role not in (None, "chief", "worker"):
        return None
    if job_name and report.job and report.job != job_name:
        return None  # a recycled pod IP now serving someone else
    checkpoint = None
    ck = report.checkpoint
    if ck is not None and ck.step is not None and ck.path is not None and (when := ck.at) is not None:
        checkpoint = CheckpointStatus(step=ck.step, path=ck.path, time=when)
    progress = None
    if report.step is not None:
        progress = TrainingProgress(
            step=report.step,
            loss=report.loss,
            steps_per_second=report.steps_per_second,
            updated=report.updated_at,
        )
    if checkpoint is None and progress is None:
        return None
    return Report(checkpoint=checkpoint, progress=progress)


# --- change detection (pure) ----------------------------------------------------------------------


def _progress_key(p: TrainingProgress | None) -> tuple[Any, ...] | None:
    return None if p is None else (p.step, p.loss, p.steps_per_second)


def status_changes(current: PSTrainingJobStatus, report: Report, now: datetime) -> dict[str, Any]:
    """The merge patch of ``status`` that brings ``current`` up to ``report``; empty when nothing moved.

    A checkpoint is only ever replaced by a report of one (a chief that has none yet, e.g. right
    after a restart, does not erase the last known one). Progress counts as moved when step, loss or
    steps/s changed; its ``updated`` stamp alone does not cause a write.
    """
    patch: dict[str, Any] = {}
    if report.checkpoint is not None and report.checkpoint != current.checkpoint:
        patch["checkpoint"] = _wire(report.checkpoint)
    if report.progress is not None and _progress_key(report.progress) != _progress_key(current.progress):
        progress = report.progress
        if progress.updated is None:
            progress = progress.model_copy(update={"updated": now})
        patch["progress"] = _wire(progress)
    return patch


def _wire(model: CheckpointStatus | TrainingProgress) -> dict[str, Any]:
    """All fields, absent ones as null so a merge patch removes a stale value."""
    return model.model_dump(mode="json", by_alias=True)


def owned_status(raw: dict[str, Any] | None) -> PSTrainingJobStatus:
    """The monitor's fields of a stored status (anything unreadable counts as absent)."""
    out = PSTrainingJobStatus()
    for key, model in (("checkpoint", CheckpointStatus), ("progress", TrainingProgress)):
        value = (raw or {}).get(key)
        if isinstance(value, dict):
            try:
                setattr(out, key, model.model_validate(value))
            except ValidationError:
                pass
    return out


# --- I/O ------------------------------------------------------------------------------------------


def _lead_pod(body: Mapping[str, Any], name: str) -> str:
    """The lead's pod name; the chief's when the body does not parse (the reconciler reports why)."""
    try:
        return names.pod_name(name, *lead_of(parse_job(body)))
    except JobValidationError:
        return names.pod_name(name, "chief", 0)


def chief_address(pod: PodObs | None) -> str | None:
    """The chief pod's IP while it runs (None while pending, finished or going away)."""
    if pod is None or pod.deleting or pod.phase != "Running":
        return None
    return pod.ip or None


class ProgressMonitor:
    """Polls chiefs over one shared HTTP session and writes through the controller's :class:`Kube`."""

    def __init__(self, kube: Kube, settings: OperatorSettings):
        self.kube = kube
        self.interval = settings.monitor_seconds
        self.port = settings.build.progress_port
        self.timeout = aiohttp.ClientTimeout(total=min(5.0, max(0.5, self.interval * 0.8)))
        self._session: aiohttp.ClientSession | None = None
        self.pollers: dict[str, _Poller] = {}
        """``namespace/name`` of every Running job -> its poller."""

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # trust_env=False: never through a proxy from the environment; the chief is dialled directly.
            self._session = aiohttp.ClientSession(timeout=self.timeout, trust_env=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def start(self, key: str) -> bool:
        """Start polling the job ``key`` (``namespace/name``); False when it is polled already."""
        if key in self.pollers:
            return False
        namespace, _, name = key.partition("/")
        self.pollers[key] = _Poller(self, namespace, name)
        return True

    def stop(self, key: str) -> None:
        self.pollers.pop(key, None)

    async def poll(self, namespace: str, name: str, body: Mapping[str, Any], views: Views) -> str:
        """One poll of a Running job (``body``: its newest body; ``views``: the informers); returns
        the result label it counted."""
        poller = self.pollers.get(f"{namespace}/{name}")
        if poller is None:
            poller = self.pollers[f"{namespace}/{name}"] = _Poller(self, namespace, name)
        return await poller.poll_once(body, views)

    async def fetch(self, address: str) -> bytes:
        """GET the chief's /status (raises aiohttp.ClientError, OSError or asyncio.TimeoutError)."""
        async with self.session.get(f"http://{address}:{self.port}/status") as resp:
            resp.raise_for_status()
            return await resp.content.read(MAX_BODY)


class _Poller:
    def __init__(self, monitor: ProgressMonitor, namespace: str, name: str):
        self.m, self.namespace, self.name = monitor, namespace, name
        self.address: str | None = None
        self.lead: str | None = None
        """The lead's pod name (fixed for the job's life: strategy and replica counts are immutable)."""
        self.current: PSTrainingJobStatus | None = None
        """The monitor's fields as last written (None: take them from the live body)."""

    async def poll_once(self, body: Mapping[str, Any], views: Views) -> str:
        """One poll; returns the result label it counted (ok, unchanged, no_chief, unreachable, invalid, error)."""
        result = "error"
        try:
            result = await self._poll(body, views)
        except ApiError as exc:
            log.debug("progress of %s/%s: %s", self.namespace, self.name, exc)
            if exc.status in (404, 409):
                self.current = None
        except Exception:
            log.exception("progress poll of %s/%s failed", self.namespace, self.name)
        metrics.PROGRESS_POLLS.labels(result=result).inc()
        return result

    async def _poll(self, body: Mapping[str, Any], views: Views) -> str:
        if self.current is None:
            self.current = owned_status(body.get("status"))
        if self.lead is None:
            self.lead = _lead_pod(body, self.name)
        if self.address is None:
            self.address = chief_address(views.chief((self.namespace, self.name), self.lead))
            if self.address is None:
                return "no_chief"
        try:
            raw = await self.m.fetch(self.address)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.debug(
                "progress of %s/%s: chief at %s unreachable: %s",
                self.namespace,
                self.name,
                self.address,
                exc or type(exc).__name__,
            )
            self.address = None  # look the pod up again: it may have been replaced
            return "unreachable"
        report = parse_report(raw, self.name)
        if report is None:
            log.debug("progress of %s/%s: not a chief status report: %r", self.namespace, self.name, raw[:200])
            self.address = None
            return "invalid"
        patch = status_changes(self.current, report, datetime.now(UTC))
        if not patch:
            return "unchanged"
        updated = await self.m.kube.patch_status(self.namespace, self.name, patch, None)
        self.current = owned_status(updated.get("status"))
        if "checkpoint" in patch:
            log.info(
                "%s/%s: checkpoint step %s at %s",
                self.namespace,
                self.name,
                patch["checkpoint"]["step"],
                patch["checkpoint"]["path"],
            )
        return "ok"
