"""The manifests the operator creates, checked field by field like the YAML they become."""

from __future__ import annotations

import json

import pytest

from support.operator_helpers import CFG, UID, make_job
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.netpol import network_policy
from tfps_operator.manifests.pods import BuildError, desired_pods, trainer_pod
from tfps_operator.manifests.pvc import storage_claim
from tfps_operator.manifests.service import headless_service
from tfps_operator.settings import BuildConfig
from tfps_wire.job_settings import DEFAULT_PROGRESS_PORT, DEFAULT_STEPS_PER_CLOSURE, JobSettings

OWNER = {
    "apiVersion": "tfps.dev/v1alpha1",
    "kind": "PSTrainingJob",
    "name": "mnist",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_worker_pod_reads_like_its_manifest():
    pod = trainer_pod(make_job(), "worker", 1, CFG)
    assert pod["metadata"] == {
        "name": "mnist-worker-1",
        "namespace": "team-a",
        "labels": {
            "app.kubernetes.io/name": "tfps",
            "app.kubernetes.io/instance": "mnist",
            "app.kubernetes.io/component": "worker",
            "app.kubernetes.io/managed-by": "tfps-operator",
            "app.kubernetes.io/part-of": "tfps",
            "tfps.dev/job-name": "mnist",
            "tfps.dev/replica-type": "worker",
            "tfps.dev/replica-index": "1",
            "tfps.dev/restart": "0",
        },
        "ownerReferences": [OWNER],
    }
    spec = pod["spec"]
    assert spec["hostname"] == "mnist-worker-1" and spec["subdomain"] == "mnist"
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    c = spec["containers"][0]
    assert c["image"] == "tfps-trainer:test"
    assert c["command"] == ["python", "-m", "tfps_trainer"]
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert c["ports"] == [{"name": "grpc", "containerPort": 2222, "protocol": "TCP"}]
    assert c["volumeMounts"][0] == {"name": "storage", "mountPath": "/tfps"}


def test_tf_config_uses_pod_dns_names_and_excludes_the_evaluator():
    job = make_job(ps=2, workers=2, evaluator=1)
    pods = desired_pods(job, CFG)
    assert list(pods) == [
        "mnist-chief-0",
        "mnist-ps-0",
        "mnist-ps-1",
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-evaluator-0",
    ]
    tf = json.loads(env(pods["mnist-ps-1"])["TF_CONFIG"])
    assert tf == {
        "cluster": {
            "chief": ["mnist-chief-0.mnist.team-a.svc:2222"],
            "ps": ["mnist-ps-0.mnist.team-a.svc:2222", "mnist-ps-1.mnist.team-a.svc:2222"],
            "worker": ["mnist-worker-0.mnist.team-a.svc:2222", "mnist-worker-1.mnist.team-a.svc:2222"],
        },
        "task": {"type": "ps", "index": 1},
    }
    ev = json.loads(env(pods["mnist-evaluator-0"])["TF_CONFIG"])
    assert ev == {
        "cluster": {"evaluator": ["mnist-evaluator-0.mnist.team-a.svc:2222"]},
        "task": {"type": "evaluator", "index": 0},
    }


@pytest.mark.parametrize("ps,workers", [(1, 1), (3, 5), (1, 0)])
def test_one_pod_per_replica_and_every_tf_config_names_the_same_cluster(ps, workers):
    pods = desired_pods(make_job(ps=ps, workers=workers), CFG)
    assert len(pods) == 1 + ps + workers
    clusters = {json.dumps(json.loads(env(p)["TF_CONFIG"])["cluster"], sort_keys=True) for p in pods.values()}
    assert len(clusters) == 1


def test_custom_port_reaches_tf_config_container_and_service():
    job = make_job(training={"steps": 10, "port": 3333})
    pod = trainer_pod(job, "chief", 0, CFG)
    assert json.loads(env(pod)["TF_CONFIG"])["cluster"]["chief"] == ["mnist-chief-0.mnist.team-a.svc:3333"]
    assert pod["spec"]["containers"][0]["ports"][0]["containerPort"] == 3333
    assert headless_service(job, CFG)["spec"]["ports"][0]["port"] == 3333


def test_trainer_settings_in_env_carry_the_job_root_and_progress_port():
    cfg = BuildConfig(progress_port=9999)
    pod = trainer_pod(make_job(), "chief", 0, cfg)
    settings = JobSettings.from_env(env(pod))
    assert settings.job_name == "mnist" and settings.steps == 100
    assert settings.paths.root == "/tfps/team-a/mnist"
    assert settings.progress_port == 9999
    assert {"name": "progress", "containerPort": 9999, "protocol": "TCP"} in pod["spec"]["containers"][0]["ports"]


def test_steps_per_closure_reaches_the_trainer_settings_with_its_default_when_unset():
    default = JobSettings.from_env(env(trainer_pod(make_job(), "chief", 0, CFG)))
    assert default.steps_per_closure == DEFAULT_STEPS_PER_CLOSURE
    job = make_job(training={"steps": 100, "stepsPerClosure": 7})
    assert JobSettings.from_env(env(trainer_pod(job, "chief", 0, CFG))).steps_per_closure == 7


def test_pods_are_hardened_for_podsecurity_restricted():
    spec = trainer_pod(make_job(), "ps", 0, CFG)["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    sc = spec["containers"][0]["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "emptyDir": {}} in spec["volumes"]


def test_template_overrides_are_merged_but_operator_labels_and_env_win():
    job = make_job(
        replicas={
            "ps": {"replicas": 1},
            "worker": {
                "replicas": 1,
                "resources": {"limits": {"cpu": "2"}},
                "template": {
                    "metadata": {"labels": {"team": "vision", "tfps.dev/job-name": "evil"}, "annotations": {"a": "b"}},
                    "spec": {
                        "nodeSelector": {"gpu": "a100"},
                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                        "env": [{"name": "EXTRA", "value": "1"}],
                        "securityContext": {"readOnlyRootFilesystem": False},
                        "volumes": [{"name": "data", "emptyDir": {}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    },
                },
            },
        }
    )
    pod = trainer_pod(job, "worker", 0, CFG)
    assert pod["metadata"]["labels"]["team"] == "vision"
    assert pod["metadata"]["labels"]["tfps.dev/job-name"] == "mnist"
    assert pod["metadata"]["annotations"] == {"a": "b"}
    assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    assert pod["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    c = pod["spec"]["containers"][0]
    assert env(pod)["EXTRA"] == "1" and "TF_CONFIG" in env(pod)
    assert c["securityContext"]["readOnlyRootFilesystem"] is False
    assert c["securityContext"]["allowPrivilegeEscalation"] is False  # the rest of the hardening stays
    assert c["resources"] == {"limits": {"cpu": "2"}}
    assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]


@pytest.mark.parametrize(
    "override,field",
    [
        ({"env": [{"name": "TF_CONFIG", "value": "{}"}]}, "spec.replicas.worker.template.spec.env[0].name"),
        (
            {"env": [{"name": "A", "value": "1"}, {"name": "TFPS_JOB", "value": "{}"}]},
            "spec.replicas.worker.template.spec.env[1].name",
        ),
        ({"volumes": [{"name": "storage", "emptyDir": {}}]}, "spec.replicas.worker.template.spec.volumes[0].name"),
        (
            {"volumeMounts": [{"name": "x", "mountPath": "/tfps"}]},
            "spec.replicas.worker.template.spec.volumeMounts[0].mountPath",
        ),
    ],
)
def test_overrides_that_would_break_the_trainer_are_refused_naming_the_field(override, field):
    job = make_job(replicas={"worker": {"replicas": 1, "template": {"spec": override}}})
    with pytest.raises(BuildError, match=field.replace("[", r"\[").replace("]", r"\]")):
        desired_pods(job, CFG)


def test_job_name_too_long_for_pod_dns_labels_is_a_build_error():
    job = make_job()  # the API refuses such names too; the builder does not rely on it
    job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"name": "x" * 55})})
    with pytest.raises(BuildError, match="metadata.name"):
        desired_pods(job, CFG)


