"""A second hack/cluster for benchmarks: own state directory and ports (the shared test cluster is left
alone), an API server audit log of the operators' requests, more kwok nodes, one client identity per
operator, and both CRDs."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("TFPS_BENCH_CLUSTER_DIR", "/tmp/tfps-bench-cluster"))
PORTS = {
    "TFPS_APISERVER_PORT": "17443",
    "TFPS_ETCD_PORT": "17379",
    "TFPS_ETCD_PEER_PORT": "17380",
    "TFPS_KCM_PORT": "17257",
    "TFPS_SCHED_PORT": "17259",
    "TFPS_GANG_SCHED_PORT": "17261",
    "TFPS_PODGROUP_CTRL_PORT": "17262",
    "TFPS_KUEUE_WEBHOOK_PORT": "17263",
    "TFPS_KUEUE_METRICS_PORT": "17264",
    "TFPS_KUEUE_HEALTH_PORT": "17265",
}
AUDIT_LOG = STATE / "logs" / "audit.log"
USERS = {"tfps": "bench-tfps-operator", "tfjob": "bench-tfjob-operator"}
"""Client-certificate user of each operator: the audit log counts requests by this name."""
PODS_PER_NODE = 250  # a node's pod CIDR is a /24
KUBEFLOW_CRD = "kubeflow.org_tfjobs.yaml"

AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [{", ".join(USERS.values())}]
- level: None
"""


def _env() -> dict[str, str]:
    args = (
        f"--audit-policy-file={STATE / 'audit-policy.yaml'} --audit-log-path={AUDIT_LOG} "
        "--audit-log-format=json --audit-log-maxsize=0 --audit-log-mode=blocking"
    )
    return {**os.environ, "TFPS_CLUSTER_DIR": str(STATE), "TFPS_APISERVER_EXTRA_ARGS": args, **PORTS}


def kubeconfig() -> str:
    return str(STATE / "kubeconfig")


def server() -> str:
    return f"https://127.0.0.1:{PORTS['TFPS_APISERVER_PORT']}"


def kubectl(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [str(STATE / "bin" / "kubectl"), f"--kubeconfig={kubeconfig()}", *args],
        input=input,
        text=True,
        capture_output=True,
    )
    if check and r.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r


