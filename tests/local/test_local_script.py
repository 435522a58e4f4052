"""`tfps run` in script mode: real programs under the trainer's wrapper, on loopback.

The seed program (examples/seed/train.py, a classic TF_CONFIG + tf_keras ParameterServerStrategy
model.fit script) runs unchanged; a Keras 3 program reports progress and checkpoints numbered by save
count; programs that fail at once, or do not exist, fail the run with their own reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from support.local_procs import tfps_run

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "seed"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def script_job(tmp: Path, name: str, command: list[str], **spec: object) -> Path:
    doc = {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "model": {"command": command},
            "replicas": {"chief": {"replicas": 1}, "ps": {"replicas": 1}, "worker": {"replicas": 1}},
            **spec,
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def checkpoint_steps(stdout: str) -> list[int]:
    return [
        int(line.split("checkpoint at step ", 1)[1].split(":", 1)[0])
        for line in stdout.splitlines()
        if "checkpoint at step " in line
    ]


def test_seed_program_runs_unchanged_checkpoints_are_followed_and_its_model_exported(tmp_path: Path) -> None:
    work = tmp_path / "work"
    res = tfps_run(SEED / "job.yaml", work, "--code", str(SEED))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    steps = checkpoint_steps(res.stdout)
    assert steps and steps[-1] == 150 and steps == sorted(steps) and set(steps) <= {50, 100, 150}, res.stdout
    assert "completed step 150/150; final checkpoint" in res.stdout
    root = work / "default" / "seed"
    manifest = json.loads((root / "exports" / "150" / "manifest.json").read_text())
    assert manifest["checkpoint"] == {"step": 150, "path": "checkpoints/ckpt-150"}
    assert manifest["source"] == {"kind": "savedmodel", "path": "model"}
    assert manifest["samples"]["origin"] == "synthetic"
    assert sorted(a["format"] for a in manifest["artifacts"]) == ["onnx", "savedmodel", "tflite"]
    assert all(a["verification"]["passed"] for a in manifest["artifacts"]), manifest["artifacts"]
    assert list((root / "tensorboard").rglob("events.out.tfevents.*")), (
        "the program's TensorBoard callback wrote nothing"
    )
    for line in ("savedmodel  verified", "tflite      verified", "onnx        verified"):
        assert line in res.stdout


def test_progress_reports_and_step_read_from_the_checkpoint_not_its_name(tmp_path: Path) -> None:
    job = script_job(
        tmp_path,
        "keras3",
        ["python", str(SCRIPTS / "keras3_report.py")],
        export={"formats": ["savedmodel", "keras", "onnx"]},
    )
    res = tfps_run(job, tmp_path / "work")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # 256 examples / batch 32 = 8 optimizer steps per epoch; the checkpoints are named ckpt-1..3
    seen = checkpoint_steps(res.stdout)
    assert seen and set(seen) <= {8, 16, 24} and seen == sorted(seen), res.stdout
    assert "completed step 24/24; final checkpoint" in res.stdout and "ckpt-3" in res.stdout, res.stdout
    root = tmp_path / "work" / "default" / "keras3"
    manifest = json.loads((root / "exports" / "24" / "manifest.json").read_text())
    assert manifest["source"] == {"kind": "keras", "path": "model/model.keras"}
    assert manifest["samples"]["origin"] == "samples_file"
    assert [i["name"] for i in manifest["signature"]["inputs"]] == ["features"]
    assert sorted(a["format"] for a in manifest["artifacts"]) == ["keras", "onnx", "savedmodel"]


TF_KERAS_FIT = [
    "python",
    str(SCRIPTS / "ps_fit_tf_keras.py"),
    "--checkpoint-dir",
    "$(TFPS_CHECKPOINT_DIR)",
    "--log-dir",
    "$(TFPS_TENSORBOARD_DIR)",
    "--model-dir",
    "$(TFPS_MODEL_DIR)",
]


def test_a_tf_keras_2_program_fitting_under_ps_runs_unchanged_by_default(tmp_path: Path) -> None:
    """tf.keras model.fit under ParameterServerStrategy, ModelCheckpoint with one fixed name (replaced in
    place every epoch), optimizer.lr, model.save(dir): Keras 2 idioms, run through tf_keras."""
    res = tfps_run(script_job(tmp_path, "fit2", TF_KERAS_FIT), tmp_path / "work")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    seen = checkpoint_steps(res.stdout)
    assert seen and seen[-1] == 120 and seen == sorted(seen) and set(seen) <= {40, 80, 120}, res.stdout
    assert "completed step 120/120; final checkpoint" in res.stdout, res.stdout
    root = tmp_path / "work" / "default" / "fit2"
    log = (root / "logs" / "chief-0.log").read_text()
    assert "epoch 3: learning rate now 0.0063" in log, log[-2000:]
    manifest = json.loads((root / "exports" / "120" / "manifest.json").read_text())
    assert manifest["source"] == {"kind": "savedmodel", "path": "model"}
    assert manifest["versions"]["tf_keras"]
    assert sorted(a["format"] for a in manifest["artifacts"]) == ["onnx", "savedmodel", "tflite"]
    assert all(a["verification"]["passed"] for a in manifest["artifacts"]), manifest["artifacts"]


def test_a_keras_2_program_under_keras_3_fails_at_once_with_the_fix(tmp_path: Path) -> None:
    model = {"command": TF_KERAS_FIT, "keras": "keras3"}
    job = script_job(tmp_path, "fit3", TF_KERAS_FIT, runPolicy={"backoffLimit": 3})
    doc = yaml.safe_load(job.read_text())
    doc["spec"]["model"] = model
    job.write_text(yaml.safe_dump(doc))
    res = tfps_run(job, tmp_path / "work", timeout=240)
    assert res.returncode == 1, res.stdout + res.stderr
    # permanent at once: no restart of a deterministic error; the program's own code is still shown
    assert "chief failed (exit code 8 (Incompatible, permanent)); a permanent error, not retried" in res.stderr
    assert "restarting the job" not in res.stdout + res.stderr, res.stdout
    assert "exited with code 1; hint (Keras3Incompatible): " in res.stderr, res.stderr
    assert "spec.model.keras: legacy" in res.stderr


def test_program_that_exits_2_at_once_fails_with_its_own_reason(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(
        "import sys\nprint('train.py: error: unrecognized arguments: --epoch', flush=True)\nsys.exit(2)\n"
    )
    job = script_job(tmp_path, "exits2", ["python", str(script)], runPolicy={"backoffLimit": 0})
    res = tfps_run(job, tmp_path / "work", timeout=240)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "exited with code 2" in res.stderr and "unrecognized arguments: --epoch" in res.stderr, res.stderr
    assert not (tmp_path / "work" / "default" / "exits2" / "exports").exists()


def test_a_module_missing_at_import_fails_in_one_attempt_with_the_hint(tmp_path: Path) -> None:
    """A program importing a package the image lacks: every attempt fails the same way, so none is retried
    (backoffLimit 3 would restart every replica three times), and the hint names the module."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "smoke.py").write_text("import json\nimport retrying\n\nprint(json.dumps({'ok': True}))\n")
    job = script_job(tmp_path, "noimport", ["python", "smoke.py"], runPolicy={"backoffLimit": 3})
    res = tfps_run(job, tmp_path / "work", "--code", str(code), timeout=240)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "exit code 9 (ProgramCannotRun, permanent)); a permanent error, not retried" in res.stderr, out
    assert "restarting the job" not in out and "recreating" not in out, out
    assert "missing-module: retrying" in res.stderr and "pip install retrying" in res.stderr, res.stderr
    logs = tmp_path / "work" / "default" / "noimport" / "logs"
    assert all(log.read_text().count("start #") == 1 for log in logs.glob("*.log")), [p.name for p in logs.iterdir()]


