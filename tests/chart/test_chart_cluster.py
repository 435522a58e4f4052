"""The chart against the real control plane (hack/cluster): every rendered object passes a server-side
dry run, `helm install` refuses bad values, and the installed RBAC is both sufficient (the operator,
run out-of-cluster with a token of the chart's ServiceAccount, drives a full job lifecycle: see
test_rbac_lifecycle.py) and minimal (`kubectl auth can-i` as that account: denied everything else)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from support.crd import install_crd

from .helpers import CHART, CI_VALUES, objects, run, template
from .rbac import (
    EXPECTED_CLUSTER_SCOPED,
    EXPECTED_NAMESPACED,
    Installed,
    allowed_rules,
    can_i,
    helm_install,
)

pytestmark = pytest.mark.cluster

VALUES_IDS = [p.name.removesuffix("-values.yaml") for p in CI_VALUES]

# A minimal stand-in for the Prometheus Operator's ServiceMonitor CRD, so that the chart's
# ServiceMonitor can be dry-run too (its schema is not checked beyond being an object).
SERVICEMONITOR_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""
PROMETHEUSRULE_CRD = (
    SERVICEMONITOR_CRD.replace("servicemonitors", "prometheusrules")
    .replace("ServiceMonitorList", "PrometheusRuleList")
    .replace("ServiceMonitor", "PrometheusRule")
    .replace("servicemonitor", "prometheusrule")
)
PODMONITOR_CRD = (
    SERVICEMONITOR_CRD.replace("servicemonitors", "podmonitors")
    .replace("ServiceMonitorList", "PodMonitorList")
    .replace("ServiceMonitor", "PodMonitor")
    .replace("servicemonitor", "podmonitor")
)


@pytest.mark.parametrize("values", CI_VALUES, ids=VALUES_IDS)
def test_every_rendered_object_passes_server_dry_run(values: Path, helm, cluster, kubectl, make_namespace, wait_until):
    install_crd(str(cluster.kubeconfig))
    if "servicemonitor" in values.name:
        kubectl("apply", "--server-side", "-f", "-", input=SERVICEMONITOR_CRD)
        kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "--timeout=60s")
        kubectl("apply", "--server-side", "-f", "-", input=PROMETHEUSRULE_CRD)
        kubectl("wait", "--for=condition=Established", "crd/prometheusrules.monitoring.coreos.com", "--timeout=60s")
        kubectl("apply", "--server-side", "-f", "-", input=PODMONITOR_CRD)
        kubectl("wait", "--for=condition=Established", "crd/podmonitors.monitoring.coreos.com", "--timeout=60s")
    release_ns = make_namespace()
    sets = []
    if "namespaced" in values.name:
        # The same layout as the values file, in namespaces that exist on this cluster.
        sets.append(f"watchNamespaces={{{make_namespace()},{make_namespace()}}}")
    release = f"tfps-{secrets.token_hex(3)}"
    rendered = template(helm, values, namespace=release_ns, release=release, sets=sets).stdout
    objs = objects(rendered)
    kinds = {o["kind"] for o in objs}
    assert {"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"} <= kinds
    # Server-side apply as a dry run: admission, schema validation and RBAC escalation checks run,
    # nothing is stored.
    # Every namespaced object names its namespace itself (no -n: kubectl would refuse the Roles).
    out = kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-", input=rendered)
    assert out.stdout.count("(server dry run)") == len(objs), out.stdout


def test_helm_install_rejects_a_bad_value_and_creates_nothing(helm, cluster, namespace):
    release = f"tfps-{secrets.token_hex(3)}"
    proc = run(
        [
            helm,
            "install",
            release,
            str(CHART),
            "-n",
            namespace,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--set",
            "operator.logFormat=xml",
            "--set",
            "watchNamespaces={Not_A_Namespace}",
        ],
        check=False,
    )
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert "logFormat" in proc.stderr and "watchNamespaces" in proc.stderr
    listed = run([helm, "list", "-n", namespace, "-q", "--kubeconfig", str(cluster.kubeconfig)]).stdout
    assert release not in listed


def test_namespaced_mode_is_minimal(helm, cluster, make_namespace):
    """Namespaced mode: in the watched namespace exactly the expected rules; nothing in any other
    namespace; cluster-wide only the reads Kopf needs."""
    release_ns, watched, other = make_namespace(), make_namespace(), make_namespace()
    with helm_install(helm, cluster, release_ns, sets=[f"watchNamespaces={{{watched}}}"]) as inst:
        assert allowed_rules(inst, watched) == EXPECTED_NAMESPACED | EXPECTED_CLUSTER_SCOPED["namespaced"]
        # Another namespace (and the operator's own) gets only the cluster-scoped reads.
        assert allowed_rules(inst, other) == EXPECTED_CLUSTER_SCOPED["namespaced"]
        assert allowed_rules(inst, release_ns) == EXPECTED_CLUSTER_SCOPED["namespaced"]
        _denied_everywhere(inst, watched)
        for verb, res in (
            ("create", "pods"),
            ("list", "pods"),
            ("watch", "pstrainingjobs.tfps.dev"),
            ("create", "events"),
            ("create", "jobs.batch"),
        ):
            assert can_i(inst, verb, res, namespace=watched)
            assert not can_i(inst, verb, res, namespace=other), f"{verb} {res} allowed outside the watched namespace"
        assert not can_i(inst, "list", "pods", all_namespaces=True)
        # Subresources are checked as such (not as object names): the granted one is allowed.
        assert can_i(inst, "patch", "pstrainingjobs.tfps.dev/status", namespace=watched)
        assert not can_i(inst, "patch", "pstrainingjobs.tfps.dev/status", namespace=other)


def test_clusterwide_mode_is_minimal(helm, cluster, make_namespace):
    release_ns, anywhere = make_namespace(), make_namespace()
    with helm_install(helm, cluster, release_ns) as inst:
        assert allowed_rules(inst, anywhere) == EXPECTED_NAMESPACED | EXPECTED_CLUSTER_SCOPED["clusterwide"]
        _denied_everywhere(inst, anywhere)
        assert can_i(inst, "watch", "pstrainingjobs.tfps.dev", all_namespaces=True)
        assert can_i(inst, "list", "pods", all_namespaces=True)
        assert not can_i(inst, "list", "namespaces")  # Kopf does not observe namespaces when cluster-wide


def _denied_everywhere(inst: Installed, ns: str) -> None:
    """What the operator never does, checked one by one (the `allowed_rules` equality already
    implies it; these name the dangerous cases explicitly)."""
    denied = [
        ("get", "secrets"),
        ("list", "secrets"),
        ("watch", "secrets"),
        ("create", "secrets"),
        ("get", "configmaps"),
        ("create", "serviceaccounts/token"),
        ("create", "pods/exec"),
        ("create", "pods/attach"),
        ("create", "pods/portforward"),
        ("get", "pods/log"),
        # (deletecollection on pods is granted: it deletes nothing that `delete pods` could not)
        ("update", "pods"),
        ("patch", "pods"),
        ("deletecollection", "services"),
        ("deletecollection", "jobs.batch"),
        ("delete", "services"),
        ("update", "services"),
        ("delete", "persistentvolumeclaims"),
        ("delete", "networkpolicies.networking.k8s.io"),
        ("patch", "jobs.batch"),
        ("update", "pstrainingjobs.tfps.dev"),
        ("create", "pstrainingjobs.tfps.dev"),
        ("update", "pstrainingjobs.tfps.dev/status"),
        ("create", "deployments.apps"),
        ("create", "roles.rbac.authorization.k8s.io"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
        ("list", "events"),
        ("delete", "events"),
    ]
    for verb, res in denied:
        assert not can_i(inst, verb, res, namespace=ns), f"the operator's account may {verb} {res} in {ns}"
    for verb, res in (
        ("list", "nodes"),
        ("create", "namespaces"),
        ("delete", "namespaces"),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        ("update", "customresourcedefinitions.apiextensions.k8s.io"),
        ("list", "persistentvolumes"),
    ):
        assert not can_i(inst, verb, res), f"the operator's account may {verb} {res}"