def test_headless_service_publishes_not_ready_addresses():
    svc = headless_service(make_job(), CFG)
    assert svc["metadata"]["name"] == "mnist" and svc["metadata"]["ownerReferences"] == [OWNER]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"tfps.dev/job-name": "mnist", "app.kubernetes.io/managed-by": "tfps-operator"}


def test_network_policy_admits_grpc_from_own_pods_and_progress_from_the_operator_only():
    cfg = BuildConfig(operator_namespace_labels={"kubernetes.io/metadata.name": "tfps-system"})
    np = network_policy(make_job(), cfg)
    own = {"matchLabels": {"tfps.dev/job-name": "mnist", "app.kubernetes.io/managed-by": "tfps-operator"}}
    assert np["spec"] == {
        "podSelector": own,
        "policyTypes": ["Ingress"],
        "ingress": [
            {"from": [{"podSelector": own}], "ports": [{"protocol": "TCP", "port": 2222}]},
            {
                "from": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tfps-system"}},
                        "podSelector": {
                            "matchLabels": {
                                "app.kubernetes.io/name": "tfps-operator",
                                "app.kubernetes.io/component": "operator",
                            }
                        },
                    }
                ],
                "ports": [{"protocol": "TCP", "port": DEFAULT_PROGRESS_PORT}],
            },
        ],
    }


