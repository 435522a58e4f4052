"""`tfps convert`: Kubeflow TFJob (kubeflow.org/v1) manifests, in TFJob's own shape and defaults, to
PSTrainingJobs in script mode (ParameterServer with PS, MultiWorkerMirrored without); what cannot be
carried over is named, what cannot work is refused."""

from __future__ import annotations

import argparse
import copy

import pytest
import yaml

from tfps_operator.api.validate import validate_job
from tfps_operator.tools.convert import ConvertError, convert, main, render


def replica(
    replicas=None, restart=None, command=("python", "train.py"), image="registry/team/ps-train:1.4", **container
):
    c = {"name": "tensorflow", "image": image, **({"command": list(command)} if command else {}), **container}
    rs = {"template": {"spec": {"containers": [c]}}}
    if replicas is not None:
        rs["replicas"] = replicas
    if restart is not None:
        rs["restartPolicy"] = restart
    return rs


def tfjob(specs, **spec):
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist-ps", "namespace": "ml"},
        "spec": {"tfReplicaSpecs": specs, **spec},
    }


# A TFJob as Kubeflow documents it for ParameterServerStrategy: Chief, PS, Worker, Evaluator.
PSS_TFJOB = tfjob(
    {
        "Chief": {
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": {
                "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
                "spec": {
                    "nodeSelector": {"pool": "cpu"},
                    "tolerations": [{"key": "ml", "operator": "Exists"}],
                    "serviceAccountName": "trainer",
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "gcr.io/p/train:2",
                            "command": ["python", "/app/train.py"],
                            "args": ["--epochs=3"],
                            "env": [{"name": "GCS_BUCKET", "value": "gs://b"}],
                            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
                            "resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
                        }
                    ],
                },
            },
        },
        "PS": {
            "replicas": 2,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "gcr.io/p/train:2",
                            "command": ["python", "/app/train.py"],
                            "args": ["--epochs=3"],
                            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
                        }
                    ]
                }
            },
        },
        "Worker": {
            "replicas": 3,
            "restartPolicy": "ExitCode",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "gcr.io/p/train:2",
                            "command": ["python", "/app/train.py"],
                            "args": ["--epochs=3"],
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ]
                }
            },
        },
        "Evaluator": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "gcr.io/p/train:2",
                            "command": ["python", "/app/train.py"],
                            "args": ["--epochs=3"],
                        }
                    ]
                }
            },
        },
    },
    runPolicy={
        "cleanPodPolicy": "All",
        "backoffLimit": 5,
        "activeDeadlineSeconds": 7200,
        "ttlSecondsAfterFinished": 600,
        "suspend": False,
    },
)


def test_a_parameter_server_tfjob_maps_field_by_field() -> None:
    conv = convert(copy.deepcopy(PSS_TFJOB))
    assert conv.job == {
        "apiVersion": "tfps.dev/v1beta1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "mnist-ps", "namespace": "ml"},
        "spec": {
            "strategy": "ParameterServer",
            "image": "gcr.io/p/train:2",
            "model": {"command": ["python", "/app/train.py", "--epochs=3"]},
            "replicas": {
                "chief": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
                    "template": {
                        "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
                        "spec": {
                            "env": [{"name": "GCS_BUCKET", "value": "gs://b"}],
                            "nodeSelector": {"pool": "cpu"},
                            "tolerations": [{"key": "ml", "operator": "Exists"}],
                            "serviceAccountName": "trainer",
                        },
                    },
                },
                "ps": {"replicas": 2, "restartPolicy": "OnFailure"},
                "worker": {"replicas": 3, "restartPolicy": "ExitCode", "resources": {"limits": {"nvidia.com/gpu": 1}}},
                "evaluator": {"replicas": 1, "restartPolicy": "Never"},  # TFJob's default restart policy
            },
            "training": {"port": 2222},
            "runPolicy": {
                "cleanPodPolicy": "All",
                "backoffLimit": 5,
                "activeDeadlineSeconds": 7200,
                "ttlSecondsAfterFinished": 600,
                "suspend": False,
            },
            "export": {"enabled": False},
        },
    }
    assert conv.not_carried == []
    assert any(n.startswith("strategy: ParameterServer, as the TFJob has PS") for n in conv.notes)
    validate_job(conv.job)


