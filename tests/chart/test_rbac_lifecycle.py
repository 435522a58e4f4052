"""The chart's RBAC is sufficient: `helm install` it (namespaced mode) into hack/cluster, then run the
real operator out-of-cluster with nothing but a TokenRequest token of the chart's ServiceAccount,
and drive full job lifecycles (pods, Service, NetworkPolicy, PVC, export Job, status, events, TTL
deletion, deletion of a job). The tests play kubelet with tests/operator's harness.

Only namespaced mode runs an operator here: a cluster-wide operator would act on every test's
namespace of the shared control plane. Cluster-wide mode grants the same namespaced rules through a
ClusterRole (test_chart_render.py checks they are equal; test_chart_cluster.py its minimality)."""

from __future__ import annotations

import json
import subprocess
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


def test_leader_election_rules_suffice_for_an_elected_operator(
    helm, cluster, k8s, kubectl, make_namespace, wait_until, tmp_path: Path
):
    """With leaderElection.enabled, the chart's Role lets the operator create and renew its Lease (the one
    its Deployment names) in the release namespace, and nothing else about leases; the elected operator
    serves jobs."""
    from support.crd import install_crd

    install_crd(str(cluster.kubeconfig))
    release_ns, watched = make_namespace(), make_namespace()
    kube = Cluster(k8s, watched, wait_until)
    kube.bound_claim("data")
    sets = [f"watchNamespaces={{{watched}}}", "leaderElection.enabled=true"]
    try:
        with helm_install(helm, cluster, release_ns, sets=sets) as inst:
            roles = json.loads(kubectl("get", "roles", "-n", release_ns, "-o", "json").stdout)["items"]
            (role,) = [r for r in roles if r["metadata"]["name"].endswith("-leader-election")]
            lease = next(r["resourceNames"][0] for r in role["rules"] if r.get("resourceNames"))
            env = {
                "TFPS_OPERATOR_NAMESPACE": release_ns,
                "TFPS_LEADER_ELECTION": "true",
                "TFPS_LEASE_NAME": lease,
                "TFPS_LEASE_DURATION_SECONDS": "6",
                "TFPS_RENEW_DEADLINE_SECONDS": "4",
                "TFPS_RETRY_PERIOD_SECONDS": "1",
            }
            with OperatorProcess(
                str(inst.kubeconfig), [watched], tmp_path / "operator.log", extra_env=env
            ).start() as op:
                renewals: set[str] = set()

                def renewed_twice() -> bool:
                    out = kubectl("get", "lease", lease, "-n", release_ns, "-o", "json", check=False)
                    if out.returncode != 0:
                        return False
                    spec = json.loads(out.stdout)["spec"]
                    renewals.add(spec.get("renewTime") or "")
                    return bool(spec.get("holderIdentity")) and len(renewals - {""}) >= 2

                wait_until(renewed_twice, timeout=30, interval=0.5, what="the operator's Lease created and renewed")
                kube.create_job(job_body("j"))
                wait_until(lambda: sorted(kube.trainer_pods("j")) == TRAINERS, timeout=30, what="trainer pods")
                kube.wait_phase("j", "Running", timeout=30)
                kube.delete_job("j")
                wait_until(lambda: kube.job("j") is None, timeout=60, what="job gone")
                denied = [line for line in op.log().splitlines() if any(s in line for s in PERMISSION_ERRORS)]
                assert not denied, "the operator hit missing permissions:\n" + "\n".join(denied[:20])
            # The chart's token may read and renew only that Lease: another in the same namespace is refused.
            kubectl_bin = str(cluster.bin / "kubectl")
            other = subprocess.run(
                [kubectl_bin, f"--kubeconfig={inst.kubeconfig}", "get", "lease", "x", "-n", release_ns],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr
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


@pytest.mark.serial  # alone: KServe's CRDs installed and removed (tests/README.md, "Parallel runs")
def test_serving_rules_suffice_to_create_and_roll_forward_an_inference_service(
    helm, cluster, k8s, make_namespace, wait_until, tmp_path: Path
):
    """The chart's get/create/patch on inferenceservices let the operator read, create and roll forward a
    served job's InferenceService (KServe's own CRDs, tests/support/kserve.py), and nothing is denied."""
    from support import kserve
    from support.crd import install_crd

    install_crd(str(cluster.kubeconfig))
    release_ns, watched = make_namespace(), make_namespace()
    kube = Cluster(k8s, watched, wait_until)
    kube.bound_claim("data")

    def served(job: str, step: int) -> None:
        kube.create_job(
            job_body(
                job,
                export=True,
                chief_template=KWOK_HANDS_OFF,
                export_spec={"formats": ["savedmodel", "onnx"], "required": ["savedmodel", "onnx"]},
                serving={"runtime": "onnx", "name": "ranker"},
            )
        )
        wait_until(lambda: f"{job}-chief-0" in kube.trainer_pods(job), timeout=30, what=f"chief of {job}")
        kube.finish_pod(f"{job}-chief-0", "Succeeded", 0)
        kube.wait_phase(job, "Exporting", timeout=60)
        pod = wait_until(lambda: next(iter(kube.pods(f"job-name={job}-export")), None), timeout=30, what="export pod")
        result = ExportSucceeded(
            step=step,
            path=f"exports/{step}",
            manifest=f"exports/{step}/manifest.json",
            artifacts=[
                ArtifactResult(format="savedmodel", path=f"exports/{step}/savedmodel", bytes=5, sha256="ab" * 32),
                ArtifactResult(format="onnx", path=f"exports/{step}/model.onnx", bytes=5, sha256="cd" * 32),
            ],
        )
        kube.finish_pod(pod, "Succeeded", 0, encode(result))
        wait_until(
            lambda: (kube.condition(job, "Serving") or {}).get("reason") == "InferenceServiceApplied",
            timeout=60,
            what=f"{job} served (Serving: {kube.condition(job, 'Serving')})",
        )

    try:
        with (
            kserve.installed(k8s),
            helm_install(helm, cluster, release_ns, sets=[f"watchNamespaces={{{watched}}}"]) as inst,
            OperatorProcess(
                str(inst.kubeconfig),
                [watched],
                tmp_path / "operator.log",
                extra_env={"TFPS_OPERATOR_NAMESPACE": release_ns},
            ).start() as op,
        ):
            served("j", 10)  # get (absent), create
            served("k", 20)  # get, patch
            isvc = kube.custom.get_namespaced_custom_object(
                kserve.GROUP, kserve.VERSION, watched, kserve.PLURAL, "ranker"
            )
            assert (
                isvc["spec"]["predictor"]["model"]["storageUri"] == f"pvc://data/{watched}/k/exports/20/kserve/triton"
            )
            denied = [line for line in op.log().splitlines() if any(s in line for s in PERMISSION_ERRORS)]
            assert not denied, "the operator hit missing permissions:\n" + "\n".join(denied[:20])
    finally:
        try:
            kube.core.delete_persistent_volume(f"{watched}-data")
        except Exception:
            pass