def up() -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "audit-policy.yaml").write_text(AUDIT_POLICY)
    r = subprocess.run([str(REPO / "hack" / "cluster"), "up"], env=_env(), text=True, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"benchmark cluster did not come up:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    if not AUDIT_LOG.parent.exists():
        sys.exit(f"{STATE} has no logs/ directory after hack/cluster up")
    ps = subprocess.run(["cat", str(STATE / "pids" / "kube-apiserver.cmd")], text=True, capture_output=True).stdout
    if "--audit-log-path" not in ps:
        sys.exit(
            f"the benchmark API server in {STATE} runs without the audit log; run `TFPS_CLUSTER_DIR={STATE} "
            "hack/cluster down` and retry"
        )


def down() -> None:
    subprocess.run([str(REPO / "hack" / "cluster"), "down"], env=_env(), text=True, capture_output=True)


def ensure_identities() -> dict[str, str]:
    """One client certificate (signed by the cluster CA) and kubeconfig per operator, bound to cluster-admin
    through RBAC: the same rights for both, and a user name the audit log records."""
    pki, out = STATE / "pki", {}
    for op, user in USERS.items():
        cfg = STATE / f"{user}.kubeconfig"
        key, crt = pki / f"{user}.key", pki / f"{user}.crt"
        if not (cfg.exists() and crt.exists()):
            subprocess.run(
                [
                    "openssl",
                    "req",
                    "-new",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-keyout",
                    str(key),
                    "-out",
                    str(pki / f"{user}.csr"),
                    "-subj",
                    f"/CN={user}",
                ],
                check=True,
                capture_output=True,
            )
            ext = pki / f"{user}.ext"
            ext.write_text(
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=clientAuth\n"
            )
            subprocess.run(
                [
                    "openssl",
                    "x509",
                    "-req",
                    "-in",
                    str(pki / f"{user}.csr"),
                    "-CA",
                    str(pki / "ca.crt"),
                    "-CAkey",
                    str(pki / "ca.key"),
                    "-CAcreateserial",
                    "-days",
                    "30",
                    "-sha256",
                    "-extfile",
                    str(ext),
                    "-out",
                    str(crt),
                ],
                check=True,
                capture_output=True,
            )
            for f in ("csr", "ext"):
                (pki / f"{user}.{f}").unlink()
            for args in (
                [
                    "set-cluster",
                    "bench",
                    f"--server={server()}",
                    f"--certificate-authority={pki / 'ca.crt'}",
                    "--embed-certs",
                ],
                ["set-credentials", user, f"--client-certificate={crt}", f"--client-key={key}", "--embed-certs"],
                ["set-context", "bench", "--cluster=bench", f"--user={user}"],
                ["use-context", "bench"],
            ):
                subprocess.run(
                    [str(STATE / "bin" / "kubectl"), f"--kubeconfig={cfg}", "config", *args],
                    check=True,
                    capture_output=True,
                )
        binding = f"bench-{op}-admin"
        if kubectl("get", "clusterrolebinding", binding, check=False).returncode != 0:
            kubectl("create", "clusterrolebinding", binding, "--clusterrole=cluster-admin", f"--user={user}")
        out[op] = str(cfg)
    return out


def ensure_nodes(pods: int) -> int:
    """kwok nodes ``bench-node-i`` (250 pods each, pod CIDR 127.2.i.0/24, InternalIP 127.0.2.i) for ``pods`` pods."""
    want = max(2, math.ceil(pods * 1.1 / PODS_PER_NODE))
    docs = []
    for i in range(1, want + 1):
        docs.append(f"""---
apiVersion: v1
kind: Node
metadata:
  name: bench-node-{i}
  annotations: {{kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}}
  labels: {{type: kwok, kubernetes.io/hostname: bench-node-{i}, kubernetes.io/os: linux, kubernetes.io/arch: amd64}}
spec:
  podCIDR: 127.2.{i}.0/24
  podCIDRs: [127.2.{i}.0/24]
status:
  addresses: [{{type: InternalIP, address: 127.0.2.{i}}}, {{type: Hostname, address: bench-node-{i}}}]
  allocatable: {{cpu: "1000", memory: 4Ti, pods: "{PODS_PER_NODE}", ephemeral-storage: 10Ti}}
  capacity: {{cpu: "1000", memory: 4Ti, pods: "{PODS_PER_NODE}", ephemeral-storage: 10Ti}}
""")
    kubectl("apply", "-f", "-", input="".join(docs))
    # the default hack/cluster nodes take no benchmark pods: keep the layout the same for every run
    for n in ("kwok-node-1", "kwok-node-2"):
        kubectl("taint", "node", n, "bench=off:NoSchedule", "--overwrite", check=False)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out = kubectl(
            "get",
            "nodes",
            "-l",
            "type=kwok",
            "-o",
            'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
        ).stdout
        ready = sum(1 for line in out.splitlines() if line.startswith("bench-node-") and line.endswith("True"))
        if ready >= want:
            return want
        time.sleep(1)
    sys.exit(f"only {ready}/{want} bench kwok nodes Ready after 120s")


def install_crds(tfjob_crd: Path) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from support.crd import install_crd  # the project's own CRD installer (server-side apply + wait)

    install_crd(kubeconfig())
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(tfjob_crd))
    for attempt in range(30):  # the CRD may take a moment to show up in the wait's first GET
        if (
            kubectl(
                "wait", "--for=condition=Established", "crd/tfjobs.kubeflow.org", "--timeout=60s", check=attempt == 29
            ).returncode
            == 0
        ):
            break
        time.sleep(1)


def new_api() -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=kubeconfig())
