"""Kueue: whether a queued job may run now, where its pods go, and what its Workload must be told.

A job that names a LocalQueue (and an operator that integrates with Kueue) runs only while Kueue
admits its Workload: until then, and again after Kueue evicts it, the job is Suspended (its pods are
deleted, the chief first so that it saves a checkpoint; the next admission resumes from it). Admitted,
its pods get the node labels and tolerations of the flavors Kueue assigned to their pod set. Evicted,
its admission is given back once its pods are gone, so Kueue can queue it again; finished, its Workload
is marked Finished, so the quota is released.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .observed import Flavor, Observed, PodObs, WorkloadObs

WAITING = "WaitingForAdmission"
EVICTED = "Evicted"
ADMITTED = "Admitted"


@dataclass(frozen=True)
class Gate:
    """Kueue's verdict on a queued job: whether it may run, why not, and per pod set what its pods get."""

    admitted: bool
    reason: str
    message: str
    placement: Mapping[str, Flavor] = field(default_factory=dict)
    workers: int | None = None
    """Workers admitted (partial admission may admit fewer than asked for); None: not queued, or not said."""


def gate(workload_name: str, queue: str, wl: WorkloadObs | None, flavors: Mapping[str, Flavor]) -> Gate:
    """The verdict from the job's Workload ``wl`` (None: not created yet) and the flavors it names."""
    if wl is None or wl.deleting:
        return Gate(False, WAITING, f"Workload {workload_name} in LocalQueue {queue}: being created")
    evicted = f"evicted by Kueue ({wl.evicted_reason}: {wl.evicted_message})" if wl.evicted_reason else ""
    if evicted and wl.quota_reserved:
        return Gate(False, EVICTED, f"Workload {wl.name} {evicted}")
    if not wl.admitted:
        why = wl.message or "not admitted yet"
        again = f", queued again after it was {evicted}" if evicted else ""
        return Gate(False, WAITING, f"Workload {wl.name} waits in LocalQueue {queue}{again}: {why}")
    placement: dict[str, Flavor] = {}
    for podset, names in wl.flavors:
        missing = [n for n in names if n not in flavors]
        if missing:
            return Gate(
                False,
                WAITING,
                f"Workload {wl.name} is admitted, but ResourceFlavor {', '.join(missing)} cannot be read",
            )
        placement[podset] = merged(flavors[n] for n in names)
    workers = dict(wl.counts).get("worker")
    return Gate(True, ADMITTED, f"Workload {wl.name} admitted by ClusterQueue {wl.cluster_queue}", placement, workers)


def merged(flavors: Iterable[Flavor]) -> Flavor:
    """One pod set's flavors (one per resource) as one: their node labels and tolerations together."""
    node_labels: dict[str, str] = {}
    tolerations: list[Mapping[str, Any]] = []
    for f in flavors:
        node_labels.update(f.node_labels)
        tolerations.extend(t for t in f.tolerations if t not in tolerations)
    return Flavor(node_labels=node_labels, tolerations=tuple(tolerations))


def may_release(wl: WorkloadObs | None, obs: Observed) -> bool:
    """An evicted Workload that still holds its quota gives it back once no pod of the job runs
    (trainer, export or pre-flight pods alike)."""
    if wl is None or not wl.evicted_reason or not wl.quota_reserved:
        return False
    return not any(p.phase in ("Pending", "Running", "Unknown") for p in _all_pods(obs))


def must_finish(wl: WorkloadObs | None) -> bool:
    """A finished job's Workload that Kueue does not know is finished yet."""
    return wl is not None and not wl.finished and not wl.deleting


def _all_pods(obs: Observed) -> tuple[PodObs, ...]:
    return (*obs.pods, *obs.export_pods, *obs.preflight_pods)
