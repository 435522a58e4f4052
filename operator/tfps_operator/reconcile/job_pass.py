"""One pass over one job, decided whole: the state machine's plan (:mod:`.machine`) with the rules that
belong to a pass around it, and what a pass leaves to the next one.

The rules of a pass:

* a brand-new job's children go before its first status write, which already reports them: the state
  machine decides again with those children as just created (:func:`.observed.with_created`), and the
  plan says :attr:`~.plan.Plan.children_first`;
* a change that only moves counts or wording waits (:func:`.pacing.progress_wait`) and goes with the
  next write;
* creates the API server refused are reported by the next pass (condition Created=False/CreateFailed and
  a Warning Event, once per message), which then waits the queue's back-off before creating again;
* a status write refused for a stale resourceVersion: the next pass reads the job once, unless the
  watch has delivered a newer body by then, and the pass after decides from it.

What carrying out a plan found (:class:`~.plan.Outcome`) comes back through :func:`remember` as
:class:`Memory`, which the next pass reads: the I/O layer decides nothing about it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from ..api.models import PSTrainingJob, PSTrainingJobStatus
from ..settings import OperatorSettings
from . import admission, pacing, writes
from .machine import creation_failed, invalid_spec, reconcile
from .observed import Observed, with_created
from .plan import ApplyInferenceService, Create, Outcome, Plan, ReadJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Memory:
    """What one job's passes carry from one to the next (kept by the controller, made by :func:`remember`)."""

    last_status_write: float = float("-inf")
    """The pass clock's reading at our last status write."""
    progress_writes: int = 0
    """Progress-only status writes since the last significant one: each doubles the wait for the next."""
    refused_creates: Mapping[str, str] = field(default_factory=dict)
    """Creates the API server refused (``Kind/name`` -> its message), for the next pass to report."""
    refused_at: int | None = None
    """The job's resourceVersion at which our status write was refused (a stale body)."""


@dataclass(frozen=True)
class PassInput:
    """What a pass decides from."""

    job: PSTrainingJob | str
    """The parsed job, or why its spec cannot be parsed."""
    generation: int | None
    resource_version: int
    """Of the body the pass read (etcd's revision; -1 when unknown)."""
    status: PSTrainingJobStatus
    observed: Observed
    now: datetime
    clock: float
    """A monotonic clock's reading (the spacing of writes)."""
    memory: Memory = field(default_factory=Memory)


NextPass = float | Literal["now", "backoff", "gone"]
"""After a pass: seconds until the next one (the pass succeeded: the job's back-off starts afresh), or
``now`` (the next pass must read what this one found), ``backoff`` (after the queue's per-job back-off,
which grows with each in a row), ``gone`` (the job no longer exists: forget it)."""


def decide(inp: PassInput, settings: OperatorSettings) -> Plan:
    """The plan of one pass (its :attr:`~.plan.Plan.validate` children still to be dry-run: :func:`admitted`)."""
    mem = inp.memory
    if mem.refused_at is not None and inp.resource_version <= mem.refused_at:
        return Plan(status=inp.status, actions=[ReadJob()])
    if isinstance(inp.job, str):
        return invalid_spec(inp.status, inp.generation, inp.job, inp.now)
    plan = reconcile(inp.job, inp.status, inp.observed, inp.now, settings.build)
    if mem.refused_creates:
        _report_refused(plan, inp)
    elif inp.status.phase is None and plan.creates():
        plan = _children_first(plan, inp, settings)
    elif writes.progress_only(inp.status, plan):
        wait = pacing.progress_wait(
            mem.last_status_write,
            mem.progress_writes,
            inp.clock,
            settings.status_interval_seconds,
            settings.status_interval_max_seconds,
        )
        if wait > 0:  # only progress moved: write it with the next change, or in `wait` seconds
            return Plan(status=inp.status, requeue_after=pacing.deferred_write_delay(wait, plan.requeue_after))
        plan.progress_only = True
    plan.export_outcomes = export_outcomes(inp.status, plan.status)
    return plan


