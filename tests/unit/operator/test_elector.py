"""The elector's loop survives an API server that does not answer (refused connections, dropped ones): a
replica keeps trying, and leads again once the Lease can be read and written. The decisions themselves are
tested in tests/unit/operator/reconcile/test_leadership.py; the real API server in
tests/operator/test_operator_leader_election.py and tests/chaos."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tfps_operator import elector as elector_mod
from tfps_operator.elector import Elector
from tfps_operator.reconcile.leadership import Timings


class FlakyLeases:
    """lease_api's read/create/replace over one stored Lease; ``down`` calls raise as a dead connection would."""

    def __init__(self, down: int):
        self.down, self.lease = down, None
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.down > 0:
            self.down -= 1
            raise ConnectionRefusedError("Connect call failed ('127.0.0.1', 16443)")

    async def read(self, kube: Any, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail()
        return self.lease

    async def create(self, kube: Any, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail()
        self.lease = {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"}, "spec": spec}
        return self.lease

    async def replace(self, kube: Any, lease: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail()
        self.lease = {**lease, "spec": spec}
        return self.lease


@pytest.mark.parametrize("down", [1, 3])
def test_a_replica_leads_once_the_api_server_answers_again(monkeypatch, down):
    leases = FlakyLeases(down)
    for name in ("read", "create", "replace"):
        monkeypatch.setattr(elector_mod.lease_api, name, getattr(leases, name))
    changes: list[bool] = []
    e = Elector(None, "ns", "lease", "me", Timings(15, 10, 0.01), changes.append)  # type: ignore[arg-type]

    async def go() -> None:
        task = asyncio.ensure_future(e.run())
        for _ in range(500):
            await asyncio.sleep(0.01)
            if e.leading:
                break
        assert not task.done(), task  # the loop is still running: no connection error ended it
        task.cancel()

    asyncio.run(go())
    assert e.leading and changes == [True] and leases.calls > down
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "me"
