"""How `tfps run` maps a pod's volumes onto the work directory (pure plans), and what it refuses."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tfps_operator.api.validate import validate_job
from tfps_operator.tools.local.mountns import shadowed
from tfps_operator.tools.local.volumes import VolumeRefusal, plan

WORK, JOB_DIR = Path("/w"), Path("/w/default/j")


def job(volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> Any:
    return validate_job(
        {
            "apiVersion": "tfps.dev/v1alpha1",
            "kind": "PSTrainingJob",
            "metadata": {"name": "j"},
            "spec": {
                "strategy": "MultiWorkerMirrored",
                "model": {"command": ["python", "train.py"]},
                "replicas": {
                    "worker": {"replicas": 2, "template": {"spec": {"volumes": volumes, "volumeMounts": mounts}}}
                },
            },
        }
    )


def test_a_claim_is_shared_an_empty_dir_is_per_process_and_sub_paths_are_kept() -> None:
    j = job(
        [
            {"name": "data", "persistentVolumeClaim": {"claimName": "pvc", "readOnly": True}},
            {"name": "s", "emptyDir": {}},
        ],
        [{"name": "data", "mountPath": "/train", "subPath": "run1"}, {"name": "s", "mountPath": "/scratch"}],
    )
    vols = plan(j, [], WORK, JOB_DIR, "job.yaml")
    assert list(vols) == ["worker"]
    w0, w1 = vols["worker"].for_task("worker-0"), vols["worker"].for_task("worker-1")
    assert w0[0].source == w1[0].source == "/w/volumes/pvc/run1" and w0[0].target == "/train" and w0[0].read_only
    assert w0[1].source == "/w/default/j/local/emptydir/worker-0/s" != w1[1].source
    assert vols["worker"].claims == ("/w/volumes/pvc/run1",)


def test_config_maps_and_secrets_come_from_the_job_file() -> None:
    j = job(
        [
            {"name": "c", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "conf/a.yaml"}]}},
            {"name": "s", "secret": {"secretName": "sec"}},
        ],
        [{"name": "c", "mountPath": "/etc/app"}, {"name": "s", "mountPath": "/etc/creds"}],
    )
    docs = [
        {"kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "x: 1\n", "b": "unused"}},
        {"kind": "Secret", "metadata": {"name": "sec"}, "data": {"token": base64.b64encode(b"t0k").decode()}},
    ]
    files = plan(j, docs, WORK, JOB_DIR, "job.yaml")["worker"].files
    cfg = files["/w/default/j/local/configmap/c"]
    assert [(f.path, f.data, f.mode) for f in cfg] == [("conf/a.yaml", b"x: 1\n", 0o644)]
    assert [(f.path, f.data, f.mode) for f in files["/w/default/j/local/secret/s"]] == [("token", b"t0k", 0o600)]
    assert all(b.read_only for b in plan(j, docs, WORK, JOB_DIR, "job.yaml")["worker"].binds)


@pytest.mark.parametrize(
    ("volumes", "mounts", "docs", "expect"),
    [
        (
            [{"name": "h", "hostPath": {"path": "/data"}}],
            [{"name": "h", "mountPath": "/data"}],
            [],
            "spec.replicas.worker.template.spec.volumes[0]: tfps run cannot mount a hostPath volume",
        ),
        (
            [{"name": "c", "configMap": {"name": "cfg"}}],
            [{"name": "c", "mountPath": "/etc/app"}],
            [],
            "spec.replicas.worker.template.spec.volumes[0].configMap: ConfigMap 'cfg' is not in job.yaml",
        ),
        (
            [{"name": "c", "configMap": {"name": "cfg", "items": [{"key": "nope", "path": "x"}]}}],
            [{"name": "c", "mountPath": "/etc/app"}],
            [{"kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}}],
            "volumes[0].configMap.items[0].key: ConfigMap 'cfg' has no key 'nope'",
        ),
        (
            [{"name": "s", "secret": {"secretName": "sec"}}],
            [{"name": "s", "mountPath": "/etc/s"}],
            [{"kind": "Secret", "metadata": {"name": "sec"}, "data": {"k": "not base64!"}}],
            "Secret key 'k' in data is not base64",
        ),
    ],
    ids=["hostPath", "configmap-missing", "item-key-missing", "secret-not-base64"],
)
def test_what_cannot_be_given_locally_is_refused_naming_the_field(volumes, mounts, docs, expect) -> None:
    with pytest.raises(VolumeRefusal, match=None) as err:
        plan(job(volumes, mounts), docs, WORK, JOB_DIR, "job.yaml")
    assert expect in str(err.value), err.value


def test_an_optional_config_map_that_is_missing_is_an_empty_directory() -> None:
    j = job([{"name": "c", "configMap": {"name": "cfg", "optional": True}}], [{"name": "c", "mountPath": "/etc/app"}])
    assert plan(j, [], WORK, JOB_DIR, "job.yaml")["worker"].files == {"/w/default/j/local/configmap/c": ()}


def test_the_new_root_makes_in_memory_only_the_directories_on_the_way_to_a_missing_mount_path(tmp_path: Path) -> None:
    present = tmp_path / "there"
    present.mkdir()
    missing = tmp_path / "a" / "b" / "train"
    got = shadowed([str(present), str(missing)])
    assert str(tmp_path) in got and str(tmp_path / "a") in got and str(tmp_path / "a" / "b") in got
    assert str(present) not in got and "/" in got
