"""The children's informer: records by job, events reported, a relist after 410 Gone reports what vanished.

A stand-in answers list and watch like the API server would (tests/operator runs the informers against
a real one)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from tfps_operator.kube.client import ApiError
from tfps_operator.kube.informer import Informer
from tfps_operator.reconcile.observed import PodObs, pod_obs


def pod(
    name: str, job: str | None = "j", phase: str = "Running", uid: str | None = None, rv: str | None = None
) -> dict[str, Any]:
    labels = {"tfps.dev/job-name": job} if job else {}
    meta = {"name": name, "namespace": "ns", "uid": uid or f"u-{name}", "labels": labels}
    return {
        "kind": "Pod",
        "metadata": {**meta, **({"resourceVersion": rv} if rv else {})},
        "status": {"phase": phase},
    }


class FakeKube:
    def __init__(
        self,
        pages: list[list[dict[str, Any]]],
        watches: list[list[dict[str, Any]] | Exception],
        relist: list[list[dict[str, Any]]] | None = None,
    ):
        self.pages, self.watches, self.relist = pages, watches, relist
        self.lists = 0
        self.watched_from: list[str] = []

    async def list_page(self, kind: str, ns: str | None, selector: str, limit: int, cont: str | None) -> dict:
        index = int(cont or 0)
        self.lists += index == 0
        if index == 0 and self.lists > 1 and self.relist is not None:
            self.pages = self.relist
        more = index + 1 < len(self.pages)
        return {
            "items": self.pages[index],
            "metadata": {"resourceVersion": "100", **({"continue": str(index + 1)} if more else {})},
        }

    async def watch(self, kind: str, ns: str | None, selector: str, rv: str, timeout: int) -> AsyncIterator[dict]:
        self.watched_from.append(rv)
        if not self.watches:
            await asyncio.Event().wait()  # the stream stays open
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        for event in answer:
            yield event


def run(kube: FakeKube) -> tuple[Informer[PodObs], list[tuple[str, str, str, bool]]]:
    seen: list[tuple[str, str, str, bool]] = []

    def on_change(namespace: str, job: str, key: str, uid: str, changed: bool) -> None:
        seen.append((job, key, uid, changed))

    informer: Informer[PodObs] = Informer(kube, "Pod", ["ns"], "sel", pod_obs, on_change)  # type: ignore[arg-type]

    async def go() -> None:
        task = asyncio.ensure_future(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 5)
        for _ in range(50):
            await asyncio.sleep(0)
        task.cancel()

    asyncio.run(go())
    return informer, seen


def test_a_paged_list_fills_the_records_by_job_and_sets_synced():
    kube = FakeKube([[pod("j-chief-0"), pod("k-ps-0", job="k")], [pod("j-ps-0")]], [])
    informer, seen = run(kube)
    assert sorted(p.name for p in informer.get(("ns", "j"))) == ["j-chief-0", "j-ps-0"]
    assert [p.name for p in informer.get(("ns", "k"))] == ["k-ps-0"]
    assert informer.get(("ns", "none"), ()) == ()
    assert ("j", "Pod/j-chief-0", "u-j-chief-0", True) in seen


def test_watch_events_update_and_remove_records_and_an_unchanged_record_is_reported_as_such():
    kube = FakeKube(
        [[pod("j-chief-0", phase="Pending")]],
        [
            [
                {"type": "MODIFIED", "object": pod("j-chief-0", phase="Running")},
                {"type": "MODIFIED", "object": pod("j-chief-0", phase="Running")},
                {"type": "ADDED", "object": pod("j-ps-0")},
                {"type": "DELETED", "object": pod("j-ps-0")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "120"}}},
            ]
        ],
    )
    informer, seen = run(kube)
    assert [(p.name, p.phase) for p in informer.get(("ns", "j"))] == [("j-chief-0", "Running")]
    assert seen[1:] == [
        ("j", "Pod/j-chief-0", "u-j-chief-0", True),
        ("j", "Pod/j-chief-0", "u-j-chief-0", False),
        ("j", "Pod/j-ps-0", "u-j-ps-0", True),
        ("j", "Pod/j-ps-0", "u-j-ps-0", True),
    ]


def test_a_gone_watch_lists_again_and_reports_what_vanished_meanwhile():
    kube = FakeKube(
        [[pod("j-chief-0"), pod("j-ps-0")]],
        [ApiError(410, "Gone", "too old", "WATCH", "Pod")],
        relist=[[pod("j-chief-0")]],  # j-ps-0 deleted while the watch was gone
    )
    informer, seen = run(kube)
    assert kube.lists == 2
    assert [p.name for p in informer.get(("ns", "j"))] == ["j-chief-0"]
    assert ("j", "Pod/j-ps-0", "u-j-ps-0", True) in seen[2:]


def test_a_dropped_connection_resumes_the_watch_from_its_last_version_without_a_list(monkeypatch):
    monkeypatch.setattr("tfps_operator.kube.informer.RETRY_SECONDS", (0.0, 0.0))
    kube = FakeKube(
        [[pod("j-chief-0")]],
        [
            [{"type": "ADDED", "object": pod("j-ps-0", rv="130")}],
            ConnectionResetError("the API server went away"),
            ConnectionRefusedError("still away"),
        ],
    )
    informer, _ = run(kube)
    assert kube.lists == 1
    assert kube.watched_from[:4] == ["100", "130", "130", "130"]
    assert sorted(p.name for p in informer.get(("ns", "j"))) == ["j-chief-0", "j-ps-0"]


def test_a_refused_watch_lists_again(monkeypatch):
    monkeypatch.setattr("tfps_operator.kube.informer.RETRY_SECONDS", (0.0, 0.0))
    kube = FakeKube([[pod("j-chief-0")]], [ApiError(500, "InternalError", "etcd", "WATCH", "Pod")], relist=[[]])
    informer, _ = run(kube)
    assert kube.lists == 2 and kube.watched_from[:2] == ["100", "100"]
    assert informer.get(("ns", "j"), ()) == ()


def test_a_list_that_gets_no_answer_is_tried_again_and_counts_no_relist(monkeypatch):
    from prometheus_client import REGISTRY

    def errors() -> float:
        return REGISTRY.get_sample_value("tfps_watch_relists_total", {"kind": "Pod", "reason": "Error"}) or 0.0

    monkeypatch.setattr("tfps_operator.kube.informer.RETRY_SECONDS", (0.0, 0.0))

    class Unanswered(FakeKube):
        failed = False

        async def list_page(self, kind: str, ns: str | None, selector: str, limit: int, cont: str | None) -> dict:
            if self.lists == 0 and not self.failed:
                self.failed = True
                raise ApiError(503, "Unreachable", "ClientConnectorError", "GET", "Pod list")
            return await super().list_page(kind, ns, selector, limit, cont)

    before = errors()
    kube = Unanswered([[pod("j-chief-0")]], [])
    informer, _ = run(kube)
    assert kube.lists == 1 and [p.name for p in informer.get(("ns", "j"))] == ["j-chief-0"]
    assert errors() == before
