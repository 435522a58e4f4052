"""Control-plane chaos: while jobs run under the operator, what the operator talks to fails, one fault after
another (``TFPS_CHAOS_FAULTS``, comma-separated, in order):

* ``restart-apiserver``: the API server is stopped (SIGTERM) and started again;
* ``stop-apiserver``: it stops answering for ``TFPS_CHAOS_STOP_SECONDS`` (SIGSTOP, then SIGCONT; 120 s);
* ``restart-etcd``: etcd is stopped and started again with its data kept;
* ``expire-watches``: the API server is stopped, etcd's history compacted past every version a watch holds,
  and the API server started: every child watch of the operator resumes, gets 410 Gone and lists again
  (``tfps_watch_relists_total{reason="Expired"}`` for each kind);
* ``move-lease``: the leading replica is frozen (SIGSTOP) until the other takes the Lease over, then resumed.

The operator runs as the chart runs it with ``replicaCount: 2``: two replicas with leader election on a Lease
(the chart's durations: 15 s lease, 10 s renew deadline), so every fault also tests who leads after it.

Around each fault: a job created just before it and a chief that finished just before it. After it: every
child of every job is the one it was (same uid) and no other exists, no job counts a restart, the job
created before the fault gets its pods, the finished one reaches Succeeded, and the operator acts again:
the seconds from the API server answering to the pods of a job created then (``act_s``) and from a chief's
end to its job's Succeeded (``finish_s``) are printed as a table (and written to ``TFPS_CHAOS_JSON``).
Run with ``make chaos``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from operator_harness import Cluster, OperatorProcess, job_body

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
ROLES = ("chief-0", "ps-0", "worker-0", "worker-1")
FAULTS = os.environ.get("TFPS_CHAOS_FAULTS", "restart-apiserver,stop-apiserver,restart-etcd,expire-watches,move-lease")
STOP_SECONDS = float(os.environ.get("TFPS_CHAOS_STOP_SECONDS", "120"))
INFORMER_KINDS = ("Pod", "Job", "Service", "NetworkPolicy", "PersistentVolumeClaim")
"""The child kinds the operator lists and watches itself (its PSTrainingJob watch is Kopf's, which lists
again after any error)."""


def hack_cluster(*args: str) -> str:
    done = subprocess.run(
        [str(REPO / "hack" / "cluster"), "fault", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"hack/cluster fault {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def leading(ops: list[OperatorProcess]) -> list[OperatorProcess]:
    """The replicas that say they lead (``tfps_operator_leader``); a frozen one answers nothing."""
    out = []
    for op in ops:
        try:
            if any(value == 1 for _, value in op.samples("tfps_operator_leader")):
                out.append(op)
        except OSError:
            pass
    return out


def move_lease(ops: list[OperatorProcess], wait_until: Any) -> None:
    (old,) = wait_until(lambda: len(lead := leading(ops)) == 1 and lead, timeout=60, interval=0.5, what="one leader")
    assert old.proc is not None
    os.kill(old.proc.pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: [op for op in leading(ops) if op is not old],
            timeout=90,
            interval=0.5,
            what="the other replica took the Lease over",
        )
    finally:
        os.kill(old.proc.pid, signal.SIGCONT)


def inject(fault: str, ops: list[OperatorProcess], wait_until: Any) -> None:
    """The fault; returns once the API server answers again (``move-lease``: once the Lease has moved)."""
    if fault == "move-lease":
        move_lease(ops, wait_until)
    elif fault == "restart-apiserver":
        hack_cluster("restart", "apiserver")
    elif fault == "stop-apiserver":
        hack_cluster("stop", "apiserver")
        try:
            time.sleep(STOP_SECONDS)
        finally:
            hack_cluster("cont", "apiserver")
    elif fault == "restart-etcd":
        hack_cluster("restart", "etcd")
    elif fault == "expire-watches":
        hack_cluster("expire-watches")
    else:
        raise ValueError(f"TFPS_CHAOS_FAULTS: unknown fault {fault!r}")


def answering(kube: Cluster, timeout: float = 120) -> None:
    """Until this test's own client gets an answer: its pooled connections may have died with the fault."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            kube.core.list_namespaced_pod(kube.ns, limit=1, _request_timeout=10)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def relists(op: OperatorProcess) -> dict[str, float]:
    """``tfps_watch_relists_total{reason="Expired"}`` by kind."""
    return {
        labels["kind"]: value
        for labels, value in op.samples("tfps_watch_relists_total")
        if labels["reason"] == "Expired"
    }


def trainers(job: str) -> list[str]:
    return [f"{job}-{r}" for r in ROLES]


def pods_exist(kube: Cluster, job: str) -> bool:
    return sorted(kube.trainer_pods(job)) == sorted(trainers(job))


