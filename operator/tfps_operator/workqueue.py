"""A keyed work queue in the shape of client-go's ``workqueue``: watches add keys, a fixed pool of
workers takes them.

* **De-duplicating**: a key is queued at most once; adding a queued key again does nothing.
* **One worker per key**: a key being processed is not handed out again until :meth:`WorkQueue.done`;
  added meanwhile, it is queued again when that worker is done (nothing is lost, nothing runs twice).
* **Delayed adds**: :meth:`WorkQueue.add_after` queues a key once its time comes; of several delays
  for one key the earliest counts, and an immediate add overtakes them all.
* **Per-key rate limit**: :meth:`WorkQueue.add_rate_limited` delays a key by ``backoff(failures)``,
  the count of its failures in a row, until :meth:`WorkQueue.forget` resets it.

Plumbing only: when to look at a key again is decided by the caller (the rules are in
:mod:`tfps_operator.reconcile.pacing`); ``backoff`` is one of them.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down: the worker that waited on :meth:`WorkQueue.get` stops."""


class WorkQueue(Generic[K]):
    """Keys waiting to be processed (see the module docstring). One event loop; not thread-safe."""

    def __init__(self, backoff: Callable[[int], float], clock: Callable[[], float] = time.monotonic):
        self._backoff = backoff
        self._clock = clock
        self._ready: deque[K] = deque()
        self._queued: set[K] = set()
        """Keys in ``_ready``, or marked to be queued again when their worker is done."""
        self._processing: set[K] = set()
        self._due: dict[K, float] = {}
        """Each delayed key's earliest due time; ``_heap`` may hold older, later entries too."""
        self._heap: list[tuple[float, int, K]] = []
        self._seq = 0
        self._failures: dict[K, int] = {}
        self._wakeup = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        """Keys queued now (delayed ones not counted)."""
        return len(self._ready)

    def delayed(self) -> int:
        return len(self._due)

    def add(self, key: K) -> None:
        """Queue ``key`` now (unless it is queued already)."""
        if self._closed:
            return
        self._due.pop(key, None)
        if key in self._queued:
            return
        self._queued.add(key)
        if key not in self._processing:
            self._ready.append(key)
            self._wakeup.set()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` in ``delay`` seconds (at once when ``delay`` ≤ 0); an earlier time already set stays."""
        if self._closed:
            return
        if delay <= 0:
            self.add(key)
            return
        if key in self._queued:
            return
        when = self._clock() + delay
        if self._due.get(key, float("inf")) <= when:
            return
        self._due[key] = when
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, key))
        self._wakeup.set()

    def add_rate_limited(self, key: K) -> float:
        """Count one more failure of ``key`` and queue it after its back-off; returns the delay."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = self._backoff(failures)
        self.add_after(key, delay)
        return delay

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure starts the back-off afresh."""
        self._failures.pop(key, None)

    def discard(self, key: K) -> None:
        """Drop every trace of ``key`` that is not in a worker's hands (the object is gone)."""
        self._due.pop(key, None)
        self._failures.pop(key, None)
        if key in self._queued and key not in self._processing:
            self._queued.discard(key)
            try:
                self._ready.remove(key)
            except ValueError:
                pass

    def _promote(self) -> float | None:
        """Move the delayed keys that are due to the ready queue; seconds until the next one is due."""
        now = self._clock()
        while self._heap:
            when, _, key = self._heap[0]
            if self._due.get(key) != when:  # superseded by an earlier time, or added at once since
                heapq.heappop(self._heap)
                continue
            if when > now:
                return when - now
            heapq.heappop(self._heap)
            del self._due[key]
            self.add(key)
        return None

    async def get(self) -> K:
        """The next key to process (waits for one); the caller must call :meth:`done` with it."""
        while True:
            if self._closed:
                raise ShutDown
            wait = self._promote()
            if self._ready:
                key = self._ready.popleft()
                self._queued.discard(key)
                self._processing.add(key)
                return key
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout=wait)
            except TimeoutError:
                pass

    def done(self, key: K) -> None:
        """The worker is finished with ``key``; if it was added meanwhile, it is queued again now."""
        self._processing.discard(key)
        if key in self._queued and not self._closed:
            self._ready.append(key)
            self._wakeup.set()

    def shut_down(self) -> None:
        """Hand out nothing more; waiting workers get :class:`ShutDown`."""
        self._closed = True
        self._wakeup.set()
