"""The TensorBoard pod of ``tfps tensorboard`` (pure builder) and how its NAMEs resolve locally."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tfps_operator.manifests.labels import JOB_NAME
from tfps_operator.manifests.tensorboard_pod import TENSORBOARD_LABEL, logdir_spec, tensorboard_pod
from tfps_operator.tools.client import load_job
from tfps_operator.tools.client.tensorboard import InvalidInput, local_dirs


def _job(name: str, storage: dict[str, Any], ns: str = "ml", chief: dict[str, Any] | None = None) -> Any:
    spec: dict[str, Any] = {"model": {"module": "tfps_trainer.examples.linear"}, "training": {"steps": 30}}
    spec["storage"] = storage
    if chief:
        spec["replicas"] = {"chief": {"template": {"spec": chief}}}
    return load_job(
        {
            "apiVersion": "tfps.dev/v1alpha1",
            "kind": "PSTrainingJob",
            "metadata": {"name": name, "namespace": ns, "uid": f"u-{name}"},
            "spec": spec,
        }
    )


def test_one_read_only_mount_per_claim_every_job_owns_it_and_a_deadline():
    jobs = [
        _job("a", {"claimName": "data", "mountPath": "/vol"}),
        _job("b", {"claimName": "data", "mountPath": "/other"}),
        _job("c", {"volumeClaimTemplate": {"accessModes": ["ReadWriteOnce"], "size": "1Gi"}}),
    ]
    pod = tensorboard_pod(jobs, "a-tensorboard-1", "trainer:1", 900)
    spec = pod["spec"]
    (c,) = spec["containers"]
    claims = {v["persistentVolumeClaim"]["claimName"]: v for v in spec["volumes"] if "persistentVolumeClaim" in v}
    assert set(claims) == {"data", "c-storage"} and all(v["persistentVolumeClaim"]["readOnly"] for v in claims.values())
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert {"/tfps/claims/data", "/tfps/claims/c-storage", "/tmp"} == set(mounts)
    assert mounts["/tfps/claims/data"]["readOnly"] and mounts["/tfps/claims/c-storage"]["readOnly"]
    assert c["command"] == [
        "python",
        "-m",
        "tensorboard.main",
        "--logdir_spec=a:/tfps/claims/data/ml/a/tensorboard,b:/tfps/claims/data/ml/b/tensorboard,"
        "c:/tfps/claims/c-storage/ml/c/tensorboard",
        "--host=127.0.0.1",  # loopback: reached only by port-forward, which dials inside the pod
        "--port=6006",
    ]
    assert spec["activeDeadlineSeconds"] == 900 and spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    owners = pod["metadata"]["ownerReferences"]
    assert [(o["name"], o["uid"], o["controller"]) for o in owners] == [
        ("a", "u-a", False),
        ("b", "u-b", False),
        ("c", "u-c", False),
    ]
    labels = pod["metadata"]["labels"]
    assert labels[TENSORBOARD_LABEL] == "a" and JOB_NAME not in labels and "tfps.dev/artifact-reader" not in labels
    assert c["readinessProbe"]["exec"]["command"][0] == "python"
    assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_scheduled_like_the_first_jobs_chief():
    toleration = {"key": "pool", "operator": "Exists", "effect": "NoSchedule"}
    job = _job("a", {"claimName": "data"}, chief={"nodeSelector": {"pool": "gpu"}, "tolerations": [toleration]})
    spec = tensorboard_pod([job], "x", "img", 60)["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu"} and spec["tolerations"] == [toleration]


def test_object_storage_jobs_read_with_the_chiefs_settings():
    creds = {"name": "gcs", "key": "sa.json"}
    jobs = [_job(n, {"uri": "gs://bkt/jobs", "credentialsSecret": creds}) for n in ("a", "b")]
    pod = tensorboard_pod(jobs, "x", "img", 60)
    (c,) = pod["spec"]["containers"]
    assert "--logdir_spec=a:gs://bkt/jobs/ml/a/tensorboard,b:gs://bkt/jobs/ml/b/tensorboard" in c["command"]
    assert not [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert any(v.get("secret", {}).get("secretName") == "gcs" for v in pod["spec"]["volumes"]), pod["spec"]["volumes"]


@pytest.mark.parametrize(
    "jobs, reason",
    [
        ([], "no job"),
        ([_job("a", {"claimName": "d"}), _job("b", {"claimName": "d"}, ns="other")], "one namespace"),
        ([_job("a", {"claimName": "d"}), _job("b", {"uri": "gs://bkt"})], "some on volumes"),
        (
            [
                _job("a", {"uri": "gs://bkt", "credentialsSecret": {"name": "x", "key": "k"}}),
                _job("b", {"uri": "gs://bkt", "credentialsSecret": {"name": "y", "key": "k"}}),
            ],
            "different spec.storage.credentialsSecret",
        ),
    ],
)
def test_jobs_that_one_pod_cannot_show_are_refused_with_the_reason(jobs, reason):
    with pytest.raises(ValueError, match=reason):
        tensorboard_pod(jobs, "x", "img", 60)


def test_logdir_spec_refuses_names_tensorboard_would_split():
    assert logdir_spec({"a": "/x", "b": "gs://y/z"}) == "a:/x,b:gs://y/z"
    with pytest.raises(ValueError, match="cannot hold"):
        logdir_spec({"a,b": "/x"})


def test_local_names_resolve_in_a_tfps_run_workdir_or_as_directories(tmp_path):
    (tmp_path / "default" / "quickstart" / "tensorboard").mkdir(parents=True)
    (tmp_path / "ml" / "other" / "tensorboard").mkdir(parents=True)
    assert local_dirs(["quickstart", "other"], str(tmp_path)) == {
        "quickstart": str(tmp_path / "default" / "quickstart" / "tensorboard"),
        "other": str(tmp_path / "ml" / "other" / "tensorboard"),
    }
    with pytest.raises(InvalidInput, match='job "missing": no '):
        local_dirs(["missing"], str(tmp_path))
    root = tmp_path / "default" / "quickstart"
    assert local_dirs([str(root)], None) == {"quickstart": str(root / "tensorboard")}
    assert local_dirs(["gs://b/x/ml/j/tensorboard"], None) == {"j": "gs://b/x/ml/j/tensorboard"}
    assert local_dirs(["gs://b/x/ml/j", "gs://b/y/ml/j/"], None) == {
        "j": "gs://b/x/ml/j/tensorboard",
        "j_": "gs://b/y/ml/j/tensorboard",
    }
    assert local_dirs(["quickstart"], None) is None  # a cluster job
    with pytest.raises(InvalidInput, match="mix of local"):
        local_dirs([str(root), "quickstart"], None)


def test_a_programs_own_log_directory_is_shown_from_the_leads_volume_read_only():
    template = {
        "spec": {
            "volumes": [{"name": "train", "persistentVolumeClaim": {"claimName": "train-pvc"}}],
            "volumeMounts": [{"name": "train", "mountPath": "/train", "subPath": "run1"}],
        }
    }
    job = load_job(
        {
            "apiVersion": "tfps.dev/v1alpha1",
            "kind": "PSTrainingJob",
            "metadata": {"name": "mw", "namespace": "ml", "uid": "u-mw"},
            "spec": {
                "strategy": "MultiWorkerMirrored",
                "model": {"command": ["python", "t.py"], "directories": {"tensorboard": "/train/logs/fit"}},
                "replicas": {"worker": {"replicas": 2, "template": template}},
            },
        }
    )
    pod = tensorboard_pod([job], "tb", "img", 600)
    (container,) = pod["spec"]["containers"]
    vol = next(v for v in pod["spec"]["volumes"] if v["name"].startswith("program-"))
    assert vol["persistentVolumeClaim"] == {"claimName": "train-pvc", "readOnly": True}
    mount = next(m for m in container["volumeMounts"] if m["name"] == vol["name"])
    assert mount == {"name": vol["name"], "mountPath": "/tfps/program/mw", "readOnly": True, "subPath": "run1"}
    assert "--logdir_spec=mw:/tfps/program/mw/logs/fit" in container["command"]


def test_a_tfps_run_job_with_its_own_log_directory_is_shown_from_where_tfps_run_recorded_it(tmp_path):
    logs = tmp_path / "volumes" / "train-pvc" / "logs"
    logs.mkdir(parents=True)
    local = tmp_path / "default" / "mw" / "local"
    local.mkdir(parents=True)
    (local / "directories.json").write_text(json.dumps({"tensorboard": str(logs)}))
    assert local_dirs(["mw"], str(tmp_path)) == {"mw": str(logs)}
