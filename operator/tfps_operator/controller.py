"""One reconcile loop per PSTrainingJob: observe -> decide (pure) -> apply, then sleep until an event
about the job or its children wakes it, or until the plan's own deadline (activeDeadline, TTL,
creation backoff, periodic resync). A loop per job serializes all work on that job by construction.

A pass sends no reads: the job is Kopf's live body of the daemon (refreshed by the watch), its
children come from the watch indexes (:mod:`.kube.watched`), and our own writes count until the
watch echoes them. The API server sees only writes, and one GET of the job after a refused
(stale) status write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from . import metrics
from .api import parse
from .api.models import PSTrainingJob, PSTrainingJobStatus
from .kube.client import ApiError, Kube
from .kube.executor import ExecutionResult, dry_run, execute, post_events
from .kube.watched import RecentWrites, Views
from .manifests import names
from .reconcile import admission, pacing, writes
from .reconcile.machine import creation_failed, invalid_spec, reconcile
from .reconcile.observed import observe
from .reconcile.plan import Plan
from .settings import FINALIZER, OperatorSettings

log = logging.getLogger(__name__)

FINALIZER_WAIT_SECONDS = 10.0
"""Upper bound on waiting for the watch to echo Kopf's finalizer (see ``_await_finalizer``); under
load (hundreds of jobs created at once) the echo takes seconds."""


def parse_status(raw: dict[str, Any] | None) -> PSTrainingJobStatus:
    """The stored status, keeping only fields the model knows; a mangled one starts afresh."""
    known = {f.alias or n for n, f in PSTrainingJobStatus.model_fields.items()}
    try:
        return PSTrainingJobStatus.model_validate({k: v for k, v in (raw or {}).items() if k in known})
    except ValidationError:
        log.warning("status is not readable; rebuilding it from the observed children")
        return PSTrainingJobStatus()


def parse_job(body: dict[str, Any]) -> PSTrainingJob:
    """Parse the spec with the API's schema and types (raises ValueError naming the field)."""
    # The schema and types, not the CEL rules: the API server ran those very rules when it admitted
    # the object, and celpy needs ~90 ms a job for them (1000 jobs: 90 s of CPU at every operator
    # start, starving the newest jobs). An object stored under an older CRD that breaks a newer rule
    # still ends cleanly: a builder refuses it, or the API server refuses its children in the dry-run
    # before the first create (InvalidSpec either way, with the builder's or the server's message).
    return parse.parse_job({k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body})


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


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