def test_network_policy_admits_a_metrics_scraper_only_when_one_is_named():
    progress = [{"protocol": "TCP", "port": DEFAULT_PROGRESS_PORT}]
    assert len(network_policy(make_job(), BuildConfig())["spec"]["ingress"]) == 2  # off by default
    chart = BuildConfig(metrics_scraper=({"team": "monitoring"}, {"app.kubernetes.io/name": "prometheus"}))
    assert network_policy(make_job(), chart)["spec"]["ingress"][2] == {
        "from": [
            {
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                "namespaceSelector": {"matchLabels": {"team": "monitoring"}},
            }
        ],
        "ports": progress,
    }
    # the job's own scraper wins; without namespace labels it is a pod of the job's namespace
    job = make_job(metrics={"scrapeFrom": {"podLabels": {"app": "prom"}}})
    assert network_policy(job, chart)["spec"]["ingress"][2] == {
        "from": [{"podSelector": {"matchLabels": {"app": "prom"}}}],
        "ports": progress,
    }
    anywhere = make_job(metrics={"scrapeFrom": {"namespaceLabels": {}}})
    assert network_policy(anywhere, BuildConfig())["spec"]["ingress"][2]["from"] == [
        {"podSelector": {"matchLabels": {}}, "namespaceSelector": {"matchLabels": {}}}
    ]


def test_pvc_from_volume_claim_template_is_mounted_in_every_pod():
    job = make_job(storage={"volumeClaimTemplate": {"size": "5Gi", "storageClassName": "fast"}, "mountPath": "/data"})
    pvc = storage_claim(job)
    assert pvc["metadata"]["name"] == "mnist-storage" and pvc["metadata"]["ownerReferences"] == [OWNER]
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "5Gi"}},
        "storageClassName": "fast",
    }
    for pod in desired_pods(job, CFG).values():
        assert {"name": "storage", "persistentVolumeClaim": {"claimName": "mnist-storage"}} in pod["spec"]["volumes"]
        assert {"name": "storage", "mountPath": "/data"} in pod["spec"]["containers"][0]["volumeMounts"]


def test_existing_claim_needs_no_pvc():
    job = make_job(storage={"claimName": "shared"})
    assert storage_claim(job) is None
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": "shared"}} in trainer_pod(job, "chief", 0, CFG)[
        "spec"
    ]["volumes"]


def test_export_job_runs_the_exporter_hardened_on_the_same_storage():
    job = make_job(
        storage={"claimName": "shared"}, export={"backoffLimit": 2, "resources": {"requests": {"memory": "2Gi"}}}
    )
    ej = export_job(job, CFG)
    assert ej["apiVersion"] == "batch/v1" and ej["kind"] == "Job"
    assert ej["metadata"]["name"] == "mnist-export"
    assert ej["metadata"]["ownerReferences"] == [OWNER]
    assert ej["spec"]["backoffLimit"] == 2
    tpl = ej["spec"]["template"]
    assert tpl["metadata"]["labels"]["app.kubernetes.io/component"] == "export"
    assert tpl["metadata"]["labels"]["tfps.dev/job-name"] == "mnist"
    spec = tpl["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    c = spec["containers"][0]
    assert c["command"] == ["python", "-m", "tfps_trainer.export"]
    assert c["resources"] == {"requests": {"memory": "2Gi"}}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": "shared"}} in spec["volumes"]
    assert JobSettings.from_env(env({"spec": spec})).paths.root == "/tfps/team-a/mnist"
    assert "TF_CONFIG" not in env({"spec": spec})


def test_operator_never_imports_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys, tfps_operator.reconcile.machine, tfps_operator.handlers, tfps_operator.kube; "
        "from tfps_wire.export_result import parse_message; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')]; "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_export_pod_carries_the_chief_templates_labels_and_annotations():
    job = make_job(
        replicas={
            "chief": {
                "replicas": 1,
                "template": {
                    "metadata": {"labels": {"team": "vision"}, "annotations": {"sidecar.istio.io/inject": "false"}}
                },
            }
        }
    )
    tpl = export_job(job, CFG)["spec"]["template"]
    assert tpl["metadata"]["labels"]["team"] == "vision"
    assert tpl["metadata"]["labels"]["app.kubernetes.io/component"] == "export"
    assert tpl["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
