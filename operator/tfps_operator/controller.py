"""One reconcile loop per PSTrainingJob: read -> observe -> decide (pure) -> apply, then sleep until
an event about the job or its children wakes it, or until the plan's own deadline (activeDeadline,
TTL, creation backoff, periodic resync). A loop per job serializes all work on that job by construction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import ValidationError

from . import metrics
from .api.models import PSTrainingJob, PSTrainingJobStatus
from .build import labels, names
from .kube.client import ApiError, Kube, controller_uid
from .kube.executor import execute, post_events, status_patch
from .reconcile import crashloop
from .reconcile.machine import creation_failed, invalid_spec, reconcile
from .reconcile.observed import observe
from .settings import OperatorSettings

log = logging.getLogger(__name__)

try:
    from .api.validate import validate_job as _validate
except ImportError:  # pragma: no cover - until the API package ships it
    _validate = PSTrainingJob.model_validate  # type: ignore[assignment]


def parse_status(raw: dict[str, Any] | None) -> PSTrainingJobStatus:
    """The stored status, keeping only fields the model knows; a mangled one starts afresh."""
    known = {f.alias or n for n, f in PSTrainingJobStatus.model_fields.items()}
    try:
        return PSTrainingJobStatus.model_validate({k: v for k, v in (raw or {}).items() if k in known})
    except ValidationError:
        log.warning("status is not readable; rebuilding it from the observed children")
        return PSTrainingJobStatus()


def parse_job(body: dict[str, Any]) -> PSTrainingJob:
    """Validate the spec with the same rules as the API server (raises ValueError naming the field)."""
    return _validate({k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body})


async def _none() -> None:
    return None


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


async def _sleep(delay: float, wake: asyncio.Event, stopped: Any) -> None:
    """Sleep until ``delay`` passes, ``wake`` is set, or Kopf stops the daemon."""
    async def until_stopped() -> None:
        await stopped.wait()

    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(until_stopped())]
    try:
        await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


@dataclass
class _JobState:
    wake: asyncio.Event
    create_failures: int = 0
    replacements: dict[str, crashloop.Replacements] = field(default_factory=dict)
    """Crash-loop backoff of replicas recreated alone, by pod name."""

    def hold(self, now: datetime) -> dict[str, datetime]:
        out = {}
        for name, entry in self.replacements.items():
            when = crashloop.not_before(entry, now)
            if when is not None:
                out[name] = when
        return out


class Controller:
    def __init__(self, kube: Kube, settings: OperatorSettings):
        self.kube = kube
        self.settings = settings
        self.jobs: dict[str, _JobState] = {}
        self._parsed: dict[tuple[str, int], PSTrainingJob | str] = {}

    def wake(self, namespace: str, name: str | None) -> None:
        """Something about the job or one of its children changed: reconcile it soon."""
        state = self.jobs.get(f"{namespace}/{name}") if name else None
        if state is not None:
            state.wake.set()

    async def run(self, namespace: str, name: str, stopped: Any) -> None:
        """The job's loop (a Kopf daemon body); returns when Kopf stops the daemon."""
        key = f"{namespace}/{name}"
        state = self.jobs[key] = _JobState(asyncio.Event())
        try:
            while not stopped:
                state.wake.clear()
                delay = await self.reconcile_once(namespace, name, state)
                if delay is None:
                    return
                delay = min(delay, self.settings.resync_seconds)
                if delay > 0:
                    await _sleep(delay, state.wake, stopped)
        finally:
            if self.jobs.get(key) is state:
                del self.jobs[key]
            metrics.set_phase(key, None)

    def _job(self, body: dict[str, Any]) -> PSTrainingJob | str:
        meta = body["metadata"]
        cache_key = (meta.get("uid", ""), int(meta.get("generation") or 0))
        if cache_key not in self._parsed:
            if len(self._parsed) > 1024:  # forget the oldest parse
                self._parsed.pop(next(iter(self._parsed)))
            try:
                self._parsed[cache_key] = parse_job(body)
            except ValueError as exc:
                self._parsed[cache_key] = str(exc)
        return self._parsed[cache_key]

    async def reconcile_once(self, namespace: str, name: str, state: _JobState) -> float | None:
        """One pass; returns seconds until the next one, or None when the job is gone."""
        started = time.monotonic()
        result = "ok"
        try:
            return await self._reconcile(namespace, name, state)
        except ApiError as exc:
            result = "error"
            log.warning("reconciling %s/%s: %s", namespace, name, exc)
            return self._backoff(state)
        except Exception:
            result = "error"
            log.exception("reconciling %s/%s failed", namespace, name)
            return self._backoff(state)
        finally:
            metrics.RECONCILES.labels(result=result).inc()
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)

    def _backoff(self, state: _JobState) -> float:
        state.create_failures += 1
        s = self.settings
        return min(s.retry_max_seconds, s.retry_base_seconds * 2 ** (state.create_failures - 1))

    async def _reconcile(self, namespace: str, name: str, state: _JobState) -> float | None:
        body = await self.kube.get("PSTrainingJob", namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        meta = body["metadata"]
        current = parse_status(body.get("status"))
        job = self._job(body)
        t = now()
        if isinstance(job, str):
            plan = invalid_spec(current, meta.get("generation"), job, t)
        else:
            children = [("Service", names.service_name(name)), ("NetworkPolicy", names.network_policy_name(name)),
                        ("PersistentVolumeClaim", names.pvc_name(name))]
            if current.phase in ("Succeeded", "Failed"):
                children = []
            exporting = current.phase == "Exporting"
            pods, export, *found = await asyncio.gather(
                self.kube.list("Pod", namespace, labels.selector_string(labels.job_selector(name))),
                self.kube.get("Job", namespace, names.export_job_name(name)) if exporting else _none(),
                *(self.kube.get(kind, namespace, child) for kind, child in children),
            )
            # Someone else's object under a child's name is not ours: creating it reports the clash.
            existing = {f"{kind}/{child}" for (kind, child), obj in zip(children, found)
                        if obj is not None and controller_uid(obj) == meta.get("uid")}
            plan = reconcile(job, current, observe(pods, export, existing), t, self.settings.build, state.hold(t))
        outcome = await execute(self.kube, body, current, plan)
        if outcome.conflict:
            return 0.0
        key = f"{namespace}/{name}"
        metrics.set_phase(key, plan.status.phase)
        for pod_name in plan.replaced:
            state.replacements[pod_name] = crashloop.record(state.replacements.get(pod_name), t)
        for role in plan.recreated:
            metrics.POD_RESTARTS.labels(role=role).inc()
        if plan.job_restarted:
            metrics.JOB_RESTARTS.inc()
        if outcome.create_failures:
            changed, event = creation_failed(plan.status, meta.get("generation"), outcome.create_failures, t)
            if changed:
                try:
                    await self.kube.patch_status(namespace, name, status_patch(plan.status), outcome.resource_version)
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise
            if event:
                await post_events(self.kube, body, [event])
            return self._backoff(state)
        state.create_failures = 0
        if any(a for a in plan.actions):
            # Our own writes will come back as events; look again soon in case they do not.
            return min(plan.requeue_after or self.settings.resync_seconds, 5.0)
        return plan.requeue_after if plan.requeue_after is not None else self.settings.resync_seconds
