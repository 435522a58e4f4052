"""The chart's RBAC is sufficient: `helm install` it (namespaced mode) into hack/cluster, then run the
real operator out-of-cluster with nothing but a TokenRequest token of the chart's ServiceAccount,
and drive full job lifecycles (pods, Service, NetworkPolicy, PVC, export Job, status, events, TTL
deletion, deletion of a job). The tests play kubelet with tests/operator's harness.

Only namespaced mode runs an operator here: a cluster-wide operator would act on every test's
namespace of the shared control plane. Cluster-wide mode grants the same namespaced rules through a
ClusterRole (test_chart_render.py checks they are equal; test_chart_cluster.py its minimality)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .helpers import ROOT
from .rbac import helm_install

sys.path.insert(0, str(ROOT / "tests" / "operator"))
from operator_harness import Cluster, OperatorProcess, job_body

from tfps_wire.export_result import ArtifactResult, ExportSucceeded, encode

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(420)]

KWOK_HANDS_OFF = {"metadata": {"annotations": {"kwok.x-k8s.io/status": "custom"}}}
TRAINERS = ["j-chief-0", "j-ps-0", "j-worker-0", "j-worker-1"]
PERMISSION_ERRORS = ("Forbidden", "is forbidden", "Not enough permissions", "status=403")  # API, Kopf, client


@pytest.fixture(scope="module")
def helm(cluster) -> str:
    return str(cluster.bin / "helm")


def test_operator_with_the_charts_serviceaccount_runs_full_lifecycles(
    helm, cluster, k8s, make_namespace, wait_until, tmp_path: Path
):
    from support.crd import install_crd

    install_crd(str(cluster.kubeconfig))
    release_ns, watched = make_namespace(), make_namespace()
    kube = Cluster(k8s, watched, wait_until)
    kube.bound_claim("data")  # admin: PersistentVolumes are the cluster admin's business
    try:
        with (
            helm_install(helm, cluster, release_ns, sets=[f"watchNamespaces={{{watched}}}"]) as inst,
            OperatorProcess(
                str(inst.kubeconfig),
                [watched],
                tmp_path / "operator.log",
                extra_env={"TFPS_OPERATOR_NAMESPACE": release_ns},
            ).start() as op,
        ):
            # 1. Training, then export: pods + Service + NetworkPolicy, status, export Job, events.
            kube.create_job(job_body("j", export=True, chief_template=KWOK_HANDS_OFF))
            wait_until(lambda: sorted(kube.trainer_pods("j")) == TRAINERS, timeout=30, what="all trainer pods")
            kube.wait_until(lambda: kube.core.list_namespaced_service(watched).items, timeout=20, what="Service")
            kube.wait_until(
                lambda: kube.net.list_namespaced_network_policy(watched).items, timeout=20, what="NetworkPolicy"
            )
            job = kube.job("j")
            assert not job["metadata"].get("finalizers")  # nothing blocks its deletion
            kube.finish_pod("j-chief-0", "Succeeded", 0)
            kube.wait_phase("j", "Exporting", timeout=60)
            export_pod = wait_until(
                lambda: next(iter(kube.pods("job-name=j-export")), None), timeout=30, what="export pod"
            )
            result = ExportSucceeded(
                step=10,
                path="exports/10",
                manifest="exports/10/manifest.json",
                artifacts=[
                    ArtifactResult(
                        format="onnx", path="exports/10/model.onnx", bytes=4096, sha256="cd" * 32, max_error=1e-7
                    )
                ],
            )
            kube.finish_pod(export_pod, "Succeeded", 0, encode(result))
            st = kube.wait_phase("j", "Succeeded", timeout=60)
            assert st["export"]["jobName"] == "j-export"
            assert [a["sha256"] for a in st["export"]["artifacts"]] == ["cd" * 32]
            # Running PS and workers were deleted by the operator (cleanPodPolicy Running).
            wait_until(lambda: sorted(kube.trainer_pods("j")) == ["j-chief-0"], timeout=30, what="ps/workers deleted")
            events = kube.events("j")
            assert {e["source"].get("component") for e in events if e.get("source")} >= {"tfps-operator"}
            assert "TrainingSucceeded" in kube.event_reasons("j") or "ExportSucceeded" in kube.event_reasons("j")

            # 2. A claim template: the operator creates the job's PVC.
            body = job_body("k")
            body["spec"]["storage"] = {"volumeClaimTemplate": {"size": "1Gi", "storageClassName": "none-such"}}
            kube.create_job(body)
            pvc = wait_until(
                lambda: (
                    kube.core.list_namespaced_persistent_volume_claim(
                        watched, label_selector="tfps.dev/job-name=k"
                    ).items
                ),
                timeout=30,
                what="PVC created",
            )[0]
            assert pvc.metadata.owner_references[0].name == "k"

            # 3. ttlSecondsAfterFinished: the operator deletes the finished job itself.
            kube.create_job(job_body("t", run_policy={"ttlSecondsAfterFinished": 1}))
            wait_until(lambda: "t-chief-0" in kube.trainer_pods("t"), timeout=30, what="chief of t")
            kube.wait_until(
                lambda: kube.trainer_pods("t")["t-chief-0"]["status"].get("phase") == "Running",
                timeout=30,
                what="chief of t running",
            )
            kube.finish_pod("t-chief-0", "Succeeded", 0)
            wait_until(lambda: kube.job("t") is None, timeout=60, what="job t deleted by its TTL")

            # 4. Deleting a job: it goes (no finalizer).
            kube.delete_job("j")
            kube.delete_job("k")
            wait_until(
                lambda: kube.job("j") is None and kube.job("k") is None,
                timeout=60,
                what="jobs gone",
            )

            log = op.log()
            denied = [line for line in log.splitlines() if any(s in line for s in PERMISSION_ERRORS)]
            assert not denied, "the operator hit missing permissions:\n" + "\n".join(denied[:20])
            assert op.proc is not None and op.proc.poll() is None, "operator exited"
    finally:
        try:
            kube.core.delete_persistent_volume(f"{watched}-data")
        except Exception:
            pass


def test_peering_rules_suffice_for_a_peered_operator(
    helm, cluster, k8s, kubectl, make_namespace, wait_until, tmp_path: Path
):
    """With operator.peering set, the chart's Role lets Kopf use the KopfPeering object (watch, patch
    its heartbeat), and the peered operator serves jobs."""
    import yaml

    from support.crd import install_crd
    from tfps_operator.peering import manifests

    install_crd(str(cluster.kubeconfig))
    release_ns, watched = make_namespace(), make_namespace()
    peering = "tfps-chart"
    # CRDs first, and only once they are Established the peering object: in one apply, on a cluster
    # that never had these CRDs, kubectl cannot map the new kind yet ("no matches for kind").
    docs = manifests(peering, [watched])
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    kubectl("apply", "--server-side", "--field-manager=tfps-tests", "-f", "-", input=yaml.safe_dump_all(crds))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{d['metadata']['name']}" for d in crds])
    kubectl(
        "apply",
        "--server-side",
        "--field-manager=tfps-tests",
        "-f",
        "-",
        input=yaml.safe_dump_all([d for d in docs if d not in crds]),
    )
    kube = Cluster(k8s, watched, wait_until)
    kube.bound_claim("data")
    try:
        with (
            helm_install(
                helm, cluster, release_ns, sets=[f"watchNamespaces={{{watched}}}", f"operator.peering={peering}"]
            ) as inst,
            OperatorProcess(
                str(inst.kubeconfig),
                [watched],
                tmp_path / "operator.log",
                extra_env={"TFPS_OPERATOR_NAMESPACE": release_ns, "TFPS_PEERING_LIFETIME": "10"},
                extra_args=["--peering", peering],
            ).start() as op,
        ):
            # Kopf registered this replica in the peering object: it could watch and patch it.
            def registered() -> bool:
                obj = json.loads(kubectl("get", "kopfpeerings.kopf.dev", peering, "-n", watched, "-o", "json").stdout)
                return bool(obj.get("status"))

            wait_until(registered, timeout=30, what="operator's heartbeat in the KopfPeering")
            kube.create_job(job_body("j"))
            wait_until(lambda: sorted(kube.trainer_pods("j")) == TRAINERS, timeout=30, what="trainer pods")
            kube.wait_phase("j", "Running", timeout=30)
            kube.delete_job("j")
            wait_until(lambda: kube.job("j") is None, timeout=60, what="job gone")
            denied = [line for line in op.log().splitlines() if any(s in line for s in PERMISSION_ERRORS)]
            assert not denied, "the operator hit missing permissions:\n" + "\n".join(denied[:20])
    finally:
        try:
            kube.core.delete_persistent_volume(f"{watched}-data")
        except Exception:
            pass


def test_kueue_rules_suffice_for_a_queued_job(helm, cluster, k8s, make_namespace, wait_until, tmp_path: Path):
    """With kueue.enabled, the chart's RBAC lets the operator create a queued job's Workload, read the
    PriorityClass it names and the flavor it is admitted to, and mark the Workload Finished."""
    from kubernetes import client

    from support import kueue
    from support.crd import install_crd

    install_crd(str(cluster.kubeconfig))
    release_ns, watched = make_namespace(), make_namespace()
    kube = Cluster(k8s, watched, wait_until)
    kube.bound_claim("data")
    name = watched  # cluster-scoped Kueue objects of this test
    kube.custom.create_cluster_custom_object(*kueue.API, "resourceflavors", kueue.resource_flavor(name))
    kube.custom.create_cluster_custom_object(*kueue.API, "clusterqueues", kueue.cluster_queue(name, watched, name, "8"))
    kube.custom.create_namespaced_custom_object(*kueue.API, watched, "localqueues", kueue.local_queue("lq", name))
    k8s_sched = client.SchedulingV1Api(k8s)
    k8s_sched.create_priority_class({"metadata": {"name": name}, "value": 1000})
    try:
        sets = [f"watchNamespaces={{{watched}}}", "kueue.enabled=true"]
        with (
            helm_install(helm, cluster, release_ns, sets=sets) as inst,
            OperatorProcess(
                str(inst.kubeconfig),
                [watched],
                tmp_path / "operator.log",
                extra_env={"TFPS_OPERATOR_NAMESPACE": release_ns, "TFPS_KUEUE": "true"},
            ).start() as op,
        ):
            policy = {"schedulingPolicy": {"queue": "lq", "priorityClass": name}}
            body = job_body("j", run_policy=policy)
            for role in ("chief", "ps", "worker"):
                body["spec"]["replicas"][role]["template"] = {"spec": {"resources": {"requests": {"cpu": "1"}}}}
            kube.create_job(body)
            wait_until(lambda: sorted(kube.trainer_pods("j")) == TRAINERS, timeout=60, what="pods once admitted")
            wl = kube.custom.get_namespaced_custom_object(*kueue.API, watched, "workloads", "psjob-j")
            assert wl["spec"]["priority"] == 1000
            kube.wait_phase("j", "Running", timeout=30)
            kube.finish_pod("j-chief-0", "Succeeded", 0)
            kube.wait_phase("j", "Succeeded", timeout=60)

            def finished() -> bool:
                w = kube.custom.get_namespaced_custom_object(*kueue.API, watched, "workloads", "psjob-j")
                return any(c["type"] == "Finished" and c["status"] == "True" for c in w["status"]["conditions"])

            wait_until(finished, timeout=30, what="Workload Finished")
            denied = [line for line in op.log().splitlines() if any(s in line for s in PERMISSION_ERRORS)]
            assert not denied, "the operator hit missing permissions:\n" + "\n".join(denied[:20])
    finally:
        for call in (
            lambda: kube.custom.delete_cluster_custom_object(*kueue.API, "clusterqueues", name),
            lambda: kube.custom.delete_cluster_custom_object(*kueue.API, "resourceflavors", name),
            lambda: k8s_sched.delete_priority_class(name),
            lambda: kube.core.delete_persistent_volume(f"{watched}-data"),
        ):
            try:
                call()
            except Exception:
                pass
