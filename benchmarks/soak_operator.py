#!/usr/bin/env python3
"""Long operator crash-consistency soak (the CI variant is tests/soak/test_operator_soak.py).

    hack/cluster up
    .venv/bin/python benchmarks/soak_operator.py                       # 100 kills, 6 jobs in flight
    .venv/bin/python benchmarks/soak_operator.py --kills 300 --seed 7 --in-flight 8

Same engine (tests/soak/soak.py) and audit: the operator (`tfps operator`, a subprocess) is SIGKILLed
at seeded random moments and restarted while jobs go through seeded random fates on hack/cluster
(kwok nodes, the driver plays kubelet). Prints a table, writes benchmarks/results/soak_operator.json,
exits 1 if the audit found a problem (listed).
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "operator")]

from operator_harness import Cluster, OperatorProcess  # noqa: E402

from soak.soak import Soak  # noqa: E402
from support.crd import install_crd  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def wait_until(fn, timeout=60, interval=0.5, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--in-flight", type=int, default=6)
    ap.add_argument("--min-jobs", type=int, default=30)
    ap.add_argument("--kubeconfig", default=str(REPO / ".cluster" / "kubeconfig"))
    ap.add_argument("--out", default=str(RESULTS / "soak_operator.json"))
    args = ap.parse_args()

    from kubernetes import client, config

    install_crd(args.kubeconfig)
    api = config.new_client_from_config(config_file=args.kubeconfig)
    core = client.CoreV1Api(api)
    ns = f"soak-{secrets.token_hex(3)}"
    core.create_namespace(
        {
            "metadata": {
                "name": ns,
                "labels": {"tfps.dev/test": "true", "pod-security.kubernetes.io/enforce": "restricted"},
            }
        }
    )
    wait_until(
        lambda: core.list_namespaced_service_account(ns, field_selector="metadata.name=default").items,
        what="default ServiceAccount",
    )
    kube = Cluster(api, ns, wait_until)
    kube.bound_claim("data")
    logs = REPO / ".cluster" / "soak-logs" / ns
    logs.mkdir(parents=True, exist_ok=True)
    ops: list[OperatorProcess] = []

    def new_operator(i: int) -> OperatorProcess:
        op = OperatorProcess(args.kubeconfig, [ns], logs / f"operator-{i}.log")
        ops.append(op)
        return op.start()

    soak = Soak(
        kube,
        args.kubeconfig,
        new_operator,
        seed=args.seed,
        kills=args.kills,
        min_jobs=args.min_jobs,
        in_flight=args.in_flight,
        kill_gap=(1.0, 6.0),
        downtime=(0.0, 3.0),
        log=lambda m: print(time.strftime("%H:%M:%S"), m, flush=True),
    )
    problems: list[str] = []
    try:
        figures = soak.run()
        problems = soak.audit()
    finally:
        for op in ops:
            op.stop()
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        core.delete_namespace(ns)
        try:
            core.delete_persistent_volume(f"{ns}-data")
        except Exception:
            pass
    result = {
        "benchmark": "soak_operator",
        "host": platform.node(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **figures.as_dict(),
        "problems": problems,
        "operator_logs": str(logs),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    rows = [
        ("seed", figures.seed),
        ("operator SIGKILLs", figures.kills),
        ("  of them with jobs in flight", figures.kills_while_jobs_in_flight),
        ("operator starts", figures.operator_starts),
        ("jobs", figures.jobs),
        ("fates", ", ".join(f"{k} {v}" for k, v in sorted(figures.fates.items()))),
        ("pod failures injected", figures.pod_failures_injected),
        ("kubelet actions while the operator was down", figures.actions_while_operator_down),
        ("pods created (watched)", figures.pods_created),
        ("export Jobs created", figures.export_jobs_created),
        ("wall seconds", figures.seconds),
        ("audit problems", len(problems)),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    for p in problems:
        print("PROBLEM:", p)
    print(f"wrote {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
