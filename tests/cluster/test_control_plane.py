"""The hack/cluster control plane is real: etcd, kube-apiserver, controller-manager, scheduler, kwok.

Each test exercises a component that a stand-in would not have: the scheduler binding pods to kwok
nodes, the Deployment/Job/GC/namespace controllers, PodSecurity admission and RBAC on a real
service-account token.
"""

from __future__ import annotations

import base64
import ipaddress
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.cluster

IMAGE = "tfps.invalid/never-pulled:1"  # kwok runs no containers; nothing is ever pulled
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
POOL_LABEL = "tfps.dev/test-pool"  # tests/operator/conftest.py's `pool` nodes carry it


def _container(name: str = "main") -> client.V1Container:
    return client.V1Container(name=name, image=IMAGE)


def _pod_template(labels: dict[str, str], restart: str = "Always") -> client.V1PodTemplateSpec:
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels=labels),
        spec=client.V1PodSpec(containers=[_container()], restart_policy=restart),
    )


def _status_code(fn: Callable[[], Any]) -> int:
    try:
        fn()
        return 200
    except ApiException as e:
        return e.status


def test_readyz_ok_and_server_is_the_pinned_kubernetes(cluster, kubectl) -> None:
    assert kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    verbose = kubectl("get", "--raw", "/readyz?verbose").stdout
    assert "[+]etcd ok" in verbose
    assert "[+]poststarthook/rbac/bootstrap-roles ok" in verbose
    version = yaml.safe_load(kubectl("version", "-o", "yaml").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.")
    assert cluster.server.startswith("https://127.0.0.1:")


def test_kwok_nodes_are_ready_with_loopback_addresses(k8s) -> None:
    # hack/cluster's nodes, not the pools tests/operator/conftest.py adds for one test (and removes): under
    # pytest-xdist one may be created, not yet Ready, while this runs.
    nodes = client.CoreV1Api(k8s).list_node(label_selector=f"type=kwok,!{POOL_LABEL}").items
    assert len(nodes) >= 2
    for node in nodes:
        ready = {c.type: c.status for c in node.status.conditions}["Ready"]
        assert ready == "True", node.metadata.name
        for addr in node.status.addresses:
            if addr.type == "InternalIP":
                assert ipaddress.ip_address(addr.address) in LOOPBACK, (node.metadata.name, addr.address)
        assert ipaddress.ip_network(node.spec.pod_cidr).subnet_of(LOOPBACK)


def test_deployment_pods_are_scheduled_onto_kwok_nodes_and_run(k8s, namespace, wait_until) -> None:
    apps, core = client.AppsV1Api(k8s), client.CoreV1Api(k8s)
    labels = {"app": "web"}
    apps.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1DeploymentSpec(
                replicas=4, selector=client.V1LabelSelector(match_labels=labels), template=_pod_template(labels)
            ),
        ),
    )

    def available() -> bool:
        st = apps.read_namespaced_deployment_status("web", namespace).status
        return st.available_replicas == 4

    wait_until(available, timeout=90, what="deployment web to have 4 available replicas")
    kwok_nodes = {n.metadata.name for n in core.list_node(label_selector="type=kwok").items}
    pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
    assert len(pods) == 4
    for pod in pods:
        assert pod.status.phase == "Running"
        assert pod.spec.node_name in kwok_nodes
        assert ipaddress.ip_address(pod.status.pod_ip) in LOOPBACK, pod.status.pod_ip
        assert ipaddress.ip_address(pod.status.host_ip) in LOOPBACK, pod.status.host_ip
        scheduled = {c.type: c.status for c in pod.status.conditions}["PodScheduled"]
        assert scheduled == "True"
    assert len({p.status.pod_ip for p in pods}) == 4, "pod IPs must be unique"
    events = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    assert {e.involved_object.name for e in events} >= {p.metadata.name for p in pods}
    assert all(
        e.reporting_component == "default-scheduler" or e.source.component == "default-scheduler" for e in events
    )


def test_job_completes(k8s, namespace, wait_until) -> None:
    batch = client.BatchV1Api(k8s)
    batch.create_namespaced_job(
        namespace,
        client.V1Job(
            metadata=client.V1ObjectMeta(name="once"),
            spec=client.V1JobSpec(
                completions=2, parallelism=2, backoff_limit=0, template=_pod_template({"job": "once"}, "Never")
            ),
        ),
    )

    def complete() -> bool:
        st = batch.read_namespaced_job_status("once", namespace).status
        return any(c.type == "Complete" and c.status == "True" for c in st.conditions or [])

    wait_until(complete, timeout=90, what="job once to complete")
    st = batch.read_namespaced_job_status("once", namespace).status
    assert st.succeeded == 2 and not st.failed
    pods = client.CoreV1Api(k8s).list_namespaced_pod(namespace, label_selector="job=once").items
    assert [p.status.phase for p in pods] == ["Succeeded", "Succeeded"]