def test_tfjob_defaults_replicas_1_restart_never_clean_pod_policy_running() -> None:
    conv = convert(tfjob({"Chief": replica(), "PS": replica(), "Worker": replica()}))
    spec = conv.job["spec"]
    assert {r: (v["replicas"], v["restartPolicy"]) for r, v in spec["replicas"].items()} == {
        "chief": (1, "Never"),
        "ps": (1, "Never"),
        "worker": (1, "Never"),
    }
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert spec["image"] == "registry/team/ps-train:1.4" and spec["model"]["command"] == ["python", "train.py"]


def test_master_is_the_chief_and_always_becomes_on_failure() -> None:
    conv = convert(tfjob({"Master": replica(1, "Always"), "PS": replica(1), "Worker": replica(2, "Always")}))
    assert conv.job["spec"]["replicas"]["chief"]["restartPolicy"] == "OnFailure"
    assert any("Always became OnFailure" in n for n in conv.notes)


def test_per_replica_programs_and_images_stay_per_replica() -> None:
    conv = convert(
        tfjob(
            {
                "Chief": replica(1, command=("python", "chief.py")),
                "PS": replica(1, command=("python", "ps.py"), image="registry/ps:1"),
                "Worker": replica(2, command=None, args=["python", "worker.py"], image="registry/worker:1"),
            }
        )
    )
    spec = conv.job["spec"]
    assert "image" not in spec
    assert spec["model"]["command"] == ["python", "chief.py"]
    assert spec["replicas"]["ps"]["template"]["spec"]["command"] == ["python", "ps.py"]
    assert spec["replicas"]["worker"]["template"]["spec"]["command"] == ["python", "worker.py"]
    assert [spec["replicas"][r]["image"] for r in ("chief", "ps", "worker")] == [
        "registry/team/ps-train:1.4",
        "registry/ps:1",
        "registry/worker:1",
    ]
    assert any("assumes the image has no ENTRYPOINT" in n for n in conv.notes)
    validate_job(conv.job)


UNSUPPORTED = tfjob(
    {
        "Chief": {
            "replicas": 1,
            "template": {
                "spec": {
                    "hostNetwork": True,
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "i:1",
                            "command": ["python", "t.py"],
                            "workingDir": "/app",
                            "livenessProbe": {"exec": {"command": ["true"]}},
                            "env": [{"name": "TF_CONFIG", "value": "{}"}],
                        },
                        {"name": "log-shipper", "image": "fluent:1"},
                    ],
                }
            },
        },
        "PS": replica(1),
        "Worker": replica(1),
    },
    runPolicy={"schedulingPolicy": {"minAvailable": 3, "queue": "ml", "priorityClass": "high"}, "backoffLimit": 2},
    successPolicy="AllWorkers",
    enableDynamicWorker=True,
)


def test_every_field_not_carried_over_is_named() -> None:
    conv = convert(copy.deepcopy(UNSUPPORTED))
    named = {d.path for d in conv.not_carried}
    assert named == {
        "spec.successPolicy",
        "spec.enableDynamicWorker",
        "spec.tfReplicaSpecs.Chief.template.spec.hostNetwork",
        "spec.tfReplicaSpecs.Chief.template.spec.containers[1] (log-shipper)",
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].workingDir",
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].livenessProbe",
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].env[TF_CONFIG]",
    }
    assert conv.job["spec"]["runPolicy"]["backoffLimit"] == 2
    assert conv.job["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 3,
        "priorityClass": "high",
        "queue": "ml",
    }
    text = render(conv)
    assert "# NOT carried over:" in text
    for path in named:
        assert f"#   {path}: " in text
    assert yaml.safe_load(text) == conv.job