def test_command_that_does_not_exist_is_named(tmp_path: Path) -> None:
    job = script_job(tmp_path, "nocmd", ["no-such-program-tfps", "--flag"], runPolicy={"backoffLimit": 0})
    res = tfps_run(job, tmp_path / "work", timeout=240)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "cannot start program no-such-program-tfps --flag: No such file or directory" in res.stderr, res.stderr
    assert "exit code 127" in res.stderr


def test_a_contract_module_may_do_the_export_of_a_script_mode_job(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(SEED / "train.py", code / "train.py")
    shutil.copy(SCRIPTS / "seed_contract.py", code / "seed_contract.py")
    doc = yaml.safe_load((SEED / "job.yaml").read_text())
    doc["spec"]["model"]["module"] = "seed_contract"
    doc["spec"]["model"]["command"][3] = "1"  # one epoch of 50 steps
    doc["spec"]["training"]["steps"] = 50
    doc["spec"]["export"]["formats"] = ["savedmodel", "onnx"]
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(doc))
    res = tfps_run(job, tmp_path / "work", "--code", str(code))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    manifest = json.loads((tmp_path / "work" / "default" / "seed" / "exports" / "50" / "manifest.json").read_text())
    assert manifest["model"] == "seed_contract" and "source" not in manifest
    assert manifest["checkpoint"] == {"step": 50, "path": "checkpoints/ckpt-50"}
    assert manifest["samples"]["origin"] == "dataset"
