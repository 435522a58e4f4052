"""Carry out a :class:`~tfps_operator.reconcile.plan.Plan`: status first, then children, then Events (a
brand-new job's children before its status); report what was found as an
:class:`~tfps_operator.reconcile.plan.Outcome`. Nothing here decides: a refused write ends the
plan, and the next pass decides what to do about it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..api.models import PSTrainingJobStatus
from ..reconcile.plan import (
    ApplyInferenceService,
    Create,
    Delete,
    DeleteOwner,
    DeletePods,
    Event,
    Outcome,
    PatchWorkload,
    Plan,
    ReadJob,
)
from ..reconcile.writes import status_write
from .client import ApiError, ChildConflict, Kube
from .watched import ChildRecord, child_record

log = logging.getLogger(__name__)

CONCURRENCY = 16
"""Child requests in flight at once for one job."""


@dataclass
class ExecutionResult:
    """What carrying out a plan did: whether the status was written, the children created and deleted,
    and which creates failed."""

    status_written: bool = False
    conflict: bool = False
    """The job changed under us (status write refused by resourceVersion)."""
    gone: bool = False
    """The job was not found (its status write or :class:`ReadJob`)."""
    create_failures: dict[str, str] = field(default_factory=dict)
    resource_version: str | None = None
    written: dict[str, Any] | None = None
    """The job as our status write (or :class:`ReadJob`) returned it (newer than the body we read,
    until the watch echoes it)."""
    created: list[ChildRecord] = field(default_factory=list)
    """Records of the children created (or adopted), made from the API server's answers at once: a
    pass holds a few small records through its status write and Events, not whole objects."""
    deleted: list[str] = field(default_factory=list)
    """uids of the children deleted now."""

    def outcome(self) -> Outcome:
        return Outcome(self.status_written, self.conflict, self.gone, dict(self.create_failures))


async def execute(kube: Kube, body: Mapping[str, Any], current: PSTrainingJobStatus, plan: Plan) -> ExecutionResult:
    """Write the status (when it changed, conditionally on the body's resourceVersion), then the child
    changes, then the Events; with :attr:`~Plan.children_first`, the children first, and the status
    and Events only if every create succeeded. A refused status write stops there (``conflict``)."""
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    out = ExecutionResult(resource_version=meta.get("resourceVersion"))
    if any(isinstance(a, ReadJob) for a in plan.actions):
        out.written = await kube.get("PSTrainingJob", ns, name)
        out.gone = out.written is None
        return out
    if plan.children_first:
        await _children(kube, ns, name, plan, out)
        if out.create_failures or not await _status(kube, ns, name, current, plan, out):
            return out
    else:
        if not await _status(kube, ns, name, current, plan, out):
            return out
        await _children(kube, ns, name, plan, out)
    for action in plan.actions:
        if isinstance(action, DeleteOwner) and await kube.delete("PSTrainingJob", ns, name, action.uid):
            log.info("deleted PSTrainingJob %s/%s (ttlSecondsAfterFinished)", ns, name)
    await post_events(kube, body, plan.events)
    return out


async def _status(
    kube: Kube, ns: str, name: str, current: PSTrainingJobStatus, plan: Plan, out: ExecutionResult
) -> bool:
    """Write the plan's status when it changed; False when the write was refused (stale or gone)."""
    patch = status_write(current, plan.status)
    if patch is None:
        return True
    try:
        updated = await kube.patch_status(ns, name, patch, out.resource_version)
    except ApiError as exc:
        if exc.status == 409:
            out.conflict = True
            return False
        if exc.status == 404:
            out.gone = True
            return False
        raise
    out.status_written = True
    out.written = updated
    out.resource_version = updated["metadata"].get("resourceVersion")
    return True


async def _children(kube: Kube, ns: str, name: str, plan: Plan, out: ExecutionResult) -> None:
    """The plan's child changes; they are independent of each other: sent concurrently (bounded)."""
    limit = asyncio.Semaphore(CONCURRENCY)
    made: list[str] = []
    adopted: list[str] = []

    async def one(action: Create | Delete | DeletePods | PatchWorkload | ApplyInferenceService) -> None:
        async with limit:
            if isinstance(action, ApplyInferenceService):
                await _apply(kube, ns, name, action, out)
            elif isinstance(action, PatchWorkload):
                try:
                    await kube.patch_status(
                        ns, action.name, action.patch["status"], action.resource_version, "Workload"
                    )
                    log.info("%s/%s: patched the status of %s", ns, name, action.key)
                except ApiError as exc:
                    if exc.status not in (404, 409):  # gone, or Kueue wrote first: the next pass decides again
                        raise
            elif isinstance(action, DeletePods):
                await kube.delete_collection("Pod", ns, action.label_selector, action.field_selector)
                # The selectors match exactly the observed pods the action stands for.
                out.deleted.extend(d.uid for d in action.pods if d.uid)
                log.info("deleted %d pods of %s in %s", len(action.pods), name, ns)
            elif isinstance(action, Create):
                try:
                    obj, created = await kube.create_or_adopt(action.manifest)
                    out.created.append(child_record(obj))
                    (made if created else adopted).append(action.key)
                except ApiError as exc:
                    log.warning("could not create %s in %s: %s", action.key, ns, exc.message)
                    out.create_failures[action.key] = exc.message
                except ChildConflict as exc:
                    out.create_failures[action.key] = str(exc)
            elif await kube.delete(action.kind, ns, action.name, action.uid, action.grace_seconds):
                if action.uid:
                    out.deleted.append(action.uid)
                log.info("deleted %s in %s", action.key, ns)

    await asyncio.gather(
        *(
            one(a)
            for a in plan.actions
            if isinstance(a, (Create, Delete, DeletePods, PatchWorkload, ApplyInferenceService))
        )
    )
    for verb, keys in (("created", made), ("adopted", adopted)):
        if keys:  # one line per pass, not per child
            log.info("%s/%s: %s %s", ns, name, verb, ", ".join(sorted(keys)))


async def _apply(kube: Kube, ns: str, name: str, action: ApplyInferenceService, out: ExecutionResult) -> None:
    """Create the InferenceService or patch it at the version read; a 409 (created or changed meanwhile) is
    left to the next pass, which reads it again. A refusal is reported like a refused create."""
    try:
        if action.resource_version is None:
            await kube.create(action.manifest)
            log.info("%s/%s: created %s", ns, name, action.key)
        else:
            await kube.merge_patch(action.manifest, action.resource_version)
            log.info("%s/%s: updated %s", ns, name, action.key)
    except ApiError as exc:
        if exc.status == 409:
            return
        log.warning("could not write %s in %s: %s", action.key, ns, exc.message)
        out.create_failures[action.key] = exc.message


async def dry_run(kube: Kube, manifests: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int, str]]:
    """Dry-run creates of ``manifests`` (bounded concurrency); ``(manifest, status, message)`` of each one the
    API server answered with an error (whether that is a refusal is the reconciler's call)."""
    limit = asyncio.Semaphore(CONCURRENCY)
    out: list[tuple[dict[str, Any], int, str]] = []

    async def one(manifest: dict[str, Any]) -> None:
        async with limit:
            try:
                await kube.dry_run_create(manifest)
            except ApiError as exc:
                out.append((manifest, exc.status, exc.message))

    await asyncio.gather(*(one(m) for m in manifests))
    return out


async def post_events(kube: Kube, body: Mapping[str, Any], events: list[Event]) -> None:
    await asyncio.gather(*(kube.event(body, ev.type, ev.reason, ev.message) for ev in events))