def test_deleting_owner_garbage_collects_dependents(k8s, namespace, wait_until) -> None:
    core = client.CoreV1Api(k8s)
    owner = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner")))
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    for i in range(3):
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"dep-{i}", owner_references=[ref]))
        )
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="bystander")))

    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")

    def dependents_gone() -> bool:
        names = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
        return not names & {"dep-0", "dep-1", "dep-2"}

    wait_until(dependents_gone, timeout=60, what="garbage collection of dep-0..2")
    assert _status_code(lambda: core.read_namespaced_config_map("bystander", namespace)) == 200


def test_namespace_deletion_is_finalized(k8s, make_namespace, wait_until) -> None:
    core = client.CoreV1Api(k8s)
    ns = make_namespace()
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="leftover")))
    core.delete_namespace(ns)
    wait_until(lambda: _status_code(lambda: core.read_namespace(ns)) == 404, timeout=90, what=f"namespace {ns} to go")


def test_controllers_use_their_own_service_accounts(k8s) -> None:
    names = {sa.metadata.name for sa in client.CoreV1Api(k8s).list_namespaced_service_account("kube-system").items}
    assert {"job-controller", "generic-garbage-collector", "namespace-controller"} <= names


def _privileged_pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(name="main", image=IMAGE, security_context=client.V1SecurityContext(privileged=True))
            ]
        ),
    )


def test_restricted_namespace_rejects_privileged_pod(k8s, make_namespace) -> None:
    core = client.CoreV1Api(k8s)
    restricted = make_namespace(labels={"pod-security.kubernetes.io/enforce": "restricted"})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(restricted, _privileged_pod("priv"))
    assert err.value.status == 403
    assert "violates PodSecurity" in err.value.body and "privileged" in err.value.body
    # Control: the same pod is admitted where no policy is enforced, so the label made the difference.
    plain = make_namespace()
    core.create_namespaced_pod(plain, _privileged_pod("priv"), dry_run="All")


def _ca_file(kubeconfig: str) -> str:
    with open(kubeconfig) as cf:
        cfg = yaml.safe_load(cf)
    data = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])
    with tempfile.NamedTemporaryFile(prefix="tfps-ca-", suffix=".crt", delete=False) as f:
        f.write(data)
    return f.name


def test_rbac_limited_service_account_token(k8s, cluster, kubeconfig, namespace) -> None:
    core, rbac = client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="reader"))
    )
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list", "watch"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="reader-reads-pods"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace=namespace)],
        ),
    )
    token = core.create_namespaced_service_account_token(
        "reader",
        namespace,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)),
    ).status.token

    conf = client.Configuration(host=cluster.server)
    conf.ssl_ca_cert = _ca_file(kubeconfig)
    conf.api_key = {"authorization": token}
    conf.api_key_prefix = {"authorization": "Bearer"}
    with client.ApiClient(conf) as sa_api:
        who = client.AuthenticationV1Api(sa_api).create_self_subject_review(client.V1SelfSubjectReview())
        assert who.status.user_info.username == f"system:serviceaccount:{namespace}:reader"
        sa_core = client.CoreV1Api(sa_api)
        assert _status_code(lambda: sa_core.list_namespaced_pod(namespace)) == 200
        assert _status_code(lambda: sa_core.list_namespaced_secret(namespace)) == 403
        assert _status_code(lambda: sa_core.list_namespaced_pod("default")) == 403
        assert _status_code(lambda: sa_core.create_namespaced_pod(namespace, _privileged_pod("nope"))) == 403
        assert _status_code(lambda: sa_core.list_node()) == 403
    bad = client.Configuration(host=cluster.server)
    bad.ssl_ca_cert = conf.ssl_ca_cert
    bad.api_key = {"authorization": token[:-4] + "AAAA"}
    bad.api_key_prefix = {"authorization": "Bearer"}
    with client.ApiClient(bad) as bad_api:
        assert _status_code(lambda: client.CoreV1Api(bad_api).list_namespaced_pod(namespace)) == 401


