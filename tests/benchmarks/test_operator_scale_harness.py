"""The operator benchmark's own parts: percentiles, audit-log counting, and job manifests the real
API server accepts (the benchmark is only fair if both workloads are valid and equivalent)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from opbench import audit  # noqa: E402
from opbench.workload import PODS_PER_JOB, REPLICAS, job_manifest, job_state, tfjob_job, tfps_job  # noqa: E402
from operator_scale import pct  # noqa: E402


def test_nearest_rank_percentiles():
    v = [float(i) for i in range(1, 101)]
    assert pct(v, 50) == 50.0 and pct(v, 99) == 99.0 and pct(v, 100) == 100.0
    assert pct([3.0], 99) == 3.0 and pct([], 50) is None
    assert pct([5.0, 1.0], 50) == 1.0 and pct([5.0, 1.0], 99) == 5.0


def _event(audit_id: str, user: str, verb: str, resource: str, ts: str, stage: str = "ResponseComplete") -> str:
    return json.dumps(
        {
            "kind": "Event",
            "auditID": audit_id,
            "stage": stage,
            "verb": verb,
            "user": {"username": user},
            "userAgent": "kopf/1.45.2 x",
            "objectRef": {"resource": resource},
            "requestReceivedTimestamp": ts,
            "responseStatus": {"code": 200},
        }
    )


def test_audit_counts_one_request_per_audit_id_per_user_after_the_offset(tmp_path):
    log = tmp_path / "audit.log"
    log.write_text(_event("old", "op", "get", "pods", "2026-01-01T00:00:00.000000Z") + "\n")
    start = audit.offset(log)
    lines = [
        _event("w", "op", "watch", "pods", "2026-01-01T00:00:01.000000Z", stage="ResponseStarted"),
        _event("w", "op", "watch", "pods", "2026-01-01T00:00:01.000000Z"),  # same request, closing stage
        _event("c1", "op", "create", "pods", "2026-01-01T00:00:05.500000Z"),
        _event("c2", "op", "create", "pods", "2026-01-01T00:00:06.000000Z"),
        _event("x", "someone-else", "create", "pods", "2026-01-01T00:00:06.000000Z"),
    ]
    log.write_text(log.read_text() + "\n".join(lines) + '\n{"partial')
    reqs = audit.requests_of(log, start, "op")
    assert len(reqs) == 3
    s = audit.summarize(reqs, since=audit._ts("2026-01-01T00:00:05Z"))
    assert (s["startup"], s["workload"]) == (1, 2)
    assert s["by_verb_resource"] == {"create pods": 2}
    assert s["user_agents"] == {"kopf/1.45.2": 3}


def test_both_workloads_have_the_same_replicas():
    assert PODS_PER_JOB == 6 and REPLICAS == {"chief": 1, "ps": 2, "worker": 3}
    tfps = tfps_job("j")["spec"]
    assert {r: tfps["replicas"][r]["replicas"] for r in REPLICAS} == REPLICAS
    assert tfps["export"] == {"enabled": False} and tfps["runPolicy"]["cleanPodPolicy"] == "Running"
    tf = tfjob_job("j")["spec"]
    assert {r.lower(): s["replicas"] for r, s in tf["tfReplicaSpecs"].items()} == REPLICAS
    assert tf["runPolicy"]["cleanPodPolicy"] == "Running"
    assert tfps["image"] == tf["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["image"]


def test_job_state_reads_each_operators_status():
    assert job_state("tfps", {"status": {"phase": "Running"}}) == "Running"
    assert job_state("tfps", {"status": {"phase": "Pending"}}) is None
    conds = [
        {"type": "Created", "status": "True"},
        {"type": "Running", "status": "False"},
        {"type": "Succeeded", "status": "True"},
    ]
    assert job_state("tfjob", {"status": {"conditions": conds}}) == "Succeeded"
    assert job_state("tfjob", {"status": {"conditions": conds[:1]}}) is None


def test_tfps_job_passes_the_operators_own_validation():
    from tfps_operator.api.validate import validate_job

    job = validate_job(job_manifest("tfps", "j0001"))
    assert job.spec.replicas.worker.replicas == 3 and job.spec.export.enabled is False


@pytest.mark.cluster
def test_tfps_job_is_accepted_by_the_api_server(kubectl, namespace):
    kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(job_manifest("tfps", "j0001")))
