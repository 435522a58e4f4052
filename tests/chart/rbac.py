"""Installing the chart into hack/cluster and acting as its ServiceAccount (a TokenRequest token in
a kubeconfig of its own, never the admin's), plus the permission table the operator uses."""

from __future__ import annotations

import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .helpers import CHART, run

Triple = tuple[str, str, str]


def _triples(group: str, resource: str, *verbs: str) -> set[Triple]:
    return {(group, resource, v) for v in verbs}


# What the operator does in a served namespace (operator/tfps_operator/kube/client.py, controller.py,
# handlers and Kopf), one line per API call family. The chart must grant exactly this.
EXPECTED_NAMESPACED: set[Triple] = (
    _triples("tfps.dev", "pstrainingjobs", "get", "list", "watch", "patch", "delete")
    | _triples("tfps.dev", "pstrainingjobs/status", "patch")
    | _triples("tfps.dev", "pstrainingjobs/finalizers", "update")
    | _triples("", "pods", "get", "list", "watch", "create", "delete", "deletecollection")
    | _triples("", "services", "get", "list", "watch", "create")
    | _triples("", "persistentvolumeclaims", "get", "list", "watch", "create")
    | _triples("networking.k8s.io", "networkpolicies", "get", "list", "watch", "create")
    | _triples("batch", "jobs", "get", "list", "watch", "create", "delete")
    | _triples("", "events", "create")
    | _triples("serving.kserve.io", "inferenceservices", "get", "create", "patch")
)
EXPECTED_GANG: set[Triple] = _triples("scheduling.x-k8s.io", "podgroups", "get", "list", "watch", "create")
"""Added to the namespaced permissions by gangScheduling.enabled (a PodGroup per job)."""
EXPECTED_KUEUE: set[Triple] = _triples(
    "kueue.x-k8s.io", "workloads", "get", "list", "watch", "create", "delete"
) | _triples("kueue.x-k8s.io", "workloads/status", "patch")
"""Added to the namespaced permissions by kueue.enabled (a Workload per queued job)."""
EXPECTED_KUEUE_CLUSTER: set[Triple] = _triples("kueue.x-k8s.io", "resourceflavors", "get") | _triples(
    "scheduling.k8s.io", "priorityclasses", "get"
)
"""Added to the cluster-scoped permissions by kueue.enabled (admitted flavors, the job's PriorityClass)."""
_CRDS = _triples("apiextensions.k8s.io", "customresourcedefinitions", "list", "watch")
EXPECTED_CLUSTER_SCOPED: dict[str, set[Triple]] = {
    "clusterwide": _CRDS,
    "namespaced": _CRDS | _triples("", "namespaces", "list", "watch"),
}


@dataclass(frozen=True)
class Installed:
    release: str
    namespace: str
    service_account: str
    kubeconfig: Path
    """A kubeconfig holding only a token of the chart's ServiceAccount."""
    kubectl: Path
    server: str
    baseline_kubeconfig: Path
    """A token of a ServiceAccount bound to nothing: what every authenticated identity may do anyway
    (self reviews, discovery, ...), which differs between Kubernetes versions."""


def _admin_cluster_entry(admin_kubeconfig: Path) -> dict[str, Any]:
    cfg = yaml.safe_load(admin_kubeconfig.read_text())
    entry = dict(cfg["clusters"][0]["cluster"])
    ca = entry.pop("certificate-authority", None)
    if ca and "certificate-authority-data" not in entry:
        import base64

        path = Path(ca) if Path(ca).is_absolute() else admin_kubeconfig.parent / ca
        entry["certificate-authority-data"] = base64.b64encode(path.read_bytes()).decode()
    return entry


def token_kubeconfig(cluster: Any, namespace: str, service_account: str, path: Path) -> Path:
    """Request a token for the ServiceAccount (TokenRequest API) and write a kubeconfig with it."""
    token = cluster.kubectl("create", "token", service_account, "-n", namespace, "--duration=2h").stdout.strip()
    assert token.count(".") == 2, "TokenRequest did not return a JWT"
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hack-cluster", "cluster": _admin_cluster_entry(Path(cluster.kubeconfig))}],
        "users": [{"name": service_account, "user": {"token": token}}],
        "contexts": [
            {
                "name": "operator",
                "context": {"cluster": "hack-cluster", "user": service_account, "namespace": namespace},
            }
        ],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return path


