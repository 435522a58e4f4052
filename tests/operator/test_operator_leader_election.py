"""Leader election on a Lease between two operator replicas, on the real API server.

The leader is paused (SIGSTOP) past its lease while jobs need work; the standby takes over and does it;
the paused one is resumed. What it sent is read from the API server's audit log (hack/cluster writes one:
every write with its user agent, which names the replica): nothing after its renew deadline but attempts
on the Lease itself, and no child was created twice.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from operator_harness import Cluster, OperatorProcess, job_body

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

RENEW_DEADLINE = 4.0
SLACK = 0.5
LEASE = {
    "TFPS_LEADER_ELECTION": "true",
    "TFPS_LEASE_NAME": "tfps-test",
    "TFPS_LEASE_DURATION_SECONDS": "6",
    "TFPS_RENEW_DEADLINE_SECONDS": str(RENEW_DEADLINE),
    "TFPS_RETRY_PERIOD_SECONDS": "1",
}
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0", "j-worker-1"]


def _metric(op: OperatorProcess, name: str) -> float:
    return sum(value for _, value in op.samples(name))


def _reconciles(op: OperatorProcess) -> float:
    return _metric(op, "tfps_reconcile_total")


def _holder(kube: Cluster) -> str | None:
    from kubernetes import client

    try:
        lease = client.CoordinationV1Api(kube.core.api_client).read_namespaced_lease("tfps-test", kube.ns)
    except client.ApiException:
        return None
    return lease.spec.holder_identity


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _writes(audit_log: Path, namespace: str) -> list[dict[str, Any]]:
    """Completed writes in ``namespace`` from the audit log."""
    out = []
    with audit_log.open() as fh:
        for line in fh:
            if f'"{namespace}"' not in line:
                continue
            ev = json.loads(line)
            ref = ev.get("objectRef") or {}
            if ev.get("stage") == "ResponseComplete" and ev.get("verb") in WRITES and ref.get("namespace") == namespace:
                out.append(ev)
    return out


def test_a_paused_leader_sends_nothing_after_its_deadline_and_the_standby_takes_over(
    kube: Cluster, start_operator: Any, cluster: Any
) -> None:
    env = {**LEASE, "TFPS_OPERATOR_NAMESPACE": kube.ns}
    first = start_operator(kube.ns, extra_env=env)
    kube.wait_until(lambda: _metric(first, "tfps_operator_leader") == 1, timeout=30, what="the first replica leads")
    second = start_operator(kube.ns, extra_env=env)
    leader_id = _holder(kube)
    assert leader_id, "the leader's identity is in the Lease"
    kube.create_job(job_body("j"))
    before = {n: p["metadata"]["uid"] for n, p in kube.wait_pods_running("j", TRAINERS).items()}
    kube.wait_phase("j", "Running")
    assert _metric(second, "tfps_operator_leader") == 0 and _reconciles(second) == 0  # the standby did nothing

    assert first.proc is not None
    os.kill(first.proc.pid, signal.SIGSTOP)
    try:
        # Work that piles up while the leader is frozen: a new job, and a failed worker to recreate.
        kube.create_job(job_body("k"))
        kube.finish_pod("j-worker-0", "Failed", 1)
        kube.wait_until(
            lambda: _metric(second, "tfps_operator_leader") == 1, timeout=30, what="the standby took over the Lease"
        )
        kube.wait_until(
            lambda: sorted(kube.trainer_pods("k")) == sorted(p.replace("j-", "k-") for p in TRAINERS),
            timeout=30,
            what="the new leader created the new job's pods",
        )
        kube.wait_until(
            lambda: (
                (kube.trainer_pods("j").get("j-worker-0") or {}).get("metadata", {}).get("uid")
                not in (None, before["j-worker-0"])
            ),
            timeout=30,
            what="the new leader recreated j-worker-0",
        )
    finally:
        os.kill(first.proc.pid, signal.SIGCONT)
    resumed = time.time()
    kube.wait_until(lambda: "stopped leading" in first.log(), timeout=30, what="the resumed replica stepped down")
    time.sleep(5)  # what it had queued while frozen has run (or been refused) by now
    assert _metric(first, "tfps_operator_leader") == 0 and _holder(kube) != leader_id

    # Every write the first replica sent (but its attempts on the Lease) came less than its renew deadline
    # after a renewal of its that succeeded (times as the API server received them; a write leaves the
    # client a moment after the gate is asked, hence the slack).
    audit = cluster.bin.parent / "logs" / "audit.log"
    writes = _writes(audit, kube.ns)
    mine = [w for w in writes if w.get("userAgent", "").endswith(f"/{leader_id}")]
    renewals = sorted(
        _at(w["requestReceivedTimestamp"])
        for w in mine
        if (w.get("objectRef") or {}).get("resource") == "leases"
        and (w.get("responseStatus") or {}).get("code") in (200, 201)
    )
    assert renewals, "the first replica's Lease renewals are in the audit log"
    late = []
    for w in mine:
        if w["objectRef"].get("resource") == "leases":
            continue
        at = _at(w["requestReceivedTimestamp"])
        last = max((r for r in renewals if r <= at), default=None)
        if last is None or at - last >= RENEW_DEADLINE + SLACK:
            late.append((w["verb"], w["objectRef"].get("resource"), w["objectRef"].get("name"), at - (last or 0)))
    assert not late, f"the paused leader wrote past its renew deadline: {late}"
    assert max(renewals) < resumed, "after resuming it never renewed: the Lease was the other replica's"

    created: dict[str, int] = {}
    for w in writes:
        ref = w["objectRef"]
        ok = (w.get("responseStatus") or {}).get("code") == 201 and "dryRun=" not in w.get("requestURI", "")
        if w["verb"] == "create" and ref.get("resource") == "pods" and not ref.get("subresource") and ok:
            created[ref["name"]] = created.get(ref["name"], 0) + 1
    assert created == {**dict.fromkeys(TRAINERS, 1), "j-worker-0": 2, **{p.replace("j-", "k-"): 1 for p in TRAINERS}}
    refused = _metric(first, "tfps_operator_writes_refused_total")
    print(f"first replica: {len(mine)} writes in all, {refused:g} refused unsent after it resumed")


def test_a_closed_write_gate_sends_nothing_but_the_lease_may_still_be_written(kube: Cluster, cluster: Any) -> None:
    """The gate itself, on the real API server: the same client sends a write while the gate is open, refuses
    one unsent while it is closed (reads and the Lease's own writes still go), as the audit log shows."""
    import asyncio

    import kopf

    from tfps_operator.kube import lease as lease_api
    from tfps_operator.kube.client import Kube, NotLeader

    agent = f"gate-{kube.ns}"
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
    gate = {"open": True}

    def configmap(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}

    async def scenario() -> None:
        client = await Kube.connect(
            lambda: kopf.login_with_kubeconfig(settings=kopf.OperatorSettings()), instance=agent
        )
        client.write_gate = lambda: gate["open"]
        path = f"/api/v1/namespaces/{kube.ns}/configmaps"
        try:
            await client.request("POST", path, what="ConfigMap/open", body=configmap("open"))
            gate["open"] = False
            try:
                await client.request("POST", path, what="ConfigMap/closed", body=configmap("closed"))
                raise AssertionError("a write went out through a closed gate")
            except NotLeader:
                pass
            assert await client.request("GET", f"{path}/open", what="ConfigMap/open")  # reads still go
            await lease_api.create(client, kube.ns, "gate-test", {"holderIdentity": agent})
        finally:
            await client.close()

    asyncio.run(scenario())

    def sent() -> list[tuple[str, str]]:
        return sorted(
            (w["objectRef"].get("resource"), w["objectRef"].get("name"))
            for w in _writes(cluster.bin.parent / "logs" / "audit.log", kube.ns)
            if w.get("userAgent", "").endswith(f"/{agent}")
        )

    # the audit log is written as the requests complete: until the Lease's create, the last write sent, is in it
    kube.wait_until(lambda: ("leases", "gate-test") in sent(), timeout=30, what="the Lease's create in the audit log")
    assert sent() == [("configmaps", "open"), ("leases", "gate-test")], sent()
    names = [cm.metadata.name for cm in kube.core.list_namespaced_config_map(kube.ns).items]
    assert "open" in names and "closed" not in names