def _rv(body: Mapping[str, Any]) -> int:
    """The resourceVersion as a number (etcd's revision); -1 when it is not one (then never preferred)."""
    try:
        return int((body.get("metadata") or {}).get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


@dataclass
class _JobState:
    wake: asyncio.Event
    failed_passes: int = 0
    """Passes in a row that failed (a child not created, or an error): the retry back-off grows with them."""
    recent: RecentWrites = field(default_factory=RecentWrites)
    written: dict[str, Any] | None = None
    """The job as our last status write (or a re-read after a conflict) returned it, until the watch
    delivers a body at least as new."""
    last_status_write: float = float("-inf")
    """monotonic() of our last status write."""
    progress_writes: int = 0
    """Progress-only status writes since the last significant one: each doubles the wait for the next."""

    def progress_wait(self, settings: OperatorSettings, now: float) -> float:
        """Seconds until a progress-only status change may be written (:func:`.pacing.progress_wait`)."""
        return pacing.progress_wait(
            self.last_status_write,
            self.progress_writes,
            now,
            settings.status_interval_seconds,
            settings.status_interval_max_seconds,
        )

    def freshest(self, live: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The newer of the watch's body and our own last write. A shallow copy: Kopf replaces the
        live body's content wholesale when an event arrives, so the nested dicts stay consistent."""
        current = dict(live) if live is not None else None
        if self.written is not None and (current is None or _rv(self.written) > _rv(current)):
            return self.written
        self.written = None
        return current


class Controller:
    def __init__(self, kube: Kube, settings: OperatorSettings):
        self.kube = kube
        self.settings = settings
        self.jobs: dict[str, _JobState] = {}
        self._parsed: dict[tuple[str, int], PSTrainingJob | str] = {}
        self._passes: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _pass_slot(self) -> asyncio.Semaphore:
        """At most ``max_concurrent_passes`` jobs reconcile at once. A pass holds its plan (whole
        manifests) and its requests until they are answered; without a bound, a thousand new jobs
        all planning at once held ~8,000 pod manifests and ~3,000 requests queued behind the
        connection pool, for no gain in speed (the API server is the bottleneck)."""
        loop = asyncio.get_running_loop()
        if self._passes is None or self._passes[0] is not loop:
            self._passes = (loop, asyncio.Semaphore(self.settings.max_concurrent_passes))
        return self._passes[1]

    def wake(self, namespace: str, name: str | None, seen: str | None = None, uid: str | None = None) -> None:
        """Something about the job or one of its children (``seen``: ``Kind/name`` with ``uid``)
        changed: the watch index now holds it; reconcile the job soon."""
        state = self.jobs.get(f"{namespace}/{name}") if name else None
        if state is not None:
            if seen:
                state.recent.seen(seen, uid)
            state.wake.set()

    async def run(self, namespace: str, name: str, stopped: Any, body: Mapping[str, Any], views: Views) -> None:
        """The job's loop (a Kopf daemon body); returns when Kopf stops the daemon. ``body`` is the
        daemon's live view of the job, ``views`` the watch indexes."""
        key = f"{namespace}/{name}"
        state = self.jobs[key] = _JobState(asyncio.Event())
        try:
            await self._await_finalizer(body, state, stopped)
            while not stopped:
                state.wake.clear()
                delay = await self.reconcile_once(namespace, name, state, body, views)
                if delay is None:
                    return
                delay = pacing.sleep_before_next_pass(delay, self.settings.resync_seconds)
                if delay > 0:
                    done = time.monotonic()
                    await _sleep(delay, state.wake, stopped)
                    settle = pacing.settle_delay(
                        state.wake.is_set(), time.monotonic() - done, self.settings.settle_seconds
                    )
                    if settle > 0:
                        await _sleep(settle, asyncio.Event(), stopped)
        finally:
            if self.jobs.get(key) is state:
                del self.jobs[key]
            metrics.set_phase(key, None)
            metrics.forget_job(key)

    @staticmethod
    async def _await_finalizer(body: Mapping[str, Any], state: _JobState, stopped: Any) -> None:
        """Kopf adds its finalizer as it starts the daemon; a status write based on the body before
        that patch would be refused (stale resourceVersion) and cost a re-read. Wait (briefly) for
        the watch to deliver the finalized body first."""
        deadline = time.monotonic() + FINALIZER_WAIT_SECONDS
        while FINALIZER not in ((body.get("metadata") or {}).get("finalizers") or ()) and not stopped:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            state.wake.clear()
            await _sleep(left, state.wake, stopped)

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

    async def reconcile_once(
        self, namespace: str, name: str, state: _JobState, live: Mapping[str, Any], views: Views
    ) -> float | None:
        """One pass; returns seconds until the next one, or None when the job is gone."""
        async with self._pass_slot():
            return await self._timed_pass(namespace, name, state, live, views)

    async def _timed_pass(
        self, namespace: str, name: str, state: _JobState, live: Mapping[str, Any], views: Views
    ) -> float | None:
        started = time.monotonic()
        result = "ok"
        try:
            return await self._reconcile(namespace, name, state, live, views)
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
        state.failed_passes += 1
        return pacing.retry_delay(
            state.failed_passes, self.settings.retry_base_seconds, self.settings.retry_max_seconds
        )

    def _decide(
        self,
        namespace: str,
        name: str,
        state: _JobState,
        body: dict[str, Any],
        current: PSTrainingJobStatus,
        views: Views,
        t: datetime,
    ) -> Plan:
        """The pure decision on what the indexes and our unechoed writes show."""
        job = self._job(body)
        if isinstance(job, str):
            return invalid_spec(current, body["metadata"].get("generation"), job, t)
        job_key = (namespace, name)
        export = preflight = None
        if current.phase == "Exporting":
            export = state.recent.export_job(views.job_export_jobs(job_key), names.export_job_name(name))
        if current.phase in (None, "Pending"):
            preflight = state.recent.export_job(views.job_export_jobs(job_key), names.preflight_job_name(name))
        existing: set[str] = set()
        if current.phase not in ("Succeeded", "Failed"):
            existing = state.recent.existing(views.job_children(job_key), body["metadata"].get("uid"))
        observed = observe(state.recent.pods(views.job_pods(job_key)), export, existing, preflight)
        return reconcile(job, current, observed, t, self.settings.build)

    async def _admitted(self, plan: Plan, current: PSTrainingJobStatus, generation: int | None, t: datetime) -> Plan:
        """``plan`` if the API server admits every child of the new run (dry-run), else the refusal's plan."""
        answers = await dry_run(self.kube, plan.validate)
        refusals = {admission.where(m): message for m, code, message in answers if admission.is_refusal(code, message)}
        if not refusals:
            return plan
        log.warning(
            "%s: the API server refuses children of a new run: %s",
            plan.validate[0]["metadata"]["namespace"],
            "; ".join(f"{k}: {v}" for k, v in sorted(refusals.items())),
        )
        return admission.verdict(current, generation, refusals, t)

    @staticmethod
    def _remember(state: _JobState, applied: ExecutionResult, progress_only: bool = False) -> None:
        if applied.status_written:
            state.last_status_write = time.monotonic()
            state.progress_writes = pacing.progress_writes_after_write(state.progress_writes, progress_only)
        for obj in applied.created:
            state.recent.record_create(obj)
        for uid in applied.deleted:
            state.recent.record_delete(uid)
        if applied.written is not None:
            state.written = applied.written

    async def _reconcile(
        self, namespace: str, name: str, state: _JobState, live: Mapping[str, Any], views: Views
    ) -> float | None:
        body = state.freshest(live)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        meta = body["metadata"]
        current = parse_status(body.get("status"))
        t = now()
        state.recent.expire()
        plan = self._decide(namespace, name, state, body, current, views, t)
        if plan.validate:
            plan = await self._admitted(plan, current, meta.get("generation"), t)
        acted = bool(plan.actions)
        applied: ExecutionResult | None = None
        children = writes.children_first(current, plan)
        if children is not None:  # a brand-new job: its children, then a fresh decision that reports them
            applied = await execute(self.kube, body, current, children)
            self._remember(state, applied)
            if not applied.create_failures:
                plan, applied = self._decide(namespace, name, state, body, current, views, t), None
        if applied is None:
            deferrable = writes.progress_only(current, plan)
            if deferrable:
                wait = state.progress_wait(self.settings, time.monotonic())
                if wait > 0:  # only progress moved: write it with the next change, or in `wait` seconds
                    return pacing.deferred_write_delay(wait, plan.requeue_after)
            applied = await execute(self.kube, body, current, plan)
            self._remember(state, applied, deferrable)
        else:  # children failed before any status: report them with the plan's own status and Events
            await post_events(self.kube, body, plan.events)
        if applied.conflict:
            # The job changed since the body we hold (the watch is behind): read it once, decide again.
            state.written = await self.kube.get("PSTrainingJob", namespace, name)
            return 0.0 if state.written is not None else None
        key = f"{namespace}/{name}"
        metrics.set_phase(key, plan.status.phase)
        metrics.set_job(key, plan.status, (body["spec"].get("training") or {}).get("steps"))
        if applied.status_written:
            for fmt, result in metrics.export_outcomes(current, plan.status):
                metrics.EXPORT_ARTIFACTS.labels(format=fmt, result=result).inc()
        for role in plan.recreated:
            metrics.POD_RESTARTS.labels(role=role).inc()
        if plan.job_restarted:
            metrics.JOB_RESTARTS.inc()
        if applied.create_failures:
            changed, event = creation_failed(plan.status, meta.get("generation"), applied.create_failures, t)
            if changed:
                try:
                    state.written = await self.kube.patch_status(
                        namespace, name, writes.status_patch(plan.status), applied.resource_version
                    )
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise
            if event:
                await post_events(self.kube, body, [event])
            return self._backoff(state)
        state.failed_passes = 0
        return pacing.next_pass(acted or bool(plan.actions), plan.requeue_after, self.settings.resync_seconds)
