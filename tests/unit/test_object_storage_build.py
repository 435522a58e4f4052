"""Builders for a job whose storage is object storage (``spec.storage.uri``): no volume, the same layout
under the URI, and the credentials Secret only where the job's files are read or written."""

from __future__ import annotations

import json

import pytest
from _operator_helpers import CFG, make_job

from tfps_operator.manifests.artifact_reader import reader_pod
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.manifests.pvc import storage_claim
from tfps_trainer.config import JobSettings
from tfps_trainer.uri import bucket, is_uri, join


def _env(spec: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in spec["containers"][0]["env"] if "value" in e}


def test_uri_join_keeps_the_scheme_and_folds_slashes_like_a_path():
    assert join("gs://b", "ns", "job") == "gs://b/ns/job"
    assert join("gs://b/jobs/", "ns", "job", "checkpoints") == "gs://b/jobs/ns/job/checkpoints"
    assert join("/tfps", "ns", "job") == "/tfps/ns/job"
    assert (bucket("gs://my-bucket/x/y"), bucket("/tfps")) == ("my-bucket", "")
    assert is_uri("gs://b") and not is_uri("/tfps/gs://b")


def test_a_gs_job_has_no_volume_no_pvc_and_its_files_under_the_uri():
    job = make_job(evaluator=1, storage={"uri": "gs://team-bucket/jobs"})
    assert storage_claim(job) is None
    for name, pod in desired_pods(job, CFG).items():
        spec = pod["spec"]
        assert [v["name"] for v in spec["volumes"]] == ["tmp"], name
        assert [m["mountPath"] for m in spec["containers"][0]["volumeMounts"]] == ["/tmp"], name
        settings = JobSettings.from_env(_env(spec))
        assert settings.paths.root == "gs://team-bucket/jobs/team-a/mnist"
        assert settings.paths.checkpoints == "gs://team-bucket/jobs/team-a/mnist/checkpoints"
        assert "GOOGLE_APPLICATION_CREDENTIALS" not in _env(spec)  # workload identity: the pod's account
    ej = export_job(job, CFG)["spec"]["template"]["spec"]
    assert [v["name"] for v in ej["volumes"]] == ["tmp"]
    assert JobSettings.from_env(_env(ej)).paths.exports == "gs://team-bucket/jobs/team-a/mnist/exports"


def test_the_credentials_secret_reaches_the_chief_evaluator_and_export_only():
    job = make_job(
        evaluator=1, storage={"uri": "gs://team-bucket", "credentialsSecret": {"name": "gcs-key", "key": "sa.json"}}
    )
    secret_volume = {
        "name": "storage-credentials",
        "secret": {"secretName": "gcs-key", "items": [{"key": "sa.json", "path": "sa.json"}], "defaultMode": 0o440},
    }
    mount = {"name": "storage-credentials", "mountPath": "/var/run/secrets/tfps/storage", "readOnly": True}
    pods = desired_pods(job, CFG)
    export = export_job(job, CFG)["spec"]["template"]["spec"]
    holders = {name: pod["spec"] for name, pod in pods.items()} | {"export": export}
    for name, spec in holders.items():
        has = secret_volume in spec["volumes"]
        assert has == (name == "export" or "-chief-" in name or "-evaluator-" in name), name
        assert (mount in spec["containers"][0]["volumeMounts"]) == has, name
        assert (_env(spec).get("GOOGLE_APPLICATION_CREDENTIALS") == "/var/run/secrets/tfps/storage/sa.json") == has
    assert sum(secret_volume in s["volumes"] for s in holders.values()) == 3  # chief, evaluator, export
    # nothing in the settings the trainer logs carries the secret's name
    assert "gcs-key" not in json.dumps(JobSettings.from_env(_env(export)).model_dump())


def test_the_artifact_reader_refuses_a_gs_job_naming_the_field():
    job = make_job(storage={"uri": "gs://team-bucket/jobs"})
    with pytest.raises(ValueError, match=r"^spec\.storage\.uri: .*gs://team-bucket/jobs/team-a/mnist"):
        reader_pod(job, "reader", "busybox", 60)