def _children_first(first: Plan, inp: PassInput, settings: OperatorSettings) -> Plan:
    """A brand-new job: its children, then one status write that reports them (decided again with the
    children as just created; nothing is counted yet that would have to be durable first)."""
    assert isinstance(inp.job, PSTrainingJob)
    created = with_created(inp.observed, [c.manifest for c in first.creates()])
    then = reconcile(inp.job, inp.status, created, inp.now, settings.build)
    keys = {getattr(a, "key", None) for a in first.actions}
    return replace(
        then,
        actions=[*first.actions, *(a for a in then.actions if getattr(a, "key", None) not in keys)],
        validate=first.validate,
        children_first=True,
        job_restarted=first.job_restarted or then.job_restarted,
    )


def _report_refused(plan: Plan, inp: PassInput) -> None:
    """The last pass's creates were refused: report them (once per message) and create nothing until
    the back-off has passed."""
    plan.actions = [a for a in plan.actions if not isinstance(a, (Create, ApplyInferenceService))]
    plan.validate = []
    _, event = creation_failed(plan.status, inp.generation, dict(inp.memory.refused_creates), inp.now)
    if event is not None:
        plan.events.append(event)
    plan.backoff = True


def admitted(plan: Plan, inp: PassInput, answers: list[tuple[dict[str, Any], int, str]]) -> Plan:
    """``plan`` if the API server's dry-run ``answers`` (``(manifest, status, message)`` of each error)
    refuse none of its :attr:`~.plan.Plan.validate` children, else the refusal's plan."""
    refusals = {admission.where(m): message for m, code, message in answers if admission.is_refusal(code, message)}
    if not refusals:
        return plan
    log.warning(
        "%s: the API server refuses children of a new run: %s",
        plan.validate[0]["metadata"]["namespace"],
        "; ".join(f"{k}: {v}" for k, v in sorted(refusals.items())),
    )
    verdict = admission.verdict(inp.status, inp.generation, refusals, inp.now)
    verdict.export_outcomes = export_outcomes(inp.status, verdict.status)
    return verdict


def remember(
    memory: Memory, inp: PassInput, plan: Plan, outcome: Outcome, clock: float, settings: OperatorSettings
) -> tuple[Memory, NextPass]:
    """What the next pass must know of this one, and when it comes."""
    if outcome.gone:
        return memory, "gone"
    mem = replace(memory, refused_at=inp.resource_version if outcome.conflict else None)
    if outcome.status_written:
        mem = replace(
            mem,
            last_status_write=clock,
            progress_writes=pacing.progress_writes_after_write(memory.progress_writes, plan.progress_only),
        )
    if outcome.create_failures:
        mem = replace(mem, refused_creates=dict(outcome.create_failures))
    elif plan.backoff and not outcome.conflict:  # reported
        mem = replace(mem, refused_creates={})
    if outcome.conflict or outcome.create_failures or any(isinstance(a, ReadJob) for a in plan.actions):
        return mem, "now"
    if plan.backoff:
        return mem, "backoff"
    return mem, pacing.next_pass(bool(plan.actions), plan.requeue_after, settings.resync_seconds)


def export_outcomes(before: PSTrainingJobStatus, after: PSTrainingJobStatus) -> list[tuple[str, str]]:
    """(format, passed|failed) of every artifact whose outcome ``after`` records and ``before`` did not:
    what to count when a status is written (an operator restart reads the stored status as ``before``,
    so nothing is counted twice)."""

    def seen(st: PSTrainingJobStatus) -> set[tuple[str, str | None, str]]:
        ex = st.export
        if ex is None:
            return set()
        return {(a.format, a.quantization, "passed") for a in ex.artifacts} | {
            (f.format, f.quantization, "failed") for f in ex.failed
        }

    old = seen(before)
    return sorted((fmt, result) for fmt, q, result in seen(after) - old)
