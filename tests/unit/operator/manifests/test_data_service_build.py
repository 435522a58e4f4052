"""The tf.data service of a job (docs/data-service.md) in what the builders make: the settings every
trainer process reads, TF_CONFIG (the service is never part of the training cluster) and the pods."""

from __future__ import annotations

import json

import pytest

from support.operator_helpers import CFG, make_job
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.manifests.pods import desired_pods
from tfps_operator.tools.local.supervisor import LocalJob, Ports, task_env
from tfps_wire.job_settings import (
    DATA_SERVICE_ENV,
    DATA_SERVICE_MODE_ENV,
    SETTINGS_ENV,
    DataServiceSettings,
    JobSettings,
)


def served(data_workers: int = 2, **spec: object):
    replicas = {
        "ps": {"replicas": 1},
        "worker": {"replicas": 2},
        "dispatcher": {"replicas": 1},
        "dataWorker": {"replicas": data_workers},
    }
    return make_job(replicas=replicas, **spec)


def env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def test_the_settings_name_the_dispatcher_its_journal_and_one_iteration_with_dynamic_sharding_by_default():
    settings = job_settings(served())
    assert settings.data_service == DataServiceSettings(
        dispatcher="mnist-dispatcher-0.mnist.team-a.svc:2222",
        data_workers=tuple(f"mnist-dataworker-{i}.mnist.team-a.svc:2222" for i in range(2)),
        processing_mode="dynamic",
        work_dir="/tfps/team-a/mnist/data-service",
        dataset_id="tfps-train",
        iteration="tfps-train",
    )
    assert JobSettings.model_validate_json(settings.to_env()).data_service == settings.data_service


def test_processing_mode_off_and_the_local_runners_address_and_object_storage():
    job = served(training={"steps": 100, "dataService": {"processingMode": "Off"}}, storage={"uri": "gs://b/jobs"})
    ds = job_settings(job, dispatcher="127.0.0.1:4000").data_service
    assert ds is not None
    assert (ds.processing_mode, ds.dispatcher, ds.work_dir) == (
        "off",
        "127.0.0.1:4000",
        "gs://b/jobs/team-a/mnist/data-service",
    )
    assert ds.script_env() == {DATA_SERVICE_ENV: "grpc://127.0.0.1:4000", DATA_SERVICE_MODE_ENV: "off"}


def test_tfps_run_gives_every_process_the_loopback_addresses_of_the_dispatcher_and_each_data_worker(tmp_path):
    job = served(data_workers=3)
    local = LocalJob(job=job, settings=job_settings(job, mount_path=str(tmp_path)))
    ports = Ports.allocate(local.tasks, local.lead)
    for task in local.tasks:
        ds = JobSettings.model_validate_json(task_env(local, ports, task)[SETTINGS_ENV]).data_service
        assert ds is not None
        assert ds.dispatcher == ports.address("dispatcher", 0)
        assert ds.data_workers == tuple(ports.address("dataworker", i) for i in range(3))


def test_no_service_no_settings():
    assert job_settings(make_job()).data_service is None


@pytest.mark.parametrize("bad", ["grpc://host:1", "host", "host:port", ""])
def test_the_dispatcher_address_is_host_and_port(bad: str):
    with pytest.raises(ValueError, match="dispatcher"):
        DataServiceSettings(dispatcher=bad, work_dir="/x", dataset_id="d", iteration="i")


def test_the_service_has_its_own_pods_outside_the_training_cluster():
    pods = desired_pods(served(), CFG)
    assert [n for n in pods if "data" in n or "dispatcher" in n] == [
        "mnist-dispatcher-0",
        "mnist-dataworker-0",
        "mnist-dataworker-1",
    ]
    training = json.loads(env(pods["mnist-chief-0"])["TF_CONFIG"])["cluster"]
    assert set(training) == {"chief", "ps", "worker"}
    assert json.loads(env(pods["mnist-dataworker-1"])["TF_CONFIG"]) == {
        "cluster": {
            "dataworker": ["mnist-dataworker-0.mnist.team-a.svc:2222", "mnist-dataworker-1.mnist.team-a.svc:2222"]
        },
        "task": {"type": "dataworker", "index": 1},
    }
    assert json.loads(env(pods["mnist-dispatcher-0"])["TF_CONFIG"]) == {
        "cluster": {"dispatcher": ["mnist-dispatcher-0.mnist.team-a.svc:2222"]},
        "task": {"type": "dispatcher", "index": 0},
    }
    for name in ("mnist-dispatcher-0", "mnist-dataworker-0"):
        ports = [p["name"] for p in pods[name]["spec"]["containers"][0]["ports"]]
        assert ports == ["grpc"], name  # no progress endpoint
        assert pods[name]["metadata"]["labels"]["tfps.dev/replica-type"] == name.split("-")[1]


def test_script_mode_runs_no_program_in_the_service():
    job = served(model={"command": ["python", "train.py"]}, storage={"claimName": "data"})
    settings = job_settings(job)
    assert settings.script is not None
    assert set(settings.script.programs) == {"chief", "ps", "worker"}