@pytest.mark.parametrize(
    "doc, message",
    [
        (tfjob({"PS": replica(1), "Worker": replica(2)}), "no Chief (or Master)"),
        (tfjob({"Chief": replica(2), "PS": replica(1), "Worker": replica(1)}), "Chief.replicas: must be 1"),
        (tfjob({"Chief": replica(0), "PS": replica(1), "Worker": replica(1)}), "Chief.replicas: must be 1"),
        (tfjob({"Master": replica(2), "Worker": replica(1)}), "Master.replicas: must be 0 or 1"),
        (tfjob({"Chief": replica(1), "PS": replica(1)}), "no Worker replica: a parameter-server job needs"),
        (tfjob({"Chief": replica(1)}), "no Worker replica: a job here trains on Workers"),
        (tfjob({"Worker": replica(1)}, successPolicy="AnyWorker"), "spec.successPolicy: 'AnyWorker' is not"),
        (
            tfjob({"Chief": replica(1), "PS": replica(1), "Worker": replica(1), "Launcher": replica(1)}),
            "Launcher: not a TFJob replica type",
        ),
        (
            tfjob({"Chief": replica(1, command=None), "PS": replica(1), "Worker": replica(1)}),
            "neither command nor args",
        ),
        (tfjob({"Chief": replica(1, restart="Sometimes"), "PS": replica(1), "Worker": replica(1)}), "Sometimes"),
        ({**tfjob({}), "kind": "PyTorchJob"}, "kind: expected TFJob"),
        ({**tfjob({}), "apiVersion": "kubeflow.org/v1beta2"}, "apiVersion: expected kubeflow.org/v1"),
    ],
)
def test_tfjobs_that_cannot_work_here_are_refused_naming_the_field(doc, message) -> None:
    with pytest.raises(ConvertError, match=message.replace("(", r"\(").replace(")", r"\)")):
        convert(doc)


def test_cli_prints_the_job_and_names_what_was_not_carried_on_stderr(tmp_path, capsys) -> None:
    path = tmp_path / "tfjob.yaml"
    path.write_text(yaml.safe_dump(UNSUPPORTED))
    assert main(argparse.Namespace(file=str(path), strict=False)) == 0
    out, err = capsys.readouterr()
    validate_job(yaml.safe_load(out))
    assert "tfps convert: not carried over: spec.successPolicy: " in err
    assert main(argparse.Namespace(file=str(path), strict=True)) == 1
    capsys.readouterr()
    path.write_text(yaml.safe_dump(tfjob({"PS": replica(1), "Worker": replica(1)})))
    assert main(argparse.Namespace(file=str(path), strict=False)) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no Chief (or Master)" in err


def test_tf_use_legacy_keras_becomes_the_keras_field_and_keras_2_is_the_default() -> None:
    plain = convert(tfjob({"Chief": replica(1), "PS": replica(1), "Worker": replica(2)}))
    assert "keras" not in plain.job["spec"]["model"]  # the default, legacy: said in a note
    assert any("spec.model.keras: legacy by default" in n for n in plain.notes)
    env = [{"name": "TF_USE_LEGACY_KERAS", "value": "0"}, {"name": "A", "value": "b"}]
    conv = convert(
        tfjob({"Chief": replica(1, env=env), "PS": replica(1, env=env[:1]), "Worker": replica(2, env=env[:1])})
    )
    assert conv.job["spec"]["model"]["keras"] == "keras3"
    chief = conv.job["spec"]["replicas"]["chief"]["template"]["spec"]["env"]
    assert chief == [{"name": "A", "value": "b"}] and "template" not in conv.job["spec"]["replicas"]["ps"]
    validate_job(conv.job)
    mixed = tfjob(
        {"Chief": replica(1, env=env[:1]), "PS": replica(1), "Worker": replica(1, env=[{**env[0], "value": "1"}])}
    )
    with pytest.raises(ConvertError, match="TF_USE_LEGACY_KERAS differently"):
        convert(mixed)


# The most common TFJob: MultiWorkerMirroredStrategy on Workers alone (Kubeflow runs a TFJob without PS
# as all-reduce).
MWMS_TFJOB = tfjob(
    {
        "Worker": {
            "replicas": 3,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "gcr.io/p/mwms:1",
                            "command": ["python", "/app/mwms.py"],
                            "args": ["--epochs=3"],
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ]
                }
            },
        }
    }
)


