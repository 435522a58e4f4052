"""Builders for a job whose storage is object storage (``spec.storage.uri``): no volume, the same layout
under the URI, and the credentials Secret only where the job's files are read or written."""

from __future__ import annotations

import json

from support.operator_helpers import CFG, make_job
from tfps_operator.manifests.artifact_reader import exports_dir, reader_pod
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.manifests.pvc import storage_claim
from tfps_wire.job_settings import JobSettings
from tfps_wire.uri import bucket, is_uri, join


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


def test_the_artifact_reader_of_a_gs_job_reads_the_bucket_as_the_chief_does():
    """No claim; the credentials Secret, the chief's env, volumes, mounts and service account (a proxy, a
    CA bundle, workload identity); a writable /tmp for TensorFlow; still scheduled like the chief."""
    ca_volume = {"name": "gcs-ca", "configMap": {"name": "gcs-ca"}}
    ca_mount = {"name": "gcs-ca", "mountPath": "/etc/gcs-ca", "readOnly": True}
    chief = {
        "template": {
            "spec": {
                "serviceAccountName": "trainer",
                "env": [{"name": "HTTPS_PROXY", "value": "http://10.0.0.10:3128"}],
                "volumes": [ca_volume],
                "volumeMounts": [ca_mount],
                "nodeSelector": {"pool": "cpu"},
            }
        }
    }
    job = make_job(
        storage={"uri": "gs://team-bucket/jobs", "credentialsSecret": {"name": "gcs-key"}}, replicas={"chief": chief}
    )
    spec = reader_pod(job, "reader", "trainer:1", 60)["spec"]
    assert not any("persistentVolumeClaim" in v for v in spec["volumes"]), spec["volumes"]
    assert [v["name"] for v in spec["volumes"]] == ["tmp", "storage-credentials", "gcs-ca"]
    (c,) = spec["containers"]
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/tmp", "/var/run/secrets/tfps/storage", "/etc/gcs-ca"]
    assert _env(spec)["GOOGLE_APPLICATION_CREDENTIALS"] == "/var/run/secrets/tfps/storage/key.json"
    assert _env(spec)["HTTPS_PROXY"] == "http://10.0.0.10:3128" and _env(spec)["HOME"] == "/tmp"
    assert spec["serviceAccountName"] == "trainer" and spec["nodeSelector"] == {"pool": "cpu"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert exports_dir(job) == "gs://team-bucket/jobs/team-a/mnist/exports"
    # a volume job's reader gets none of the chief's env or account: it only mounts the claim
    plain = reader_pod(make_job(storage={"claimName": "data"}, replicas={"chief": chief}), "r", "img", 60)["spec"]
    assert "serviceAccountName" not in plain and "env" not in plain["containers"][0]
