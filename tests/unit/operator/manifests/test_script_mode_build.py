"""Script mode and the pod template fields in the manifests the operator builds, and the wrapper's pure
pieces: the program's environment, $(VAR) expansion, exit codes, the checkpoint state file and step key."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from support.operator_helpers import CFG, make_job
from tfps_operator.manifests.export_job import export_job
from tfps_operator.manifests.pods import BuildError, trainer_pod
from tfps_trainer.script.env import expand, program_env
from tfps_trainer.script.follow import latest_prefix, step_key
from tfps_trainer.script.progress_file import read_report, report
from tfps_trainer.script.wrapper import describe_exit, program_exit_code
from tfps_wire.job_settings import JobSettings, Paths

PROGRAM = ["python", "train.py", "--ckpt", "$(TFPS_CHECKPOINT_DIR)"]


def script_job(**spec):
    spec.setdefault("replicas", {"ps": {"replicas": 1}, "worker": {"replicas": 2}})
    spec.setdefault("model", {"command": PROGRAM})
    return make_job(training={}, **spec)


def settings_of(pod: dict) -> JobSettings:
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    return JobSettings.model_validate_json(env["TFPS_JOB"])


def test_every_replica_runs_the_trainer_which_runs_the_program_of_its_role():
    job = script_job(
        replicas={
            "ps": {"replicas": 1, "template": {"spec": {"command": ["python", "ps.py"]}}},
            "worker": {"replicas": 2, "template": {"spec": {"args": ["--role", "worker"]}}},
        }
    )
    pod = trainer_pod(job, "worker", 0, CFG)
    assert pod["spec"]["containers"][0]["command"] == ["python", "-m", "tfps_trainer"]
    s = settings_of(pod)
    assert s.script.programs == {
        "chief": tuple(PROGRAM),
        "ps": ("python", "ps.py"),
        "worker": (*PROGRAM, "--role", "worker"),
    }
    assert s.model_module is None and s.steps is None


def test_pod_template_fields_land_in_the_pod_and_the_token_stays_unmounted():
    tmpl = {
        "spec": {
            "serviceAccountName": "gcs-reader",
            "initContainers": [{"name": "fetch-data", "image": "busybox", "command": ["true"]}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"tfps.dev/job-name": "mnist"}},
                }
            ],
        }
    }
    job = script_job(
        image="reg/train:1",
        replicas={"ps": {"replicas": 1, "image": "reg/ps:2", "template": tmpl}, "worker": {"replicas": 1}},
    )
    ps = trainer_pod(job, "ps", 0, CFG)["spec"]
    assert ps["serviceAccountName"] == "gcs-reader" and ps["automountServiceAccountToken"] is False
    (init,) = ps["initContainers"]
    assert {k: v for k, v in init.items() if k != "securityContext"} == tmpl["spec"]["initContainers"][0]
    assert init["securityContext"] == ps["containers"][0]["securityContext"], "restricted defaults, as the trainer's"
    assert ps["topologySpreadConstraints"] == tmpl["spec"]["topologySpreadConstraints"]
    assert ps["containers"][0]["image"] == "reg/ps:2"
    assert trainer_pod(job, "worker", 0, CFG)["spec"]["containers"][0]["image"] == "reg/train:1"
    asked = script_job(
        replicas={
            "ps": {
                "replicas": 1,
                "template": {"spec": {"serviceAccountName": "sa", "automountServiceAccountToken": True}},
            },
            "worker": {"replicas": 1},
        }
    )
    assert trainer_pod(asked, "ps", 0, CFG)["spec"]["automountServiceAccountToken"] is True


def test_an_init_container_may_not_reuse_a_name():
    job = script_job(
        replicas={
            "ps": {"replicas": 1},
            "worker": {
                "replicas": 1,
                "template": {"spec": {"initContainers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]}},
            },
        }
    )
    with pytest.raises(
        BuildError, match=r"spec.replicas.worker.template.spec.initContainers\[1\].name: 'a' is already used"
    ):
        trainer_pod(job, "worker", 0, CFG)


def test_code_from_a_configmap_is_mounted_read_only_as_the_working_directory_of_pods_and_export():
    job = script_job(
        model={
            "command": PROGRAM,
            "source": {"configMap": "mnist-code", "items": [{"key": "pkg.__init__.py", "path": "pkg/__init__.py"}]},
        }
    )
    for spec in (trainer_pod(job, "chief", 0, CFG)["spec"], export_job(job, CFG)["spec"]["template"]["spec"]):
        c = spec["containers"][0]
        assert {
            "name": "code",
            "configMap": {
                "name": "mnist-code",
                "defaultMode": 0o444,
                "items": [{"key": "pkg.__init__.py", "path": "pkg/__init__.py"}],
            },
        } in spec["volumes"]
        assert {"name": "code", "mountPath": "/tfps-code", "readOnly": True} in c["volumeMounts"]
        assert c["workingDir"] == "/tfps-code" and {"name": "PYTHONPATH", "value": "/tfps-code"} in c["env"]
    assert settings_of(trainer_pod(job, "chief", 0, CFG)).code_dir == "/tfps-code"


def test_a_script_without_a_module_has_no_preflight_and_a_module_for_export_keeps_it():
    from tfps_operator.reconcile.export import preflight_pending

    class X:  # the fields preflight_pending reads
        def __init__(self, job):
            from support.operator_helpers import status

            self.job, self.status = job, status(phase="Pending")
            self.obs = type("O", (), {"pods": []})()

    assert not preflight_pending(X(script_job(export={"preflight": True})))
    with_module = make_job(
        model={"command": PROGRAM, "module": "tfps_trainer.examples.linear"}, training={}, export={"preflight": True}
    )
    assert preflight_pending(X(with_module))


SETTINGS = JobSettings(job_name="j", paths=Paths(root="/data/ns/j"), steps=300, batch_size=8, code_dir="/code")


def test_the_program_environment_and_kubernetes_expansion():
    env = program_env(SETTINGS, "worker", 1, "/tmp/p.json", base={"PYTHONPATH": "/lib", "HOME": "/tmp"})
    assert {k: v for k, v in env.items() if k.startswith("TFPS_") or k == "PYTHONPATH"} == {
        "TFPS_JOB_DIR": "/data/ns/j",
        "TFPS_CHECKPOINT_DIR": "/data/ns/j/checkpoints",
        "TFPS_TENSORBOARD_DIR": "/data/ns/j/tensorboard",
        "TFPS_MODEL_DIR": "/data/ns/j/model",
        "TFPS_SAMPLES_FILE": "/data/ns/j/model/samples.npz",
        "TFPS_PROGRESS_FILE": "/tmp/p.json",
        "TFPS_STEPS": "300",
        "TFPS_TASK_TYPE": "worker",
        "TFPS_TASK_INDEX": "1",
        "PYTHONPATH": "/code:/lib",
    }
    assert expand(["--dir=$(TFPS_MODEL_DIR)/x", "$(UNDEFINED)", "$$(TFPS_JOB_DIR)", "cost: $$5"], env) == [
        "--dir=/data/ns/j/model/x",
        "$(UNDEFINED)",
        "$(TFPS_JOB_DIR)",
        "cost: $5",
    ]


def test_exit_codes_of_the_program_are_passed_on_and_signals_become_128_plus_n():
    assert [program_exit_code(c) for c in (0, 2, 255, -signal.SIGKILL, -signal.SIGTERM)] == [0, 2, 255, 137, 143]
    # after a forwarded SIGTERM, a failure is a preemption (retryable, not counted against backoffLimit)
    assert [program_exit_code(c, terminated=True) for c in (0, 1, -signal.SIGTERM)] == [0, 6, 6]
    text = describe_exit(["python", "t.py"], 137, ["a", "", "Killed"])
    assert text == "program python t.py was killed by SIGKILL; last lines: a | Killed"
    assert describe_exit(["x"], 2, []) == "program x exited with code 2"


def test_the_state_file_names_the_latest_checkpoint(tmp_path: Path):
    (tmp_path / "ckpt-7.index").write_bytes(b"")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-7"\nall_model_checkpoint_paths: "ckpt-7"\n')
    assert latest_prefix(str(tmp_path)) == str(tmp_path / "ckpt-7")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "/other/mount/ckpt-7"\n')
    assert latest_prefix(str(tmp_path)) == str(tmp_path / "ckpt-7"), "a state file from another mount point"
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-8"\n')
    assert latest_prefix(str(tmp_path)) is None, "named, but its index is not there"


@pytest.mark.parametrize(
    "keys, expected",
    [
        (
            ["step/.ATTRIBUTES/VARIABLE_VALUE", "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"],
            "step/.ATTRIBUTES/VARIABLE_VALUE",
        ),
        (
            ["model/global_step/.ATTRIBUTES/VARIABLE_VALUE", "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"],
            "model/global_step/.ATTRIBUTES/VARIABLE_VALUE",
        ),
        (
            ["optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"],
            "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE",
        ),
        (["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"], "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"),
        (["save_counter/.ATTRIBUTES/VARIABLE_VALUE", "model/layer/steps/.ATTRIBUTES/VARIABLE_VALUE"], None),
    ],
)
def test_the_step_comes_from_a_step_variable_else_the_optimizer_never_the_save_counter(keys, expected):
    assert step_key(keys) == expected


def test_report_writes_what_the_wrapper_reads(tmp_path: Path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("TFPS_PROGRESS_FILE", str(path))
    report(step=42, loss=0.5, accuracy=0.9)
    assert read_report(str(path)) == {"step": 42, "loss": 0.5, "metrics": {"accuracy": 0.9}}
    report(step=43, loss=float("nan"))
    assert json.loads(path.read_text()) == {"step": 43}
    monkeypatch.delenv("TFPS_PROGRESS_FILE")
    report(step=44)  # outside tfps: nothing, no error
    assert read_report(str(path)) == {"step": 43}


def test_script_mode_runs_keras_2_by_default_and_keras_3_when_asked():
    legacy = settings_of(trainer_pod(script_job(), "worker", 0, CFG))
    assert legacy.script is not None and legacy.script.keras == "legacy"
    env = program_env(legacy, "worker", 0, "/tmp/p.json", base={"TF_USE_LEGACY_KERAS": "0"})
    assert env["TF_USE_LEGACY_KERAS"] == "1"  # the field decides, whatever the template's env says
    keras3 = settings_of(trainer_pod(script_job(model={"command": PROGRAM, "keras": "keras3"}), "chief", 0, CFG))
    assert program_env(keras3, "chief", 0, "/tmp/p.json", base={})["TF_USE_LEGACY_KERAS"] == "0"
    export = export_job(script_job(model={"command": PROGRAM, "keras": "keras3"}), CFG)
    assert settings_of(export["spec"]["template"]).script.keras == "keras3"  # the exporter loads with it


def test_the_keras_field_is_refused_for_a_contract_module_naming_the_field():
    from tfps_operator.api.validate import JobValidationError, validate_job

    doc = make_job(model={"module": "tfps_trainer.examples.linear", "keras": "legacy"}).to_wire()
    with pytest.raises(JobValidationError) as err:
        validate_job(doc)
    assert "spec.model.keras" in str(err.value) and "script mode" in str(err.value)


TRAIN_VOLUME = {
    "volumes": [{"name": "train", "persistentVolumeClaim": {"claimName": "train-pvc"}}],
    "volumeMounts": [{"name": "train", "mountPath": "/train"}],
}
OWN_DIRS = {"checkpoints": "/train/checkpoint", "savedModel": "/train/saved_model", "tensorboard": "/train/logs"}


def own_dirs_job():
    return script_job(
        strategy="MultiWorkerMirrored",
        replicas={"worker": {"replicas": 2, "template": {"spec": TRAIN_VOLUME}}},
        model={"command": PROGRAM, "directories": OWN_DIRS},
    )


def test_the_programs_own_directories_reach_the_wrapper_its_environment_and_the_exporter():
    job = own_dirs_job()
    s = settings_of(trainer_pod(job, "worker", 0, CFG))
    assert (s.checkpoint_dir, s.model_dir, s.tensorboard_dir) == (
        "/train/checkpoint",
        "/train/saved_model",
        "/train/logs",
    )
    env = program_env(s, "worker", 0, "/tmp/p.json", base={})
    assert env["TFPS_CHECKPOINT_DIR"] == "/train/checkpoint" and env["TFPS_MODEL_DIR"] == "/train/saved_model"
    assert env["TFPS_SAMPLES_FILE"] == f"{s.paths.model}/samples.npz"  # the job's own directory still
    export = export_job(job, CFG)["spec"]["template"]["spec"]
    assert {"name": "train", "persistentVolumeClaim": {"claimName": "train-pvc"}} in export["volumes"]
    (mount,) = [m for m in export["containers"][0]["volumeMounts"] if m["name"] == "train"]
    assert mount == {"name": "train", "mountPath": "/train", "readOnly": True}
    assert settings_of({"spec": export}).model_dir == "/train/saved_model"


def test_trainer_pods_keep_the_templates_mounts_writable():
    pod = trainer_pod(own_dirs_job(), "worker", 1, CFG)
    (mount,) = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "train"]
    assert not mount.get("readOnly")
