#!/usr/bin/env python3
"""tfps-operator vs Kubeflow training-operator v1 (TFJob) on the same control plane, side by side.

    .venv/bin/python benchmarks/operator_scale.py                       # N=200, both operators
    .venv/bin/python benchmarks/operator_scale.py --sizes 10,50,200     # scaling curve
    .venv/bin/python benchmarks/operator_scale.py --sizes 1000 --out benchmarks/results/operator_scale_1000.json

A separate hack/cluster (own state dir and ports, API server audit log on) is brought up; each operator
runs as a local process with its own client-certificate user. Per run: create N jobs (1 chief + 2 PS +
3 workers) at once in a fresh namespace, wait for every pod, wait for every job Running, then play kubelet
(chief container exits 0, paced) and wait for every job Succeeded. Measured: all-pods-created time and
per-job p50/p99, chief-succeeded -> job-Succeeded latency p50/p99 (pod status patch sent -> the harness's
watch sees the job status), API requests per job counted server-side from the audit log (by user), peak
RSS (VmHWM) and CPU seconds of the operator process. Runs alternate between the operators.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opbench import audit, cluster, tfjob
from opbench.operators import VARIANTS, OperatorProc, Variant
from opbench.workload import PODS_PER_JOB, Observer, create_jobs, finish_chief

RESULTS = Path(__file__).resolve().parent / "results"
LOGS = cluster.STATE / "operator-logs"


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))]


def setup_namespace(api: Any, ns: str, operator: str) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": ns, "labels": {"tfps.dev/benchmark": "operator-scale"}}})
    deadline = time.monotonic() + 60
    while not core.list_namespaced_service_account(ns, field_selector="metadata.name=default").items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"namespace {ns}: no default ServiceAccount after 60s")
        time.sleep(0.2)
    if operator == "tfps":  # tfps jobs need a checkpoint volume: one shared, pre-bound claim
        pv = f"{ns}-data"
        core.create_persistent_volume(
            {
                "metadata": {"name": pv, "labels": {"tfps.dev/benchmark": "operator-scale"}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "manual",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": f"/tmp/{pv}"},
                    "claimRef": {"namespace": ns, "name": "data"},
                },
            }
        )
        core.create_namespaced_persistent_volume_claim(
            ns,
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "manual",
                    "volumeName": pv,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        while core.read_namespaced_persistent_volume_claim("data", ns).status.phase != "Bound":
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespace {ns}: PVC data not Bound after 60s")
            time.sleep(0.2)


def teardown_namespace(api: Any, ns: str, operator: str, timeout: float) -> None:
    """After the operator stopped: drop its finalizers (tfps) and delete the namespace, waiting until gone."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    if operator == "tfps":
        for j in custom.list_namespaced_custom_object("tfps.dev", "v1alpha1", ns, "pstrainingjobs")["items"]:
            if j["metadata"].get("finalizers"):
                custom.patch_namespaced_custom_object(
                    "tfps.dev",
                    "v1alpha1",
                    ns,
                    "pstrainingjobs",
                    j["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                )
    core.delete_namespace(ns)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_namespace(ns)
        except ApiException as e:
            if e.status == 404:
                break
        time.sleep(1)
    else:
        print(f"   (namespace {ns} still terminating after {timeout:.0f}s; going on)", flush=True)
    if operator == "tfps":
        try:
            core.delete_persistent_volume(f"{ns}-data")
        except ApiException:
            pass


def run_one(api: Any, kubeconfigs: dict[str, str], v: Variant, n: int, rep: int, patch_rate: float) -> dict[str, Any]:
    ns = f"b-{v.key}-{n}-{rep}-{secrets.token_hex(2)}"
    setup_namespace(api, ns, v.operator)
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"{ns}.log"
    user = cluster.USERS[v.operator]
    audit_start = audit.offset(cluster.AUDIT_LOG)
    obs = Observer(api, ns, v.operator)
    obs.start()
    op = OperatorProc(v, ns, kubeconfigs[v.operator], log_path, api)
    t_start = time.time()
    op.start()
    ready_s = time.time() - t_start
    time.sleep(2.0)  # let the informers settle: startup requests are counted apart
    idle = op.stats()
    names = [f"j{i:04d}" for i in range(n)]
    total_pods = n * PODS_PER_JOB
    timeout = 120 + 4.0 * n  # training-operator's default 20 QPS needs ~3 s per job for everything
    out: dict[str, Any] = {
        "variant": v.key,
        "label": v.label,
        "n": n,
        "rep": rep,
        "namespace": ns,
        "loadavg_before": os.getloadavg()[0],
        "operator_ready_s": round(ready_s, 2),
        "idle_rss_mib": round(idle["rss_mib"], 1),
        "complete": True,
        "notes": [],
    }
    if v.operator == "tfps":
        out["tfps_source"] = git_state()
    try:
        t0 = time.time()
        sent = create_jobs(api, v.operator, ns, names)
        out["create_calls_s"] = round(time.time() - t0, 3)
        if not obs.wait(lambda: len(obs.pod_added) >= total_pods, timeout):
            out["complete"] = False
            out["notes"].append(f"only {len(obs.pod_added)}/{total_pods} pods after {timeout:.0f}s")
        by_job = obs.pods_by_job()
        out["pods_created"] = len(obs.pod_added)
        out["all_pods_created_s"] = round(max(obs.pod_added.values()) - t0, 3) if obs.pod_added else None
        per_job = [max(ts) - sent[j] for j, ts in by_job.items() if len(ts) >= PODS_PER_JOB and j in sent]
        out["per_job_pods_s"] = {"p50": pct(per_job, 50), "p99": pct(per_job, 99), "max": max(per_job, default=None)}

        def all_running() -> bool:
            return len(obs.pod_running) >= total_pods and all((j, "Running") in obs.job_state for j in names)

        if not obs.wait(all_running, timeout):
            out["complete"] = False
            out["notes"].append(
                f"{sum((j, 'Running') in obs.job_state for j in names)}/{n} jobs Running, "
                f"{len(obs.pod_running)}/{total_pods} pods Running after {timeout:.0f}s"
            )
        running = [obs.job_state[(j, "Running")] for j in names if (j, "Running") in obs.job_state]
        out["all_jobs_running_s"] = round(max(running) - t0, 3) if running else None

        # kubelet's part: each chief's container exits 0, paced at patch_rate per second
        patched: dict[str, float] = {}
        t_p = time.time()
        for i, j in enumerate(names):
            pod = f"{j}-chief-0"
            if pod not in obs.pod_container:
                continue
            delay = t_p + i / patch_rate - time.time()
            if delay > 0:
                time.sleep(delay)
            patched[j] = finish_chief(api, ns, pod, obs.pod_container[pod])
        if not obs.wait(lambda: all((j, "Succeeded") in obs.job_state for j in patched), timeout):
            out["complete"] = False
            out["notes"].append(
                f"{sum((j, 'Succeeded') in obs.job_state for j in patched)}/{len(patched)} jobs "
                f"Succeeded after {timeout:.0f}s"
            )
        lat = [obs.job_state[(j, "Succeeded")] - t for j, t in patched.items() if (j, "Succeeded") in obs.job_state]
        out["status_latency_s"] = {
            "p50": pct(lat, 50),
            "p99": pct(lat, 99),
            "max": max(lat, default=None),
            "count": len(lat),
            "patch_rate_per_s": patch_rate,
        }
        # cleanPodPolicy Running: both operators delete every PS and worker pod of a finished job. Stop
        # the operator only once that is done, so its whole work is counted (TFJob at its default QPS
        # is still deleting minutes after its jobs say Succeeded).
        servers = [p for p in obs.pod_added if not p.endswith("-chief-0")]
        t_s = time.time()
        if not obs.wait(lambda: all(p in obs.pod_deleted for p in servers), timeout):
            out["notes"].append(
                f"{sum(p in obs.pod_deleted for p in servers)}/{len(servers)} PS/worker pods "
                f"deleted after {timeout:.0f}s"
            )
        out["cleanup_after_succeeded_s"] = round(time.time() - t_s, 2)
        time.sleep(2.0)  # the operator's follow-up work (its last Events, Service deletes) lands in the counts
        final = op.stats()
        out["peak_rss_mib"] = round(final["peak_rss_mib"], 1)
        out["cpu_s"] = round(final["cpu_s"], 2)
        out["cpu_s_workload"] = round(final["cpu_s"] - idle["cpu_s"], 2)
        out["wall_s"] = round(time.time() - t0, 2)
    finally:
        op.stop()
        obs.stop()
    if obs.errors:
        out["notes"].append(f"watch errors (reconnected): {obs.errors[:3]}")
    time.sleep(1.0)  # the audit log gets the closing stage of the operator's watches
    reqs = audit.requests_of(cluster.AUDIT_LOG, audit_start, user)
    a = audit.summarize(reqs, t0)
    out["api_requests"] = {**a, "per_job": round(a["workload"] / n, 2)}
    out["loadavg_after"] = os.getloadavg()[0]
    teardown_namespace(api, ns, v.operator, timeout=120 + n * 0.3)
    return out


def git_state() -> dict[str, Any]:
    """Which operator code was measured: HEAD and whether operator/ had uncommitted changes."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cluster.REPO, text=True, capture_output=True).stdout.strip()

    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "operator_dirty_files": len(git("status", "--porcelain", "operator/").splitlines()),
    }


def median(runs: list[dict[str, Any]], path: str) -> float | None:
    vals = []
    for r in runs:
        x: Any = r
        for k in path.split("."):
            x = x.get(k) if isinstance(x, dict) else None
        if isinstance(x, (int, float)):
            vals.append(x)
    return statistics.median(vals) if vals else None


METRICS = [
    ("all_pods_created_s", "all pods s"),
    ("per_job_pods_s.p50", "job p50 s"),
    ("per_job_pods_s.p99", "job p99 s"),
    ("status_latency_s.p50", "status p50 s"),
    ("status_latency_s.p99", "status p99 s"),
    ("api_requests.per_job", "req/job"),
    ("api_requests.startup", "startup req"),
    ("peak_rss_mib", "peak RSS MiB"),
    ("cpu_s", "CPU s"),
]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in sorted({r["n"] for r in runs}):
        out[str(n)] = {}
        for key in VARIANTS:
            rs = [r for r in runs if r["n"] == n and r["variant"] == key]
            if rs:
                out[str(n)][key] = {m: median(rs, m) for m, _ in METRICS} | {
                    "runs": len(rs),
                    "complete": all(r["complete"] for r in rs),
                }
        s = out[str(n)]
        ratios = {}
        for other in ("tfjob", "tfjob-qps"):
            if "tfps" in s and other in s:
                for m in (
                    "all_pods_created_s",
                    "per_job_pods_s.p99",
                    "status_latency_s.p99",
                    "api_requests.per_job",
                    "peak_rss_mib",
                    "cpu_s",
                ):
                    a, b = s["tfps"][m], s[other][m]
                    if a is not None and b:
                        ratios[f"{m} tfps/{other}"] = round(a / b, 3)
        s["ratios"] = ratios
    return out


def fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if isinstance(x, float) and abs(x) < 100 else f"{x:.0f}" if isinstance(x, float) else str(x)


def print_table(summary: dict[str, Any]) -> None:
    head = ["N", "operator"] + [h for _, h in METRICS]
    rows = [head]
    for n, s in summary.items():
        for key in VARIANTS:
            if key in s:
                rows.append(
                    [n, key + ("" if s[key]["complete"] else " (INCOMPLETE)")] + [fmt(s[key][m]) for m, _ in METRICS]
                )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    for n, s in summary.items():
        for k, val in s["ratios"].items():
            print(f"N={n}: {k} = {val}")


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown table (for benchmarks/README.md)."""
    lines = ["| N | operator | " + " | ".join(h for _, h in METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for n, s in summary.items():
        for key in VARIANTS:
            if key in s:
                flag = "" if s[key]["complete"] else " (incomplete)"
                lines.append(f"| {n} | {key}{flag} | " + " | ".join(fmt(s[key][m]) for m, _ in METRICS) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="200", help="comma-separated job counts (default 200)")
    p.add_argument(
        "--variants", default="tfjob,tfps,tfjob-qps", help=f"order of the first round; from {list(VARIANTS)}"
    )
    p.add_argument("--reps", type=int, default=1, help="rounds per size; each round rotates the order")
    p.add_argument("--patch-rate", type=float, default=25.0, help="chief pods finished per second (default 25)")
    p.add_argument("--out", default=str(RESULTS / "operator_scale.json"))
    p.add_argument("--merge", action="store_true", help="keep the runs already in --out (other sizes) and add these")
    p.add_argument("--down", action="store_true", help="stop the benchmark cluster afterwards")
    p.add_argument("--markdown", metavar="JSON", help="only print the summary of an earlier result as Markdown")
    a = p.parse_args()
    if a.markdown:
        print(markdown(json.loads(Path(a.markdown).read_text())["summary"]))
        return 0
    sizes = [int(x) for x in a.sizes.split(",")]
    variants = [VARIANTS[k] for k in a.variants.split(",")]

    binary = tfjob.binary()  # build first: nothing else competes for the CPU while measuring
    cluster.up()
    nodes = cluster.ensure_nodes(max(sizes) * PODS_PER_JOB)
    kubeconfigs = cluster.ensure_identities()
    cluster.install_crds(tfjob.crd())
    api = cluster.new_api()
    print(
        f"benchmark cluster {cluster.server()} ({cluster.STATE}), {nodes} kwok nodes; training-operator {binary}",
        flush=True,
    )
    out = Path(a.out)
    runs: list[dict[str, Any]] = []
    if a.merge and out.exists():
        runs = [r for r in json.loads(out.read_text())["runs"] if r["n"] not in sizes]
    for n in sizes:
        for rep in range(a.reps):
            order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
            for v in order:
                print(f"-- N={n} rep={rep} {v.key} (load {os.getloadavg()[0]:.1f})", flush=True)
                r = run_one(api, kubeconfigs, v, n, rep, a.patch_rate)
                runs.append(r)
                print(
                    f"   all pods {fmt(r.get('all_pods_created_s'))}s, status p99 "
                    f"{fmt((r.get('status_latency_s') or {}).get('p99'))}s, req/job {r['api_requests']['per_job']}, "
                    f"peak RSS {fmt(r.get('peak_rss_mib'))} MiB, CPU {fmt(r.get('cpu_s'))}s"
                    + ("" if r["complete"] else f"  INCOMPLETE: {r['notes']}"),
                    flush=True,
                )
    summary = summarize(runs)
    print()
    print_table(summary)
    result = {
        "benchmark": "operator_scale",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "note": "CPU shared with other workloads; see loadavg_* per run",
        },
        "cluster": {"server": cluster.server(), "kwok_nodes": nodes, "k8s": "hack/cluster pins"},
        "tfps_source": git_state(),
        "training_operator": str(binary),
        "workload": {
            "per_job": "1 chief + 2 PS + 3 workers, export disabled, cleanPodPolicy Running",
            "patch_rate_per_s": a.patch_rate,
        },
        "summary": summary,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(out)
    print(f"\nwrote {out}")
    if a.down:
        cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