def test_a_worker_only_tfjob_becomes_a_multi_worker_mirrored_job_without_ps_or_chief() -> None:
    conv = convert(copy.deepcopy(MWMS_TFJOB))
    spec = conv.job["spec"]
    assert spec["strategy"] == "MultiWorkerMirrored"
    assert spec["model"] == {"command": ["python", "/app/mwms.py", "--epochs=3"]}
    assert spec["replicas"] == {
        "worker": {"replicas": 3, "restartPolicy": "OnFailure", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    }
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running"}  # no successPolicy: the default, ChiefOrWorker0
    assert conv.not_carried == []
    assert any(n.startswith("strategy: MultiWorkerMirrored, as the TFJob has no PS") for n in conv.notes)
    job = validate_job(conv.job)
    assert job.spec.strategy == "MultiWorkerMirrored"
    assert [job.spec.replicas.of(r).replicas for r in ("chief", "ps", "worker", "evaluator")] == [0, 0, 3, 0]
    assert job.spec.run_policy.success_policy == "ChiefOrWorker0"


def test_worker_and_chief_keep_the_chief_and_the_job_runs_the_chiefs_program() -> None:
    conv = convert(
        tfjob({"Master": replica(1, command=("python", "lead.py")), "Worker": replica(2, command=("python", "w.py"))})
    )
    spec = conv.job["spec"]
    assert spec["strategy"] == "MultiWorkerMirrored" and "ps" not in spec["replicas"]
    assert spec["replicas"]["chief"] == {"replicas": 1, "restartPolicy": "Never"}
    assert spec["model"]["command"] == ["python", "lead.py"]
    assert spec["replicas"]["worker"]["template"]["spec"]["command"] == ["python", "w.py"]
    job = validate_job(conv.job)
    assert [job.spec.replicas.of(r).replicas for r in ("chief", "ps", "worker")] == [1, 0, 2]
    assert job.spec.program("worker") == ["python", "w.py"]


def test_worker_and_evaluator_run_the_workers_program_without_a_chief() -> None:
    conv = convert(
        tfjob({"Evaluator": replica(command=("python", "eval.py")), "Worker": replica(2, command=("python", "w.py"))})
    )
    spec = conv.job["spec"]
    assert spec["strategy"] == "MultiWorkerMirrored"
    assert set(spec["replicas"]) == {"worker", "evaluator"}
    assert spec["model"]["command"] == ["python", "w.py"]  # the workers', not the first replica type's
    assert "template" not in spec["replicas"]["worker"]
    assert spec["replicas"]["evaluator"]["template"]["spec"]["command"] == ["python", "eval.py"]
    job = validate_job(conv.job)
    assert [job.spec.replicas.of(r).replicas for r in ("chief", "ps", "worker", "evaluator")] == [0, 0, 2, 1]


def test_a_ps_with_replicas_0_is_no_ps() -> None:
    conv = convert(tfjob({"PS": replica(0), "Worker": replica(2)}))
    assert conv.job["spec"]["strategy"] == "MultiWorkerMirrored" and "ps" not in conv.job["spec"]["replicas"]
    assert [d.path for d in conv.not_carried] == ["spec.tfReplicaSpecs.PS"]
    validate_job(conv.job)


def test_all_workers_maps_in_a_job_led_by_worker_0() -> None:
    conv = convert(copy.deepcopy({**MWMS_TFJOB, "spec": {**MWMS_TFJOB["spec"], "successPolicy": "AllWorkers"}}))
    assert conv.job["spec"]["runPolicy"]["successPolicy"] == "AllWorkers"
    assert conv.not_carried == []
    assert validate_job(conv.job).spec.run_policy.success_policy == "AllWorkers"
    default = convert(tfjob({"Worker": replica(2)}, successPolicy=""))  # TFJob's default, spelled out
    assert "successPolicy" not in default.job["spec"]["runPolicy"] and default.not_carried == []


@pytest.mark.parametrize(
    "specs, reason",
    [
        ({"Chief": replica(1), "PS": replica(1), "Worker": replica(2)}, "its workers never exit"),
        ({"Master": replica(1), "Worker": replica(2)}, "Kubeflow ignores AllWorkers in a TFJob with a Master"),
    ],
)
def test_all_workers_is_named_where_the_chief_decides(specs, reason) -> None:
    conv = convert(tfjob(specs, successPolicy="AllWorkers"))
    assert [d.path for d in conv.not_carried] == ["spec.successPolicy"]
    assert reason in conv.not_carried[0].reason
    assert "successPolicy" not in conv.job["spec"]["runPolicy"]
    assert validate_job(conv.job).spec.run_policy.success_policy == "ChiefOrWorker0"


def test_a_container_run_by_its_image_entrypoint_is_refused_saying_what_to_add() -> None:
    worker = replica(2, command=None)
    sidecar = {"name": "log-shipper", "image": "fluent:1"}
    worker["template"]["spec"]["containers"].insert(0, sidecar)
    with pytest.raises(ConvertError) as err:
        convert(tfjob({"Worker": worker}))
    message = str(err.value)
    assert message.startswith("spec.tfReplicaSpecs.Worker.template.spec.containers[1].command: required: ")
    assert "neither command nor args" in message and "ENTRYPOINT" in message
    assert "Add the program as command: in the tensorflow container" in message
    assert '["python", "/opt/train.py"]' in message
    assert "must know the program's argv" in message


def test_a_ps_job_without_a_chief_is_refused_naming_the_field_to_add() -> None:
    with pytest.raises(ConvertError) as err:
        convert(tfjob({"PS": replica(2), "Worker": replica(4)}))
    message = str(err.value)
    assert message.startswith("spec.tfReplicaSpecs.Chief: required with PS: ")
    assert "add a Chief replica with replicas: 1" in message


def test_what_the_operator_sets_on_the_pods_is_named_not_carried_and_the_job_validates() -> None:
    chief = replica(1, env=[{"name": "HOME", "value": "/home/app"}, {"name": "KEEP", "value": "1"}])
    chief["template"]["metadata"] = {
        "labels": {"scheduling.x-k8s.io/pod-group": "mnist-ps", "team": "vision"},
        "annotations": {"tfps.dev/restart": "0"},
    }
    conv = convert(tfjob({"Chief": chief, "PS": replica(1), "Worker": replica(1)}))
    assert {d.path for d in conv.not_carried} == {
        "spec.tfReplicaSpecs.Chief.template.spec.containers[0].env[HOME]",
        "spec.tfReplicaSpecs.Chief.template.metadata.labels[scheduling.x-k8s.io/pod-group]",
        "spec.tfReplicaSpecs.Chief.template.metadata.annotations[tfps.dev/restart]",
    }
    template = conv.job["spec"]["replicas"]["chief"]["template"]
    assert template["metadata"] == {"labels": {"team": "vision"}}
    assert template["spec"]["env"] == [{"name": "KEEP", "value": "1"}]
    validate_job(conv.job)


def keras_mwms_tfjob(args: list[str]) -> dict:
    """Kubeflow's MultiWorkerMirrored Keras example: its checkpoint and saved-model flags on a claim at /train."""
    job = copy.deepcopy(MWMS_TFJOB)
    spec = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["containers"][0]["args"] = args
    spec["containers"][0]["volumeMounts"] = [{"name": "training", "mountPath": "/train"}]
    spec["volumes"] = [{"name": "training", "persistentVolumeClaim": {"claimName": "strategy-volume"}}]
    return job


def test_the_programs_directory_flags_on_a_mounted_volume_fill_spec_model_directories() -> None:
    args = ["--saved_model_dir", "/train/saved_model/", "--checkpoint_dir", "/train/checkpoint", "--log_dir=/tmp/l"]
    conv = convert(keras_mwms_tfjob(args))
    assert conv.job["spec"]["model"]["directories"] == {
        "checkpoints": "/train/checkpoint",
        "savedModel": "/train/saved_model",
    }
    notes = "\n".join(conv.notes)
    assert "spec.model.directories.savedModel: /train/saved_model (from --saved_model_dir)" in notes
    assert "--log_dir /tmp/l: on no volume the lead mounts" in notes and "spec.model.directories.tensorboard" in notes
    assert "export and verify the model the program saves to /train/saved_model" in notes
    job = validate_job(conv.job)
    assert job.spec.model.directories is not None and job.spec.model.directories.checkpoints == "/train/checkpoint"


def test_an_estimators_model_dir_holds_its_checkpoints_and_event_files() -> None:
    conv = convert(keras_mwms_tfjob(["--model_dir=/train/run1"]))
    assert conv.job["spec"]["model"]["directories"] == {"checkpoints": "/train/run1", "tensorboard": "/train/run1"}


def test_without_directory_flags_the_note_says_which_field_to_set() -> None:
    conv = convert(keras_mwms_tfjob(["--epochs=3"]))
    assert "directories" not in conv.job["spec"]["model"]
    assert any(n.startswith("spec.model.directories: not set") for n in conv.notes), conv.notes