def release_name() -> str:
    """A fresh release name; its ClusterRole and ClusterRoleBinding are named after it, so under pytest-xdist
    it carries the worker's tag too (tests/support/parallel.py)."""
    from support.parallel import worker_tag

    return f"tfps-{worker_tag()}{secrets.token_hex(3)}"


@contextmanager
def helm_install(
    helm: str, cluster: Any, namespace: str, sets: list[str] = (), release: str | None = None
) -> Iterator[Installed]:
    """`helm install` the chart (admin credentials: installing RBAC needs them), yield the install with
    a token kubeconfig of its ServiceAccount, `helm uninstall` afterwards (ClusterRoles included)."""
    release = release or release_name()
    kc = ["--kubeconfig", str(cluster.kubeconfig)]
    run([helm, "install", release, str(CHART), "-n", namespace, *kc, *[a for s in sets for a in ("--set", s)]])
    try:
        sa = f"{release}-tfps-operator"
        baseline = f"baseline-{secrets.token_hex(3)}"
        cluster.kubectl("create", "serviceaccount", baseline, "-n", namespace)
        with tempfile.TemporaryDirectory(prefix="tfps-sa-") as tmp:
            path = token_kubeconfig(cluster, namespace, sa, Path(tmp) / "kubeconfig")
            base = token_kubeconfig(cluster, namespace, baseline, Path(tmp) / "baseline")
            inst = Installed(release, namespace, sa, path, cluster.bin / "kubectl", cluster.server, base)
            who = _kubectl(inst, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
            assert who.stdout == f"system:serviceaccount:{namespace}:{sa}", who.stdout
            yield inst
    finally:
        run([helm, "uninstall", release, "-n", namespace, "--wait", "--timeout", "60s", *kc], check=False)


def _kubectl(inst: Installed, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([str(inst.kubectl), "--kubeconfig", str(inst.kubeconfig), *args], check=check)


def can_i(
    inst: Installed, verb: str, resource: str, *, namespace: str | None = None, all_namespaces: bool = False
) -> bool:
    """`kubectl auth can-i` as the chart's ServiceAccount (its own token, not impersonation).
    ``resource`` may name a subresource, ``pods/exec`` (kubectl would read that as a pod NAME)."""
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource] + (["--subresource", sub] if sub else [])
    args += ["--all-namespaces"] if all_namespaces else ["-n", namespace or "default"]
    out = _kubectl(inst, *args, check=False)
    answer = out.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl auth can-i {verb} {resource}: {out.stdout}{out.stderr}"
    return answer == "yes"


def _rules_review(kubectl: Path, kubeconfig: Path, namespace: str) -> set[Triple]:
    """SelfSubjectRulesReview with the identity of ``kubeconfig``: (group, resource, verb) triples."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    proc = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "create", "--validate=false", "-o", "yaml", "-f", "-"],
        input=yaml.safe_dump(review),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    status = yaml.safe_load(proc.stdout)["status"]
    assert not status.get("incomplete"), status.get("evaluationError")
    triples: set[Triple] = set()
    for rule in status.get("resourceRules") or []:
        assert not rule.get("resourceNames"), f"unexpected resourceNames rule {rule}"
        triples |= {(g, r, v) for g in rule.get("apiGroups") or [] for r in rule["resources"] for v in rule["verbs"]}
    return triples


def allowed_rules(inst: Installed, namespace: str) -> set[Triple]:
    """Everything the chart's ServiceAccount may do in ``namespace`` (its own token: Roles there plus
    every ClusterRole bound to it) beyond what an identity bound to nothing may do."""
    mine = _rules_review(inst.kubectl, inst.kubeconfig, namespace)
    anyone = _rules_review(inst.kubectl, inst.baseline_kubeconfig, namespace)
    assert any(r == "selfsubjectrulesreviews" for _, r, _ in anyone)  # the baseline review really ran
    return mine - anyone
