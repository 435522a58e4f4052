"""The paths and names the operator's pods rely on (api/reserved.py): the builders use exactly those, and
the CRD's rules (evaluated client-side here, by the API server in tests/api/test_apiserver.py) refuse a job
that takes one, naming the field (pure)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from support.operator_helpers import CFG, make_job
from tfps_operator.api import reserved
from tfps_operator.api.validate import JobValidationError, validate_job
from tfps_operator.manifests import jobsettings, podgroup, workload
from tfps_operator.manifests.pods import desired_pods

from .cases import base_job

REPO = Path(__file__).resolve().parents[2]
WT = "spec.replicas.worker.template.spec"


def _errors(job: dict[str, Any]) -> list[str]:
    try:
        validate_job(job)
    except JobValidationError as e:
        return [str(err) for err in e.errors]
    return []


def _with_storage(mount_path: str) -> dict[str, Any]:
    job = base_job()
    job["spec"]["storage"] = {"claimName": "data", "mountPath": mount_path}
    return job


def _with_mount(mount_path: str, **spec: Any) -> dict[str, Any]:
    job = base_job()
    job["spec"].update(spec)
    job["spec"]["replicas"]["worker"]["template"] = {
        "spec": {
            "volumes": [{"name": "extra", "emptyDir": {}}],
            "volumeMounts": [{"name": "extra", "mountPath": mount_path}],
        }
    }
    return job


def test_the_builders_use_only_the_reserved_names_and_paths() -> None:
    """Every volume, mount and variable the operator puts in a pod (with code from a ConfigMap and storage
    credentials, its fullest pod) is one the API refuses in a template."""
    job = make_job(
        model={"module": "m", "source": {"configMap": "code"}},
        storage={"uri": "gs://bucket/x", "credentialsSecret": {"name": "gcs-key"}},
    )
    on_volume = make_job(storage={"claimName": "data", "mountPath": "/data"})
    for j in (job, on_volume):
        for pod in desired_pods(j, CFG).values():
            spec = pod["spec"]
            (container,) = spec["containers"]
            assert container["name"] == reserved.CONTAINER
            assert "terminationMessagePath" not in container  # Kubernetes' default: reserved.TERMINATION_LOG
            assert {v["name"] for v in spec["volumes"]} <= set(reserved.VOLUMES)
            ours = {m["mountPath"] for m in container["volumeMounts"]} - {j.spec.storage.mount_path}
            assert ours <= set(reserved.TEMPLATE_MOUNT_FORBIDDEN) and ours <= set(reserved.STORAGE_PATH_FORBIDDEN)
            env = {e["name"] for e in container["env"]}
            assert {"TF_CONFIG", "HOME"} <= env and any(n.startswith(reserved.ENV_PREFIX) for n in env)
    assert reserved.CREDENTIALS_ENV in {
        e["name"] for e in desired_pods(job, CFG)["mnist-chief-0"]["spec"]["containers"][0]["env"]
    }
    assert jobsettings.CODE_DIR == reserved.CODE_DIR
    assert podgroup.POD_GROUP_LABEL == reserved.POD_GROUP_LABEL
    assert workload.QUEUE_LABEL == reserved.KUEUE_QUEUE_LABEL
    dockerfile = (REPO / "trainer_image" / "Dockerfile").read_text()
    assert f"python -m venv {reserved.TRAINER_INSTALL_DIR} " in dockerfile


@pytest.mark.parametrize("path", sorted(reserved.STORAGE_PATH_FORBIDDEN))
def test_the_jobs_volume_may_not_be_at_under_or_above_what_the_trainer_needs(path: str) -> None:
    above = path.rsplit("/", 1)[0]
    for mount_path in (path, f"{path}/data", *([above] if above else [])):
        errors = _errors(_with_storage(mount_path))
        assert any(e.startswith("spec.storage.mountPath: must not be at, under or above ") for e in errors), (
            mount_path,
            errors,
        )


@pytest.mark.parametrize(
    ("mount_path", "expect"),
    [
        ("/", "must not be /: the job's volume would hide the container's whole filesystem"),
        ("/usr/local/tfps", "must not be at, under or above /usr (a system directory of the container)"),
        ("/var", "must not be at, under or above /var/run (a system directory of the container)"),
        ("/opt", "must not be at, under or above /opt/tfps (the trainer image's Python environment)"),
        ("/tmp/tfps", "must not be at, under or above /tmp (the trainer's scratch space and HOME)"),
        ("/data/", "must be an absolute path without a trailing '/'"),
        ("/data//x", "must be an absolute path without a trailing '/'"),
        ("/data/./x", "must be an absolute path without a trailing '/'"),
        ("/data/../etc", "must be an absolute path without a trailing '/'"),
        ("data", "must match"),
    ],
)
def test_a_storage_mount_path_the_pods_cannot_use_is_refused_saying_why(mount_path: str, expect: str) -> None:
    errors = _errors(_with_storage(mount_path))
    assert any(e.startswith("spec.storage.mountPath: ") and expect in e for e in errors), errors


@pytest.mark.parametrize("mount_path", ["/tfps", "/data", "/mnt/checkpoints", "/home/tfps/work", "/opt/data", "/srv"])
def test_ordinary_storage_mount_paths_are_accepted(mount_path: str) -> None:
    assert validate_job(_with_storage(mount_path)).spec.storage.mount_path == mount_path


@pytest.mark.parametrize(
    ("mount_path", "expect"),
    [
        ("/", "/: must not mount over the container's / or /dev"),
        ("/dev", "/dev: must not mount over the container's / or /dev"),
        ("/tmp/cache", "/tmp/cache: must not be at or under /tmp (the trainer's scratch space and HOME)"),
        ("/tfps-code", "/tfps-code: must not be at or under /tfps-code (the code mount)"),
        (reserved.CREDENTIALS_DIR, "must not be at or under /var/run/secrets/tfps/storage (the storage credentials)"),
        ("/dev/termination-log", "where the operator reads each container's verdict"),
        ("/proc/sys", "/proc/sys: must not be at or under /proc"),
        ("/tfps/datasets", "/tfps/datasets: must not be at or under spec.storage.mountPath (/tfps)"),
        ("datasets", "datasets: must be an absolute path without '.', '..' or empty components"),
        ("/data/../tmp", "/data/../tmp: must be an absolute path"),
    ],
)
def test_a_template_mount_over_the_operators_paths_is_refused_naming_it(mount_path: str, expect: str) -> None:
    errors = _errors(_with_mount(mount_path))
    assert any(e.startswith(f"{WT}.volumeMounts: ") and expect in e for e in errors), errors


@pytest.mark.parametrize("mount_path", ["/data", "/dev/shm", "/var/run/secrets/other", "/tfps-data", "/tmpfs"])
def test_ordinary_template_mounts_are_accepted(mount_path: str) -> None:
    assert _errors(_with_mount(mount_path)) == []


def test_a_template_may_mount_where_the_storage_would_be_when_the_storage_is_elsewhere() -> None:
    assert _errors(_with_mount("/tfps", storage={"claimName": "data", "mountPath": "/data"})) == []
    errors = _errors(_with_mount("/data/x", storage={"claimName": "data", "mountPath": "/data"}))
    assert errors == [
        f"{WT}.volumeMounts: /data/x: must not be at or under spec.storage.mountPath (/data): the job's volume is "
        "mounted there (checkpoints, exports, TensorBoard logs)"
    ]


@pytest.mark.parametrize("name", reserved.VOLUMES)
def test_a_template_volume_may_not_take_an_operator_volume_name(name: str) -> None:
    job = base_job()
    job["spec"]["replicas"]["worker"]["template"] = {"spec": {"volumes": [{"name": name, "emptyDir": {}}]}}
    assert _errors(job) == [
        f"{WT}.volumes: {name}: the operator names its own volumes so (storage, tmp, code, storage-credentials): "
        "pick another name"
    ]


def test_environment_the_operator_sets_is_refused_and_credentials_only_with_a_credentials_secret() -> None:
    job = base_job()
    job["spec"]["replicas"]["worker"]["template"] = {"spec": {"env": [{"name": "HOME", "value": "/data"}]}}
    assert _errors(job) == [f"{WT}.env: HOME: set by the operator (TF_CONFIG, HOME and TFPS_*)"]
    creds = [{"name": reserved.CREDENTIALS_ENV, "value": "/secrets/key.json"}]
    job["spec"]["replicas"]["worker"]["template"] = {"spec": {"env": creds}}
    job["spec"]["storage"] = {"uri": "gs://bucket/x"}
    assert _errors(job) == []  # workload identity's own key file: the user's to set
    with_secret = copy.deepcopy(job)
    with_secret["spec"]["storage"]["credentialsSecret"] = {"name": "gcs-key"}
    assert _errors(with_secret) == [
        f"{WT}.env: GOOGLE_APPLICATION_CREDENTIALS is set by the operator to the key of "
        "spec.storage.credentialsSecret: leave it out here, or leave out credentialsSecret"
    ]


def test_labels_and_annotations_the_operator_or_its_schedulers_read_are_refused() -> None:
    job = base_job()
    meta = job["spec"]["replicas"]["worker"].setdefault("template", {}).setdefault("metadata", {})
    meta["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    assert _errors(job) == [
        "spec.replicas.worker.template.metadata.labels: kueue.x-k8s.io/queue-name: queue the job, not its pods "
        "(spec.runPolicy.schedulingPolicy.queue or the label on the PSTrainingJob): on a pod Kueue would admit "
        "that pod alone"
    ]
    meta["labels"] = {"scheduling.x-k8s.io/pod-group": "other", "team": "vision"}
    assert _errors(job) == [
        "spec.replicas.worker.template.metadata.labels: scheduling.x-k8s.io/pod-group: set by the operator when "
        "gang scheduling is on (spec.runPolicy.schedulingPolicy)"
    ]
    meta["labels"] = {"team": "vision"}
    meta["annotations"] = {"tfps.dev/restart": "7", "prometheus.io/scrape": "true"}
    assert _errors(job) == [
        "spec.replicas.worker.template.metadata.annotations: annotations under tfps.dev/ are reserved for the operator"
    ]


def test_an_init_container_may_not_declare_the_trainers_ports() -> None:
    job = base_job()
    job["spec"]["training"]["port"] = 3000
    init = {"name": "proxy", "image": "envoy", "ports": [{"containerPort": 2222}]}
    job["spec"]["replicas"]["worker"]["template"] = {"spec": {"initContainers": [init]}}
    assert _errors(job) == []  # 2222 is only the default port
    for port in (3000, 8470):
        init["ports"] = [{"containerPort": 9000}, {"containerPort": port}]
        assert _errors(job) == [
            f"{WT}.initContainers: an init container must not take the trainer's ports: spec.training.port (the "
            "TensorFlow server) or 8470 (the progress and metrics port); the pod's containers share one network"
        ]
