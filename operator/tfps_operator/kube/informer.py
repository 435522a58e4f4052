"""A lean list-and-watch of one kind of the operator's children, kept as small reduced records.

Each object is reduced as it arrives (:func:`~tfps_operator.reconcile.observed.pod_obs` and the like)
and only the record is kept, keyed by (namespace, PSTrainingJob name) from its ``tfps.dev/job-name``
label, then by object name. The raw objects are dropped at once: nothing else per child stays in the
process. The list is paged, so a restart over thousands of pods never holds them all at once.

:attr:`Informer.synced` is set once every served namespace has been listed: the workers start no pass
before all informers are synced, so a restarted operator sees every child before its first decision.
A watch that ends or loses its connection is resumed from its last resourceVersion (bookmarks keep it
fresh); one the API server no longer serves (410 Gone) or refuses starts over with a list, reporting every
record that changed or vanished in between (``tfps_watch_relists_total``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from .. import metrics
from ..manifests.labels import JOB_NAME
from .client import TIMEOUT_STATUS, UNREACHABLE_STATUS, ApiError, Kube

log = logging.getLogger(__name__)

R = TypeVar("R")
JobKey = tuple[str, str]

PAGE = 500
"""Objects per list page."""
WATCH_SECONDS = 300
"""How long the API server keeps one watch open before it ends it (a new one resumes)."""
RETRY_SECONDS = (1.0, 30.0)
"""Back-off bounds between attempts after an error (doubling)."""


class OnChange(Protocol):
    def __call__(self, namespace: str, job: str, key: str, uid: str, changed: bool) -> None:
        """``key`` (``Kind/name``, with ``uid``) of ``job`` was reported by the watch; ``changed``: its
        record is new, different or gone (False: the object changed in a way the record does not show)."""


class Informer(Generic[R]):
    """The records of one kind, by job (see the module docstring). A mapping-like view for
    :class:`~tfps_operator.kube.watched.Views`: ``get(job_key, default)``."""

    def __init__(
        self,
        kube: Kube,
        kind: str,
        namespaces: Iterable[str],
        label_selector: str,
        reduce: Callable[[dict[str, Any]], R],
        on_change: OnChange,
    ):
        self.kube, self.kind, self.selector = kube, kind, label_selector
        self.namespaces: tuple[str | None, ...] = tuple(namespaces) or (None,)
        self.reduce, self.on_change = reduce, on_change
        self.store: dict[JobKey, dict[str, R]] = {}
        self._listed: set[str | None] = set()
        self.synced = asyncio.Event()

    def get(self, key: JobKey, default: Iterable[R] = ()) -> Iterable[R]:
        records = self.store.get(key)
        return list(records.values()) if records else default

    def __len__(self) -> int:
        return sum(len(v) for v in self.store.values())

    async def run(self) -> None:
        """List and watch every served namespace until cancelled."""
        await asyncio.gather(*(self._run(ns) for ns in self.namespaces))

    async def _run(self, namespace: str | None) -> None:
        delay = RETRY_SECONDS[0]
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    rv = await self._list(namespace)
                    self._listed.add(namespace)
                    if len(self._listed) == len(self.namespaces):
                        self.synced.set()
                async for event in self.kube.watch(self.kind, namespace, self.selector, rv, WATCH_SECONDS):
                    rv = self._apply(event) or rv
                    delay = RETRY_SECONDS[0]
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, _Expired) or (isinstance(exc, ApiError) and exc.status == 410):
                    log.info("watching %s in %s: expired (410 Gone); listing again", self.kind, namespace or "*")
                    self._relisting("Expired")
                    rv = None
                    continue
                log.warning(
                    "watching %s: %s", self.kind, exc if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
                )
                if isinstance(exc, ApiError) and exc.status not in (UNREACHABLE_STATUS, TIMEOUT_STATUS):
                    self._relisting("Error")  # refused (403, 500...): start over with a list, after the pause
                    rv = None
                # else no answer, or the connection dropped (the API server restarting, unreachable): resume
                # from the last resourceVersion, as client-go's reflector does, so that an API server's restart
                # costs one watch per kind and not a list of every child; a version the API server no longer
                # serves comes back as 410 Gone
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_SECONDS[1])

    def _relisting(self, reason: str) -> None:
        metrics.WATCH_RELISTS.labels(kind=self.kind, reason=reason).inc()

    async def _list(self, namespace: str | None) -> str:
        """Replace this namespace's records with a fresh list; returns the list's resourceVersion."""
        seen: set[tuple[JobKey, str]] = set()
        cont: str | None = None
        while True:
            page = await self.kube.list_page(self.kind, namespace, self.selector, PAGE, cont)
            for obj in page.get("items") or []:
                meta = obj.get("metadata") or {}
                job = (meta.get("labels") or {}).get(JOB_NAME)
                if job:
                    seen.add(((meta.get("namespace", ""), job), meta.get("name", "")))
                    self._upsert(obj)
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                rv: str = (page.get("metadata") or {}).get("resourceVersion") or ""
                break
        gone = [
            (key, name)
            for key, records in self.store.items()
            if namespace is None or key[0] == namespace
            for name in records
            if (key, name) not in seen
        ]
        for key, name in gone:
            self._remove(key, name)
        return rv

    def _apply(self, event: Mapping[str, Any]) -> str | None:
        """One watch event; returns the resourceVersion it carries."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Expired
            raise ApiError(
                int(obj.get("code") or 500), obj.get("reason") or "", obj.get("message") or "", "WATCH", self.kind
            )
        meta = obj.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_NAME)
        if job and kind == "DELETED":
            self._remove((meta.get("namespace", ""), job), meta.get("name", ""))
        elif job and kind in ("ADDED", "MODIFIED"):
            self._upsert(obj)
        return meta.get("resourceVersion")

    def _upsert(self, obj: Mapping[str, Any]) -> None:
        """Keep the record of ``obj`` (which carries the job label: the watch selects on it)."""
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        job = meta["labels"][JOB_NAME]
        record = self.reduce(dict(obj))
        records = self.store.setdefault((ns, job), {})
        changed = records.get(name) != record
        records[name] = record
        self.on_change(ns, job, f"{self.kind}/{name}", meta.get("uid", ""), changed)

    def _remove(self, key: JobKey, name: str) -> None:
        records = self.store.get(key)
        record = records.pop(name, None) if records is not None else None
        if records is not None and not records:
            del self.store[key]
        if record is not None:
            self.on_change(key[0], key[1], f"{self.kind}/{name}", getattr(record, "uid", ""), True)


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""
