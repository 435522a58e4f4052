"""The controller: watches feed a keyed work queue, a fixed pool of workers drains it.

* The PSTrainingJob watch (Kopf's, ``handlers.py``) hands every body to :meth:`Controller.job_event`,
  which keeps the newest one per job and queues the job. The children are watched by lean informers of
  the operator's own (:mod:`.kube.informer`), kept as the small records the reconcile reads
  (:mod:`.kube.watched`); their events queue the job they belong to.
* The queue (:mod:`.workqueue`) holds each job at most once and hands it to one worker at a time, so
  all work on one job is serialized by construction. A worker runs one pass: observe, decide
  (:func:`.reconcile.job_pass.decide`, pure, once), apply (:mod:`.kube.executor`), remember what applying
  found for the next pass (:func:`.reconcile.job_pass.remember`), and queue the job again when that
  says (activeDeadline, TTL, back-off, resync); a pass that raised is delayed by the queue's per-key
  back-off.
* A Running job's progress poll (:mod:`.monitor`) is a timed key of its own in the same queue.

A pass sends no reads: the job is the watch's newest body, its children come from the informers, and
our own writes count until the watch echoes them. The API server sees only writes, and one GET of the
job after a refused (stale) status write when the watch has not delivered a newer body by the next
pass. Two exceptions are not children: the cluster-scoped objects a queued job names (Kueue's flavors,
its PriorityClass; cached, :mod:`.kube.lookups`), and, for a Succeeded job with ``spec.serving``, the
KServe InferenceService it hands its export to (one GET per pass, after a cached discovery of the API).
No worker starts before every informer has listed its children, so a restarted operator decides nothing
on a partial view. Nothing blocks a job's deletion: no finalizer; a job that is gone is dropped from the
queue and forgotten.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from . import metrics
from .api import parse
from .api.models import PSTrainingJob, PSTrainingJobStatus
from .kube.client import ApiError, Kube, NotLeader
from .kube.executor import ExecutionResult, dry_run, execute
from .kube.lookups import Lookup, ServingLookup
from .kube.watched import RecentWrites, Views
from .manifests import inference_service as isvc_m
from .manifests import names
from .manifests import workload as wlm
from .monitor import ProgressMonitor
from .reconcile import job_pass, pacing
from .reconcile.job_pass import Memory, PassInput
from .reconcile.observed import Flavor, Observed, flavor, observe
from .settings import OperatorSettings
from .workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)

Key = tuple[Literal["job", "progress"], str, str]
"""A queue key: what to do (a reconcile pass, a progress poll), namespace, job name."""


def parse_status(raw: dict[str, Any] | None) -> PSTrainingJobStatus:
    """The stored status, keeping only fields the model knows (at any depth: a newer operator's, after a
    rollback); a mangled one starts afresh."""
    try:
        return parse.known_fields_only(PSTrainingJobStatus, raw or {})
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
    # Fields a newer CRD added (and defaulted into every stored job) are left out: docs/install.md, "Upgrading".
    return parse.parse_stored_job({k: body[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in body})


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _rv(body: Mapping[str, Any]) -> int:
    """The resourceVersion as a number (etcd's revision); -1 when it is not one (then never preferred)."""
    try:
        return int((body.get("metadata") or {}).get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


def trimmed(body: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a job's body a pass reads (managedFields and the like are dropped)."""
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    return {
        k: v for k, v in {**body, "metadata": meta}.items() if k in ("apiVersion", "kind", "metadata", "spec", "status")
    }


class Bodies:
    """The newest body of every job the watch reported, by ``namespace/name``, kept as compact JSON:
    a job's body as parsed dicts weighs about five times its JSON, and a pass reads only its own."""

    def __init__(self) -> None:
        self._raw: dict[str, bytes] = {}

    def put(self, key: str, body: Mapping[str, Any]) -> None:
        self._raw[key] = json.dumps(trimmed(body), separators=(",", ":")).encode()

    def pop(self, key: str) -> None:
        self._raw.pop(key, None)

    def get(self, key: str) -> dict[str, Any] | None:
        """A fresh copy of the body (None: the watch reported none, or its deletion)."""
        raw = self._raw.get(key)
        return json.loads(raw) if raw is not None else None

    def __contains__(self, key: object) -> bool:
        return key in self._raw


@dataclass
class _JobState:
    recent: RecentWrites = field(default_factory=RecentWrites)
    written: dict[str, Any] | None = None
    """The job as our last status write (or a read after a refused one) returned it, until the watch
    delivers a body at least as new."""
    memory: Memory = field(default_factory=Memory)
    """What the last pass left for the next (:func:`.reconcile.job_pass.remember`)."""
    last_pass: float = float("-inf")
    """monotonic() at the end of the last pass (an event soon after it waits to settle)."""
    phase: str | None = None
    """The phase the last pass left the job in."""

    def freshest(self, live: dict[str, Any] | None) -> dict[str, Any] | None:
        """The newer of the watch's body and our own last write."""
        if self.written is not None and (live is None or _rv(self.written) > _rv(live)):
            return self.written
        self.written = None
        return live

    def echoed(self, body: Mapping[str, Any]) -> None:
        """The watch delivered ``body``: our own last write, if no newer, is no longer needed."""
        if self.written is not None and _rv(body) >= _rv(self.written):
            self.written = None

    def remember_write(self, body: dict[str, Any] | None) -> None:
        """Our own write returned ``body`` (the job as stored): read it until the watch catches up."""
        self.written = trimmed(body) if body is not None else None


class Controller:
    def __init__(self, kube: Kube, settings: OperatorSettings, views: Views | None = None):
        self.kube = kube
        self.settings = settings
        self.views = views or Views(pods={}, export_jobs={})
        """The informers (set by the runner once they exist)."""
        self.monitor: ProgressMonitor | None = None
        self.flavors = Lookup(kube, "ResourceFlavor", flavor)
        self.priorities = Lookup(kube, "PriorityClass", lambda pc: int(pc.get("value") or 0))
        self.serving = ServingLookup(kube)
        self.jobs: dict[str, _JobState] = {}
        self.bodies = Bodies()
        self.queue: WorkQueue[Key] = WorkQueue(
            lambda failures: pacing.retry_delay(failures, settings.retry_base_seconds, settings.retry_max_seconds)
        )
        self._passes: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self.active = asyncio.Event()
        """Set while this replica may act: always without leader election, else while it leads (then the
        workers stop taking keys when it stops, and the queue keeps them for when it leads again)."""
        if not settings.leader_election:
            self.active.set()

    def lead(self, leading: bool) -> None:
        """The elector's verdict. A follower's queue keeps every key its watches brought (its workers
        wait), so a new leader starts on every job at once."""
        if leading:
            self.active.set()
        else:
            self.active.clear()

    def _pass_slot(self) -> asyncio.Semaphore:
        """At most ``max_concurrent_passes`` jobs reconcile at once (the pool's size; also a bound for
        passes run outside it). A pass holds its plan (whole manifests) and its requests until they are
        answered; without a bound, a thousand new jobs all planning at once held ~8,000 pod manifests
        and ~3,000 requests queued behind the connection pool, for no gain in speed."""
        loop = asyncio.get_running_loop()
        if self._passes is None or self._passes[0] is not loop:
            self._passes = (loop, asyncio.Semaphore(self.settings.max_concurrent_passes))
        return self._passes[1]

    # --- what the watches report ------------------------------------------------------------------

    def job_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """The job watch reported ``body`` (``event_type`` DELETED: it is gone)."""
        meta = body.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        key = f"{namespace}/{name}"
        if event_type == "DELETED":
            self.bodies.pop(key)
        else:
            self.bodies.put(key, body)
            state = self.jobs.get(key)
            if state is not None:
                state.echoed(body)
        self._queue_pass(namespace, name)

    def child_event(self, namespace: str, job: str, key: str, uid: str, changed: bool) -> None:
        """An informer reported the child ``key`` (``Kind/name`` with ``uid``) of ``job``: the
        informer now holds it, so an unechoed write of it ends. A changed record queues the job."""
        state = self.jobs.get(f"{namespace}/{job}")
        if state is not None:
            state.recent.seen(key, uid)
        if changed and f"{namespace}/{job}" in self.bodies:
            self._queue_pass(namespace, job)

    def _queue_pass(self, namespace: str, name: str) -> None:
        state = self.jobs.get(f"{namespace}/{name}")
        since = time.monotonic() - state.last_pass if state is not None else float("inf")
        self.queue.add_after(("job", namespace, name), pacing.settle_delay(True, since, self.settings.settle_seconds))

    # --- the pool ---------------------------------------------------------------------------------

    async def work(self, synced: list[asyncio.Event]) -> None:
        """Run :attr:`OperatorSettings.max_concurrent_passes` workers until cancelled or the queue shuts
        down; none starts before every event in ``synced`` (the informers' initial lists) is set."""
        for event in synced:
            await event.wait()
        await asyncio.gather(*(self._worker() for _ in range(self.settings.max_concurrent_passes)))

    async def _worker(self) -> None:
        while True:
            await self.active.wait()
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            if not self.active.is_set():  # paused while this worker waited for a key: it waits for the next leader
                self.queue.done(key)
                self.queue.add(key)
                continue
            try:
                if key[0] == "job":
                    await self._job_pass(key[1], key[2])
                else:
                    await self._progress_poll(key[1], key[2])
            except NotLeader as exc:
                log.info("%s %s/%s stopped: %s", key[0], key[1], key[2], exc)
            except Exception:
                log.exception("%s %s/%s failed", key[0], key[1], key[2])
            finally:
                self.queue.done(key)
            if not self.active.is_set():  # paused while this key was out: take it up again on resuming
                self.queue.add(key)

    async def _job_pass(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        live = self.bodies.get(key)
        if live is None:  # deleted (or never seen): nothing to do
            self.forget(namespace, name)
            return
        state = self.jobs.get(key)
        if state is None:
            state = self.jobs[key] = _JobState()
        delay = await self.reconcile_once(namespace, name, state, live, self.views)
        state.last_pass = time.monotonic()
        if delay is None:  # gone or being deleted: forget it (the watch brings it back if it returns)
            self.forget(namespace, name)
            return
        self.queue.add_after(
            ("job", namespace, name), pacing.sleep_before_next_pass(delay, self.settings.resync_seconds)
        )
        if state.phase == "Running" and self.monitor is not None and self.monitor.start(key):
            self.queue.add_after(("progress", namespace, name), self.settings.monitor_seconds)

    async def _progress_poll(self, namespace: str, name: str) -> None:
        """One poll of a Running job's chief; the next one is queued while the job stays Running."""
        key = f"{namespace}/{name}"
        state = self.jobs.get(key)
        body = state.freshest(self.bodies.get(key)) if state is not None else None
        assert self.monitor is not None
        if state is None or body is None or (body.get("status") or {}).get("phase") != "Running":
            self.monitor.stop(key)
            return
        await self.monitor.poll(namespace, name, body, self.views)
        self.queue.add_after(("progress", namespace, name), self.settings.monitor_seconds)

    def forget(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        self.jobs.pop(key, None)
        for what in ("job", "progress"):
            self.queue.discard((what, namespace, name))
        if self.monitor is not None:
            self.monitor.stop(key)
        metrics.set_phase(key, None)
        metrics.forget_job(key)

    @staticmethod
    def _job(body: dict[str, Any]) -> PSTrainingJob | str:
        """The parsed spec, or why it cannot be parsed. Parsed at every pass, not kept: it takes ~50 µs
        and weighs ~12 KB, which a thousand jobs would hold for nothing."""
        try:
            return parse_job(body)
        except ValueError as exc:
            return str(exc)

    async def reconcile_once(
        self, namespace: str, name: str, state: _JobState, live: dict[str, Any], views: Views
    ) -> float | None:
        """One pass; returns seconds until the next one, or None when the job is gone."""
        async with self._pass_slot():
            return await self._timed_pass(namespace, name, state, live, views)

    async def _timed_pass(
        self, namespace: str, name: str, state: _JobState, live: dict[str, Any], views: Views
    ) -> float | None:
        started = time.monotonic()
        result = "ok"
        try:
            return await self._reconcile(namespace, name, state, live, views)
        except ApiError as exc:
            result = "error"
            log.warning("reconciling %s/%s: %s", namespace, name, exc)
            return self._backoff(namespace, name)
        except NotLeader as exc:  # leadership lapsed mid-pass: the new leader takes the job from here
            result = "not_leader"
            log.info("reconciling %s/%s stopped: %s", namespace, name, exc)
            return self._backoff(namespace, name)
        except Exception:
            result = "error"
            log.exception("reconciling %s/%s failed", namespace, name)
            return self._backoff(namespace, name)
        finally:
            metrics.RECONCILES.labels(result=result).inc()
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)

    def _backoff(self, namespace: str, name: str) -> float:
        """A failed pass (a child not created, or an error): the job's next pass comes after the
        queue's per-key back-off, which grows with the failures in a row."""
        return self.queue.add_rate_limited(("job", namespace, name))

    def _observe(
        self,
        namespace: str,
        name: str,
        state: _JobState,
        body: dict[str, Any],
        current: PSTrainingJobStatus,
        views: Views,
        kueue: tuple[dict[str, Flavor], dict[str, int]],
    ) -> Observed:
        """The job's children as the informers and our unechoed writes show them (``kueue``: the
        ResourceFlavors and PriorityClasses a queued job needs, by name)."""
        job_key = (namespace, name)
        export = preflight = None
        if current.phase == "Exporting":
            export = state.recent.export_job(views.job_export_jobs(job_key), names.export_job_name(name))
        if current.phase in (None, "Pending"):
            preflight = state.recent.export_job(views.job_export_jobs(job_key), names.preflight_job_name(name))
        existing: set[str] = set()
        if current.phase not in ("Succeeded", "Failed"):
            existing = state.recent.existing(views.job_children(job_key), body["metadata"].get("uid"))
        workload = state.recent.workload(views.job_workloads(job_key), wlm.workload_name(name))
        return observe(
            state.recent.pods(views.job_pods(job_key)), export, existing, preflight, workload, kueue[0], kueue[1]
        )

    async def _kueue_lookups(
        self, namespace: str, name: str, body: Mapping[str, Any], views: Views
    ) -> tuple[dict[str, Flavor], dict[str, int]]:
        """The ResourceFlavors the job's admitted Workload names, and the PriorityClass its spec names."""
        if views.workloads is None:
            return {}, {}
        wl = next((w for w in views.job_workloads((namespace, name)) if w.name == wlm.workload_name(name)), None)
        flavors = await self.flavors.get(f for _, names in (wl.flavors if wl else ()) for f in names)
        policy = ((body.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
        pc = policy.get("priorityClass")
        priorities = await self.priorities.get([pc] if wl is None and isinstance(pc, str) else [])
        return flavors, priorities

    @staticmethod
    def _record(state: _JobState, applied: ExecutionResult) -> None:
        """Our own writes count until the watches echo them."""
        for record in applied.created:
            state.recent.record_create(record)
        for uid in applied.deleted:
            state.recent.record_delete(uid)
        if applied.written is not None:
            state.remember_write(applied.written)

    async def _reconcile(
        self, namespace: str, name: str, state: _JobState, live: dict[str, Any], views: Views
    ) -> float | None:
        """Observe, decide (:func:`.reconcile.job_pass.decide`), apply, remember."""
        body = state.freshest(live)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        current = parse_status(body.get("status"))
        state.recent.expire()
        kueue = await self._kueue_lookups(namespace, name, body, views)
        job = self._job(body)
        observed = self._observe(namespace, name, state, body, current, views, kueue)
        if isinstance(job, PSTrainingJob) and job.spec.serving is not None and current.phase == "Succeeded":
            observed = replace(observed, serving=await self.serving.get(namespace, isvc_m.serving_name(job)))
        inp = PassInput(
            job=job,
            generation=body["metadata"].get("generation"),
            resource_version=_rv(body),
            status=current,
            observed=observed,
            now=now(),
            clock=time.monotonic(),
            memory=state.memory,
        )
        plan = job_pass.decide(inp, self.settings)
        if plan.validate:
            plan = job_pass.admitted(plan, inp, await dry_run(self.kube, plan.validate))
        applied = await execute(self.kube, body, current, plan)
        self._record(state, applied)
        outcome = applied.outcome()
        state.memory, after = job_pass.remember(state.memory, inp, plan, outcome, time.monotonic(), self.settings)
        if not outcome.conflict and not outcome.gone:
            state.phase = plan.status.phase
            metrics.record_pass(f"{namespace}/{name}", plan, outcome, (body["spec"].get("training") or {}).get("steps"))
        if after == "gone":
            return None
        if after == "now":
            return 0.0
        if after == "backoff":
            return self._backoff(namespace, name)
        self.queue.forget(("job", namespace, name))
        return after
