"""Cluster-scoped objects a pass needs by name (Kueue's ResourceFlavors, PriorityClasses): read when
first needed and kept, reduced, for a short while. They change rarely and are few; a watch of each
kind would cost more than the reads."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ..reconcile.observed import ServingObs, inference_service_obs
from .client import ApiError, Kube

R = TypeVar("R")

TTL_SECONDS = 30.0
"""How long a read (or an absence) is trusted."""


class Lookup(Generic[R]):
    """Objects of one cluster-scoped ``kind`` by name, reduced by ``reduce``."""

    def __init__(self, kube: Kube, kind: str, reduce: Callable[[dict[str, Any]], R], ttl: float = TTL_SECONDS):
        self.kube, self.kind, self.reduce, self.ttl = kube, kind, reduce, ttl
        self._seen: dict[str, tuple[float, R | None]] = {}

    async def get(self, names: Iterable[str]) -> dict[str, R]:
        """Those of ``names`` that exist (and that the operator may read)."""
        now = time.monotonic()
        out: dict[str, R] = {}
        for name in sorted(set(names)):
            hit = self._seen.get(name)
            if hit is None or now - hit[0] > self.ttl:
                try:
                    raw = await self.kube.get(self.kind, "", name)
                except ApiError as exc:
                    if exc.status != 403:
                        raise
                    raw = None  # not allowed: reported by the pass as unreadable
                hit = self._seen[name] = (now, self.reduce(raw) if raw is not None else None)
            if hit[1] is not None:
                out[name] = hit[1]
        return out


class ServingLookup:
    """The InferenceService a served job names: whether KServe's API is served (discovery, kept for
    :data:`TTL_SECONDS`), then the object itself (read in each pass that asks: a Succeeded job's passes are
    few, and the one after the operator's own write must see it)."""

    KIND = "InferenceService"

    def __init__(self, kube: Kube, ttl: float = TTL_SECONDS):
        self.kube, self.ttl = kube, ttl
        self._installed: tuple[float, bool] | None = None

    async def get(self, namespace: str, name: str) -> ServingObs:
        now = time.monotonic()
        try:
            if self._installed is None or now - self._installed[0] > self.ttl:
                self._installed = (now, await self.kube.served(self.KIND))
            if not self._installed[1]:
                return ServingObs(installed=False)
            raw = await self.kube.get(self.KIND, namespace, name)
        except ApiError as exc:
            if exc.status not in (403, 401):
                raise
            return ServingObs(installed=True, unreadable=exc.message)
        return ServingObs(installed=True, isvc=inference_service_obs(raw) if raw is not None else None)