@pytest.mark.parametrize("phase,exit_code,reason", [("Failed", 137, "OOMKilled"), ("Succeeded", 0, "Completed")])
def test_patched_terminal_pod_status_sticks(k8s, namespace, wait_until, phase, exit_code, reason) -> None:
    """What hack/README.md tells operator tests: patch a Running kwok pod's status to a terminal phase."""
    core = client.CoreV1Api(k8s)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="worker-0"),
        spec=client.V1PodSpec(containers=[_container()], restart_policy="Never"),
    )
    core.create_namespaced_pod(namespace, pod)
    wait_until(
        lambda: core.read_namespaced_pod_status("worker-0", namespace).status.phase == "Running",
        timeout=60,
        what="pod worker-0 Running",
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {"exitCode": exit_code, "reason": reason, "startedAt": now, "finishedAt": now}
    patch = {
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": terminated},
                }
            ],
        }
    }
    core.patch_namespaced_pod_status("worker-0", namespace, patch)

    time.sleep(3)  # give kwok time to (wrongly) react; it must not
    st = core.read_namespaced_pod_status("worker-0", namespace).status
    assert st.phase == phase
    term = st.container_statuses[0].state.terminated
    assert term is not None and term.exit_code == exit_code and term.reason == reason


def test_pod_annotated_status_custom_is_left_to_the_test(k8s, namespace, wait_until) -> None:
    """hack/README.md: kwok ignores pods annotated kwok.x-k8s.io/status=custom; the test owns their status."""
    core = client.CoreV1Api(k8s)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="held", annotations={"kwok.x-k8s.io/status": "custom"}),
        spec=client.V1PodSpec(containers=[_container()], restart_policy="Never"),
    )
    core.create_namespaced_pod(namespace, pod)
    wait_until(
        lambda: core.read_namespaced_pod("held", namespace).spec.node_name, timeout=30, what="pod held scheduled"
    )
    time.sleep(2)  # kwok would have made it Running by now
    assert core.read_namespaced_pod_status("held", namespace).status.phase == "Pending"
    core.patch_namespaced_pod_status(
        "held", namespace, {"status": {"phase": "Running", "podIP": "127.1.1.250", "podIPs": [{"ip": "127.1.1.250"}]}}
    )
    time.sleep(1)
    st = core.read_namespaced_pod_status("held", namespace).status
    assert (st.phase, st.pod_ip) == ("Running", "127.1.1.250")
    # Nothing confirms a graceful deletion of such a pod; force it (the namespace fixture does the same).
    core.delete_namespaced_pod("held", namespace, grace_period_seconds=0)
    wait_until(
        lambda: _status_code(lambda: core.read_namespaced_pod("held", namespace)) == 404,
        timeout=30,
        what="pod held deleted",
    )


def test_gang_scheduler_binds_a_pod_group_only_when_min_member_pods_exist(k8s, namespace, wait_until) -> None:
    """scheduler-plugins' Coscheduling, as hack/cluster runs it: a PodGroup of minMember 2 with one pod
    binds nothing (and the pod says why); the second pod lets both bind; its controller reports the group."""
    core, custom = client.CoreV1Api(k8s), client.CustomObjectsApi(k8s)
    custom.create_namespaced_custom_object(
        "scheduling.x-k8s.io",
        "v1alpha1",
        namespace,
        "podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2},
        },
    )

    def member(name: str) -> client.V1Pod:
        return client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"scheduling.x-k8s.io/pod-group": "g"}),
            spec=client.V1PodSpec(containers=[_container()], scheduler_name="scheduler-plugins-scheduler"),
        )

    core.create_namespaced_pod(namespace, member("p0"))

    def refused() -> str | None:
        pod = core.read_namespaced_pod("p0", namespace)
        cond = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
        return cond.message if cond is not None and cond.status == "False" and cond.message else None

    message = wait_until(refused, timeout=60, interval=0.5, what="p0 refused by the gang scheduler")
    assert "minMember" in message or "sibling" in message, message
    assert core.read_namespaced_pod("p0", namespace).spec.node_name is None
    core.create_namespaced_pod(namespace, member("p1"))
    wait_until(
        lambda: all(core.read_namespaced_pod(n, namespace).status.phase == "Running" for n in ("p0", "p1")),
        timeout=90,
        interval=0.5,
        what="both members bound and Running",
    )
    wait_until(
        lambda: (
            (
                custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "g").get(
                    "status"
                )
                or {}
            ).get("phase")
            == "Running"
        ),
        timeout=60,
        interval=0.5,
        what="PodGroup g phase Running (the PodGroup controller)",
    )
