"""Leader election between operator replicas: the loop that reads and writes the leader Lease.

Every ``retry_period`` it reads the Lease and does what :func:`~tfps_operator.reconcile.leadership.step`
says (create, renew, take over, or wait). It tells the controller when this replica starts or stops
leading (``on_change``: the workers take keys only while leading) and answers the client's write gate
(:meth:`may_write`), which every write but the Lease's own asks first: once the renew deadline has passed
since the last successful renewal, this replica sends nothing, whatever its workers were doing. Each
change is logged and counted (``tfps_operator_leader``, ``tfps_operator_leader_changes_total``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

from . import metrics
from .kube import lease as lease_api
from .kube.client import ApiError, Kube
from .reconcile import leadership
from .reconcile.leadership import LeaseView, Observation, Timings

log = logging.getLogger("tfps_operator.elector")


class Elector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        timings: Timings,
        on_change: Callable[[bool], None],
    ):
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.timings = timings
        self.on_change = on_change
        self.leading = False
        self.renewed_at: float | None = None
        """Monotonic time at which the last successful renewal was sent (None: never led)."""
        self._seen: Observation | None = None
        self._last_failure = ""

    def may_write(self) -> bool:
        """The write gate: True while this replica leads and its renew deadline has not passed."""
        ok = self.leading and leadership.may_write(self.renewed_at, time.monotonic(), self.timings)
        if self.leading and not ok:
            self._set(False, "its renew deadline passed before a renewal succeeded")
        return ok

    async def run(self) -> None:
        """Until cancelled: try to lead, then keep the lease renewed. No failure of the API server ends it:
        a replica whose loop ended would never lead again, nor would any other if all had."""
        log.info(
            "leader election: Lease %s/%s as %s (lease %gs, renew deadline %gs, retry %gs)",
            self.namespace,
            self.name,
            self.identity,
            self.timings.lease_duration,
            self.timings.renew_deadline,
            self.timings.retry_period,
        )
        while True:
            try:
                await self.attempt()
            except Exception as exc:  # what the client did not report as an ApiError: the next attempt reads again
                self._failed(f"the Lease's request failed: {type(exc).__name__}: {exc}")
            # client-go's jitter: replicas that started together do not ask in lockstep
            await asyncio.sleep(self.timings.retry_period * (1 + (0 if self.leading else 0.2 * random.random())))

    async def attempt(self) -> None:
        """One read of the Lease and what it calls for."""
        sent = time.monotonic()
        try:
            current = await lease_api.read(self.kube, self.namespace, self.name)
        except ApiError as exc:
            self._failed(f"cannot read the Lease: {exc}")
            return
        view = LeaseView.of(current)
        self._seen = leadership.observe(self._seen, view, sent)
        what = leadership.step(view, self.identity, self._seen, sent, self.timings)
        if what == "wait":
            assert view is not None
            self._set(False, f"Lease held by {view.holder}")
            return
        acquire = ((current or {}).get("spec") or {}).get("acquireTime")
        spec = leadership.lease_spec(view, self.identity, datetime.now(UTC), self.timings, acquire)
        try:
            if current is None:
                written = await lease_api.create(self.kube, self.namespace, self.name, spec)
            else:
                written = await lease_api.replace(self.kube, current, spec)
        except ApiError as exc:
            self._failed(f"{'renewal' if what == 'renew' else 'acquisition'} refused: {exc.status} {exc.reason}")
            return
        self.renewed_at = sent
        self._last_failure = ""
        self._seen = leadership.observe(None, LeaseView.of(written), sent)
        self._set(True, "took over an expired Lease" if what == "take" else "acquired the Lease")

    async def release(self) -> None:
        """On a clean shutdown: hand the Lease back so that another replica takes over at once."""
        if not self.may_write():
            return
        self._set(False, "shutting down")
        try:
            current = await lease_api.read(self.kube, self.namespace, self.name)
            view = LeaseView.of(current)
            if current is None or view is None or view.holder != self.identity:
                return
            spec = leadership.lease_spec(
                view, None, datetime.now(UTC), self.timings, current["spec"].get("acquireTime")
            )
            await lease_api.replace(self.kube, current, spec)
            log.info("leader election: released Lease %s/%s", self.namespace, self.name)
        except ApiError as exc:
            log.warning("leader election: could not release the Lease (it expires on its own): %s", exc)

    def _failed(self, why: str) -> None:
        if self.leading and not leadership.may_write(self.renewed_at, time.monotonic(), self.timings):
            self._set(False, why)
        elif self.leading:
            log.warning("leader election: %s; still leading until the renew deadline", why)
        elif why != self._last_failure:  # a follower that cannot even read the Lease says so, once per reason
            log.warning("leader election: %s", why)
        self._last_failure = why

    def _set(self, leading: bool, why: str) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        metrics.LEADER.set(1 if leading else 0)
        metrics.LEADER_CHANGES.labels(to="leader" if leading else "follower").inc()
        if leading:
            log.info("leader election: %s now leads (%s)", self.identity, why)
        else:
            log.warning("leader election: %s stopped leading (%s)", self.identity, why)
        self.on_change(leading)