def consistent(kube: Cluster, job: str) -> bool:
    """The job's status says what its pods are: Running with every replica active, or Succeeded."""
    st = kube.status(job)
    if st.get("phase") == "Succeeded":
        return True
    pods = kube.trainer_pods(job)
    active = {r: sum(1 for n in pods if n.startswith(f"{job}-{r}-")) for r in ("chief", "ps", "worker")}
    have = {r: (st.get("replicaStatuses") or {}).get(r, {}).get("active", 0) for r in active}
    return st.get("phase") == "Running" and have == active == {"chief": 1, "ps": 1, "worker": 2}


def test_jobs_ride_out_api_server_and_etcd_faults(k8s, kubeconfig, make_namespace, wait_until, tmp_path: Path):
    from support.crd import install_crd

    install_crd(kubeconfig)
    kube = Cluster(k8s, make_namespace(), wait_until)
    kube.bound_claim("data")
    lease = {"TFPS_LEADER_ELECTION": "true", "TFPS_LEASE_NAME": "tfps-chaos", "TFPS_OPERATOR_NAMESPACE": kube.ns}
    ops = [OperatorProcess(kubeconfig, [kube.ns], tmp_path / f"operator-{i}.log", extra_env=lease) for i in (0, 1)]
    for op in ops:
        op.start()
    first_seen: dict[str, dict[str, str]] = {}  # every job's children as first seen whole

    def check_children(job: str) -> None:
        now = kube.children(job)
        if job not in first_seen:
            first_seen[job] = now
        assert now == first_seen[job], f"{job}: children changed (deleted, recreated or added)"

    def start(job: str) -> None:
        kube.create_job(job_body(job))
        kube.wait_pods_running(job, trainers(job), timeout=120)
        check_children(job)

    rows: list[dict[str, Any]] = []
    try:
        start("steady")
        previous: str | None = None
        for i, fault in enumerate(f.strip() for f in FAULTS.split(",") if f.strip()):
            before = [relists(op) for op in ops]
            racing = f"racing-{i}"
            kube.create_job(job_body(racing))  # the operator may be creating its pods as the fault lands
            if previous is not None:
                kube.finish_pod(f"{previous}-chief-0", "Succeeded", 0)  # seen before the fault, or after it
            t_fault = time.monotonic()
            inject(fault, ops, wait_until)
            answering(kube)
            t_back = time.monotonic()

            probe = f"probe-{i}"
            kube.create_job(job_body(probe))
            wait_until(lambda p=probe: pods_exist(kube, p), timeout=300, interval=0.2, what=f"{probe}'s pods")
            act_s = time.monotonic() - t_back
            kube.wait_pods_running(probe, trainers(probe), timeout=120)
            kube.finish_pod(f"{probe}-chief-0", "Succeeded", 0)
            t_end = time.monotonic()
            kube.wait_phase(probe, "Succeeded", timeout=120)
            finish_s = time.monotonic() - t_end

            kube.wait_pods_running(racing, trainers(racing), timeout=120)
            if previous is not None:
                kube.wait_phase(previous, "Succeeded", timeout=120)
            for job in ("steady", racing):
                check_children(job)
                wait_until(lambda j=job: consistent(kube, j), timeout=60, interval=0.5, what=f"{job}'s status")
            for job in ("steady", racing, probe, *([previous] if previous else [])):
                assert kube.status(job).get("restarts", 0) == 0, (job, kube.status(job))
            for op in ops:
                assert op.proc is not None and op.proc.poll() is None, f"a replica exited:\n{op.log()[-3000:]}"
            (leader,) = wait_until(lambda: len(lead := leading(ops)) == 1 and lead, timeout=60, what="one leader")
            if fault == "expire-watches":  # both replicas watch (the standby to take over at once)
                for op, was in zip(ops, before, strict=True):
                    after = relists(op)
                    expired = {k for k in INFORMER_KINDS if after.get(k, 0) > was.get(k, 0)}
                    assert expired == set(INFORMER_KINDS), (op.log_path.name, was, after)
            rows.append(
                {
                    "fault": fault,
                    "fault_s": round(t_back - t_fault, 1),
                    "act_s": round(act_s, 1),
                    "finish_s": round(finish_s, 1),
                    "leader": ops.index(leader),
                }
            )
            previous = racing

        for job in ("steady", previous):
            if job is not None:
                kube.finish_pod(f"{job}-chief-0", "Succeeded", 0)
                kube.wait_phase(job, "Succeeded", timeout=120)
    except BaseException:
        for op in ops:
            print(f"\n--- {op.log_path.name} (last lines) ---\n{op.log()[-5000:]}")
        raise
    finally:
        for op in ops:
            op.stop()
        print(f"\n{'fault':<20} {'fault s':>8} {'act again s':>12} {'finish s':>9} {'leader':>7}")
        for r in rows:
            print(f"{r['fault']:<20} {r['fault_s']:>8} {r['act_s']:>12} {r['finish_s']:>9} {r['leader']:>7}")
        if out := os.environ.get("TFPS_CHAOS_JSON"):
            Path(out).write_text(json.dumps({"stop_seconds": STOP_SECONDS, "faults": rows}, indent=2) + "\n")
