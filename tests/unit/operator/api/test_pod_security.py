"""No confused deputy: the pod templates of a job stay within Pod Security baseline plus no root unless the
operator relaxes the job's namespace (api/podsecurity.py), and the state machine refuses a job outside them
before any child exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.operator_helpers import CFG, T0, all_pods, make_job, observed, status
from tfps_operator.api import podsecurity
from tfps_operator.api.validate import main as validate_main
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.reconcile import conditions as C
from tfps_operator.reconcile.machine import reconcile
from tfps_operator.settings import BuildConfig, from_args

WT = "spec.replicas.worker.template.spec"


def _job(template: dict[str, Any], role: str = "worker", **spec: Any):
    return make_job(replicas={"ps": {"replicas": 1}, "worker": {"replicas": 1}, role: {"template": template}}, **spec)


def _found(template: dict[str, Any], role: str = "worker") -> list[tuple[str, bool]]:
    return [(v.path, v.relaxable) for v in podsecurity.violations(_job(template, role).spec)]


# --- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, f"{WT}.volumes[0].hostPath"),
        ({"podSecurityContext": {"runAsUser": 0}}, f"{WT}.podSecurityContext.runAsUser"),
        ({"securityContext": {"runAsUser": 0}}, f"{WT}.securityContext.runAsUser"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, f"{WT}.podSecurityContext.runAsNonRoot"),
        ({"securityContext": {"runAsNonRoot": False}}, f"{WT}.securityContext.runAsNonRoot"),
        ({"securityContext": {"privileged": True}}, f"{WT}.securityContext.privileged"),
        ({"securityContext": {"allowPrivilegeEscalation": True}}, f"{WT}.securityContext.allowPrivilegeEscalation"),
        (
            {"securityContext": {"capabilities": {"add": ["CHOWN", "SYS_ADMIN"]}}},
            f"{WT}.securityContext.capabilities.add[1]",
        ),
        ({"securityContext": {"capabilities": {"add": ["NET_RAW"]}}}, f"{WT}.securityContext.capabilities.add[0]"),
        ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, f"{WT}.securityContext.seccompProfile.type"),
        (
            {"podSecurityContext": {"appArmorProfile": {"type": "Unconfined"}}},
            f"{WT}.podSecurityContext.appArmorProfile.type",
        ),
        ({"podSecurityContext": {"seLinuxOptions": {"type": "spc_t"}}}, f"{WT}.podSecurityContext.seLinuxOptions.type"),
        ({"securityContext": {"seLinuxOptions": {"user": "system_u"}}}, f"{WT}.securityContext.seLinuxOptions.user"),
        (
            {"podSecurityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
            f"{WT}.podSecurityContext.sysctls[0].name",
        ),
        (
            {"initContainers": [{"name": "i", "image": "busybox", "securityContext": {"runAsUser": 0}}]},
            f"{WT}.initContainers[0].securityContext.runAsUser",
        ),
        (
            {"initContainers": [{"name": "i", "image": "busybox", "securityContext": {"privileged": True}}]},
            f"{WT}.initContainers[0].securityContext.privileged",
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_a_relaxable_setting_is_refused_naming_its_field(spec: dict[str, Any], path: str) -> None:
    assert _found({"spec": spec}) == [(path, True)]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"securityContext": {"procMount": "Unmasked"}}, f"{WT}.securityContext.procMount"),
        (
            {"securityContext": {"windowsOptions": {"hostProcess": True}}},
            f"{WT}.securityContext.windowsOptions.hostProcess",
        ),
        (
            {"initContainers": [{"name": "i", "image": "b", "ports": [{"containerPort": 1, "hostPort": 8080}]}]},
            f"{WT}.initContainers[0].ports[0].hostPort",
        ),
    ],
)
def test_what_no_namespace_relaxes_is_refused_even_when_relaxed(spec: dict[str, Any], path: str) -> None:
    job = _job({"spec": spec})
    assert [(v.path, v.relaxable) for v in podsecurity.refusals(job.spec, relaxed=True)] == [(path, False)]


def test_apparmor_unconfined_annotation_is_refused() -> None:
    ann = "container.apparmor.security.beta.kubernetes.io/trainer"
    assert _found({"metadata": {"annotations": {ann: "unconfined"}}}) == [
        (f"spec.replicas.worker.template.metadata.annotations[{ann}]", True)
    ]
    assert _found({"metadata": {"annotations": {ann: "runtime/default", "x": "unconfined"}}}) == []


def test_what_baseline_and_the_trainer_need_is_accepted() -> None:
    """The operator's own hardening restated, a non-root uid, baseline's capabilities, safe sysctls, the
    container SELinux type, seccomp Localhost, other volume kinds: nothing refused."""
    template = {
        "spec": {
            "podSecurityContext": {
                "runAsUser": 1000,
                "runAsNonRoot": True,
                "fsGroup": 0,
                "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}],
                "seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"},
                "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
            },
            "securityContext": {
                "runAsUser": 2000,
                "privileged": False,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CHOWN"]},
                "procMount": "Default",
            },
            "volumes": [{"name": "d", "emptyDir": {}}, {"name": "c", "configMap": {"name": "c"}}],
            "initContainers": [{"name": "i", "image": "b", "ports": [{"containerPort": 80, "hostPort": 0}]}],
        }
    }
    for role in ("chief", "ps", "worker", "evaluator"):
        assert _found(template, role) == []
    assert podsecurity.violations(make_job().spec) == []


def test_every_replica_type_is_checked_and_the_chief_covers_the_export_job() -> None:
    host = {"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}}
    for role in ("chief", "ps", "worker", "evaluator"):
        assert _found(host, role) == [(f"spec.replicas.{role}.template.spec.volumes[0].hostPath", True)]
    # The export and pre-flight Jobs run with the chief's template: a hostPath there reaches them too.
    job = _job(host, "chief")
    volumes = export_job(job, CFG)["spec"]["template"]["spec"]["volumes"]
    assert any("hostPath" in v for v in volumes)


def test_the_operators_own_pods_pass_the_rule_they_enforce() -> None:
    """Built without templates, the pods and the export Job carry nothing the rule refuses (a template
    restating their security contexts is accepted)."""
    job = make_job(evaluator=1, training={"steps": 100, "checkpoint": {"everySteps": 10}})
    pods = list(desired_pods(job, CFG).values())
    for spec in [p["spec"] for p in pods] + [export_job(job, CFG)["spec"]["template"]["spec"]]:
        restated = {
            "podSecurityContext": spec["securityContext"],
            "securityContext": spec["containers"][0]["securityContext"],
            "volumes": spec["volumes"],
        }
        assert _found({"spec": restated}) == []


def test_messages_name_the_field_the_reason_and_the_relaxation() -> None:
    job = _job({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}], "securityContext": {"runAsUser": 0}}})
    text = podsecurity.message(podsecurity.refusals(job.spec))
    assert f"{WT}.volumes[0].hostPath: hostPath volumes are refused" in text
    assert f"{WT}.securityContext.runAsUser: 0 runs as root" in text
    assert "jobPodSecurity.relaxedNamespaces" in text and "nothing was created" in text
    assert podsecurity.refusals(job.spec, relaxed=True) == []


def test_odd_shapes_do_not_crash_the_rule() -> None:
    """Objects that slipped past an older CRD: runAsUser false is not root, a sysctl that is not an object
    is refused, an init container's securityContext that is not an object is ignored (the API server
    refuses it at the dry-run)."""
    weird = {
        "spec": {
            "securityContext": {"runAsUser": False, "capabilities": "all"},
            "podSecurityContext": {"sysctls": ["kernel.msgmax"], "seLinuxOptions": "x"},
            "initContainers": [{"name": "i", "securityContext": "root", "ports": ["80"]}],
        }
    }
    assert _found(weird) == [(f"{WT}.podSecurityContext.sysctls[0].name", True)]


# --- the operator's setting ----------------------------------------------------------------------


def test_relaxed_namespaces_come_from_the_environment() -> None:
    class Args:
        pass

    cfg = from_args(Args(), {"TFPS_RELAXED_NAMESPACES": " ml-trusted , gpu-lab,"}).build
    assert cfg.relaxed_namespaces == frozenset({"ml-trusted", "gpu-lab"})
    assert cfg.relaxes("gpu-lab") and not cfg.relaxes("team-a")
    assert from_args(Args(), {}).build.relaxed_namespaces == frozenset()
    assert BuildConfig(relaxed_namespaces=frozenset({"*"})).relaxes("anything")


# --- the state machine ---------------------------------------------------------------------------

HOST_ROOT = {
    "spec": {
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        "volumeMounts": [{"name": "host", "mountPath": "/host"}],
        "securityContext": {"runAsUser": 0},
    }
}


def test_a_job_asking_for_host_root_fails_as_invalid_spec_before_any_child() -> None:
    job = _job(HOST_ROOT)
    plan = reconcile(job, status(), observed(job, existing=set()), T0, CFG)
    assert plan.creates() == [] and plan.validate == []
    assert plan.status.phase == "Failed" and plan.status.reason == "InvalidSpec"
    failed = C.get(plan.status, C.FAILED)
    assert failed is not None and failed.reason == "InvalidSpec"
    assert f"{WT}.volumes[0].hostPath" in failed.message and f"{WT}.securityContext.runAsUser" in failed.message
    assert [e.reason for e in plan.events] == ["InvalidSpec"]


def test_in_a_relaxed_namespace_the_same_job_gets_its_pods() -> None:
    job = _job(HOST_ROOT)
    cfg = BuildConfig(default_image="tfps-trainer:test", relaxed_namespaces=frozenset({job.metadata.namespace}))
    plan = reconcile(job, status(), observed(job, existing=set()), T0, cfg)
    worker = next(a.manifest for a in plan.creates() if a.manifest["metadata"]["name"] == "mnist-worker-0")
    assert {"name": "host", "hostPath": {"path": "/"}} in worker["spec"]["volumes"]
    assert worker["spec"]["containers"][0]["securityContext"]["runAsUser"] == 0
    assert plan.status.phase == "Pending"


def test_another_namespace_being_relaxed_does_not_relax_this_one() -> None:
    job = _job(HOST_ROOT)
    cfg = BuildConfig(default_image="tfps-trainer:test", relaxed_namespaces=frozenset({"team-b"}))
    plan = reconcile(job, status(), observed(job, existing=set()), T0, cfg)
    assert plan.creates() == [] and plan.status.reason == "InvalidSpec"


def test_a_running_job_of_a_namespace_no_longer_relaxed_fails_and_its_running_pods_go() -> None:
    """The setting is level: an operator restarted without the namespace in it fails the job on its next pass."""
    job = _job(HOST_ROOT)
    running = {"phase": "Running", "startTime": T0.isoformat()}
    plan = reconcile(job, status(**running), observed(job, all_pods(job)), T0, CFG)
    assert plan.status.phase == "Failed" and plan.status.reason == "InvalidSpec"
    assert plan.creates() == []
    deleted = [d.name for a in plan.actions for d in getattr(a, "pods", ())]
    assert sorted(deleted) == ["mnist-chief-0", "mnist-ps-0", "mnist-worker-0"]


# --- tfps validate -------------------------------------------------------------------------------

JOB_YAML = """\
apiVersion: tfps.dev/v1alpha1
kind: PSTrainingJob
metadata: {name: deputy}
spec:
  model: {module: tfps_trainer.examples.linear}
  training: {steps: 100}
  replicas:
    worker:
      template:
        spec:
          volumes: [{name: host, hostPath: {path: /}}]
          volumeMounts: [{name: host, mountPath: /host}]
          podSecurityContext: {runAsUser: 0}
"""


def test_tfps_validate_reports_what_the_operator_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(JOB_YAML)

    class Args:
        files = [str(f)]
        relaxed = False

    assert validate_main(Args()) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{f}: {WT}.volumes[0].hostPath: hostPath volumes are refused: they expose the node's files; "
        "allowed only in namespaces the operator relaxes (jobPodSecurity.relaxedNamespaces)",
        f"{f}: {WT}.podSecurityContext.runAsUser: 0 runs as root; "
        "allowed only in namespaces the operator relaxes (jobPodSecurity.relaxedNamespaces)",
    ]
    Args.relaxed = True
    assert validate_main(Args()) == 0
    assert capsys.readouterr().out == f"{f}: OK\n"
