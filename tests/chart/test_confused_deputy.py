"""No confused deputy, on the real API server with the chart's RBAC: a user who may create PSTrainingJobs
but not pods cannot obtain, through the operator's rights, a pod with the node's / mounted running as
root; in a namespace the chart's ``jobPodSecurity.relaxedNamespaces`` relaxes, the same job gets its pods.

The chart is `helm install`ed (namespaced mode, two watched namespaces, one relaxed); the operator runs
out-of-cluster with a token of the chart's ServiceAccount and the environment the chart's Deployment
gives it. The job's author is a ServiceAccount of its own with its own token, bound by a Role to
PSTrainingJobs and to reading pods. The namespaces carry no Pod Security labels: nothing but the
operator stands between the author and such a pod."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import ROOT
from .rbac import helm_install, release_name, token_kubeconfig

sys.path.insert(0, str(ROOT / "tests" / "operator"))
from operator_harness import Cluster, OperatorProcess, job_body

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

KWOK_HANDS_OFF = {"kwok.x-k8s.io/status": "custom"}
TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0"]
WT = "spec.replicas.worker.template"
HOST_ROOT_WORKER: dict[str, Any] = {
    "metadata": {"annotations": KWOK_HANDS_OFF},
    "spec": {
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        "volumeMounts": [{"name": "host", "mountPath": "/host"}],
        "podSecurityContext": {"runAsUser": 0},
        "securityContext": {"runAsUser": 0},
    },
}
AUTHOR_RULES = [
    {
        "apiGroups": ["tfps.dev"],
        "resources": ["pstrainingjobs"],
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]},
]


def _author(cluster: Any, k8s: Any, namespaces: list[str], tmp: Path) -> Path:
    """A ServiceAccount ``author`` in the first namespace, bound in each namespace to :data:`AUTHOR_RULES`
    (admin credentials); a kubeconfig holding only its token."""
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(k8s)
    home = namespaces[0]
    client.CoreV1Api(k8s).create_namespaced_service_account(home, {"metadata": {"name": "author"}})
    for ns in namespaces:
        rbac.create_namespaced_role(ns, {"metadata": {"name": "job-author"}, "rules": AUTHOR_RULES})
        rbac.create_namespaced_role_binding(
            ns,
            {
                "metadata": {"name": "job-author"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "job-author"},
                "subjects": [{"kind": "ServiceAccount", "name": "author", "namespace": home}],
            },
        )
    return token_kubeconfig(cluster, home, "author", tmp / "author-kubeconfig")


def _chart_env(k8s: Any, namespace: str, release: str) -> dict[str, str]:
    """The plain environment variables of the operator container of the installed Deployment."""
    from kubernetes import client

    dep = client.AppsV1Api(k8s).read_namespaced_deployment(f"{release}-tfps-operator", namespace)
    container = next(c for c in dep.spec.template.spec.containers if c.name == "operator")
    return {e.name: e.value for e in container.env or [] if e.value is not None}


def test_a_user_who_may_not_create_pods_cannot_obtain_a_host_root_pod_through_a_job(
    helm, cluster, k8s, make_namespace, wait_until, tmp_path: Path
):
    from kubernetes import config
    from kubernetes.client.rest import ApiException

    from support.crd import install_crd

    install_crd(str(cluster.kubeconfig))
    release_ns, strict, relaxed = make_namespace(), make_namespace(), make_namespace()
    admin = {ns: Cluster(k8s, ns, wait_until) for ns in (strict, relaxed)}
    for kube in admin.values():
        kube.bound_claim("data")
    author_kc = _author(cluster, k8s, [strict, relaxed], tmp_path)
    author_api = config.new_client_from_config(config_file=str(author_kc))
    author = {ns: Cluster(author_api, ns, wait_until) for ns in (strict, relaxed)}
    release = release_name()
    try:
        sets = [f"watchNamespaces={{{strict},{relaxed}}}", f"jobPodSecurity.relaxedNamespaces={{{relaxed}}}"]
        with helm_install(helm, cluster, release_ns, sets=sets, release=release) as inst:
            env = _chart_env(k8s, release_ns, release)
            assert env["TFPS_RELAXED_NAMESPACES"] == relaxed
            with OperatorProcess(
                str(inst.kubeconfig),
                [strict, relaxed],
                tmp_path / "operator.log",
                extra_env={
                    "TFPS_OPERATOR_NAMESPACE": release_ns,
                    "TFPS_RELAXED_NAMESPACES": env["TFPS_RELAXED_NAMESPACES"],
                },
            ).start() as op:
                # The author really cannot create pods: the API server answers 403, in both namespaces.
                for ns in (strict, relaxed):
                    pod = {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": "direct"},
                        "spec": {
                            "containers": [{"name": "c", "image": "busybox", "securityContext": {"runAsUser": 0}}],
                            "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                        },
                    }
                    with pytest.raises(ApiException) as denied:
                        author[ns].core.create_namespaced_pod(ns, pod)
                    assert denied.value.status == 403, denied.value.body
                # The same pod the admin may create (no Pod Security labels): only RBAC stops the author.
                admin[strict].core.create_namespaced_pod(strict, pod, dry_run="All")

                # 1. Default namespace: the job fails as InvalidSpec naming each field; no pod, nothing else.
                body = job_body("j", workers=1)
                body["spec"]["replicas"]["worker"]["template"] = HOST_ROOT_WORKER
                author[strict].create_job(body)
                st = author[strict].wait_phase("j", "Failed", timeout=60)
                failed = author[strict].condition("j", "Failed")
                assert st["reason"] == "InvalidSpec" and failed is not None and failed["reason"] == "InvalidSpec"
                for field in (
                    f"{WT}.spec.volumes[0].hostPath: hostPath volumes are refused",
                    f"{WT}.spec.podSecurityContext.runAsUser: 0 runs as root",
                    f"{WT}.spec.securityContext.runAsUser: 0 runs as root",
                ):
                    assert field in failed["message"], failed
                assert "jobPodSecurity.relaxedNamespaces" in failed["message"]
                admin[strict].wait_until(  # the Event is posted after the status write
                    lambda: "InvalidSpec" in admin[strict].event_reasons("j"), timeout=20, what="InvalidSpec Event"
                )
                time.sleep(2)  # a pass more would have created them by now
                assert admin[strict].pods() == {}
                sel = "tfps.dev/job-name=j"
                assert admin[strict].core.list_namespaced_service(strict, label_selector=sel).items == []

                # 2. Relaxed namespace: the same job, from the same author, gets its pods as asked.
                author[relaxed].create_job(body)
                pods = wait_until(
                    lambda: (p := admin[relaxed].trainer_pods("j")) and sorted(p) == TRAINERS and p,
                    timeout=60,
                    what="the relaxed job's pods",
                )
                worker = pods["j-worker-0"]["spec"]
                assert [v["hostPath"]["path"] for v in worker["volumes"] if v["name"] == "host"] == ["/"]
                assert worker["securityContext"]["runAsUser"] == 0
                assert worker["containers"][0]["securityContext"]["runAsUser"] == 0
                assert author[relaxed].status("j").get("phase") != "Failed"
                assert admin[strict].pods() == {}  # still nothing in the other namespace
                assert op.proc is not None and op.proc.poll() is None, "operator exited"
    finally:
        author_api.close()
        for ns in (strict, relaxed):
            try:
                admin[ns].core.delete_persistent_volume(f"{ns}-data")
            except Exception:
                pass
