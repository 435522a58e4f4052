"""`tfps check FILE`: the export pre-flight with the real exporter, before any training."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.tf, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
TESTMODELS = REPO / "tests" / "export"


def check(
    tmp_path: Path,
    spec_export: dict | None = None,
    module: str = "tfps_trainer.examples.linear",
    args: dict | None = None,
    raw: str | None = None,
) -> subprocess.CompletedProcess:
    job = tmp_path / "job.yaml"
    if raw is not None:
        job.write_text(raw)
    else:
        job.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "tfps.dev/v1alpha1",
                    "kind": "PSTrainingJob",
                    "metadata": {"name": "checked"},
                    "spec": {
                        "model": {"module": module, "args": args or {}},
                        "training": {"steps": 10},
                        "storage": {"claimName": "data"},
                        "export": spec_export or {},
                    },
                }
            )
        )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTMODELS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "tfps_operator.tools.cli", "check", str(job)],
        capture_output=True,
        text=True,
        env=env,
        timeout=500,
        cwd=tmp_path,
    )


def test_the_quickstart_checks_every_format_in_seconds_and_leaves_nothing_behind(tmp_path):
    run = check(tmp_path, raw=(REPO / "examples" / "quickstart.yaml").read_text())
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("export pre-flight of tfps_trainer.examples.linear (default/quickstart), fresh weights")
    verdicts = {ln.split()[0] + (" " + ln.split()[1] if ln.split()[1].startswith("(") else ""): ln for ln in lines[2:]}
    assert set(verdicts) == {"savedmodel", "tflite", "tflite (dynamic)", "onnx"}
    assert all(" ok " in ln for ln in verdicts.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]  # no work directory, no exports


def test_a_format_that_will_fail_is_named_with_its_reason_and_only_a_required_one_fails_the_check(tmp_path):
    spec = {"formats": ["savedmodel", "tflite", "onnx"]}
    run = check(tmp_path, spec, module="tfps_export_testmodels.lookup", args={"kind": "integer"})
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {ln.split("  ")[0].strip(): ln for ln in run.stdout.splitlines()[2:] if not ln.startswith("  ")}
    assert " ok " in rows["savedmodel"] and "will fail" in rows["tflite"] and "will fail" in rows["onnx"]
    assert "tflite: the model has a lookup table LiteRT's built-in ops cannot run" in run.stdout
    assert "move the StringLookup/IntegerLookup/Hashing step into the dataset" in run.stdout
    required = check(
        tmp_path,
        {**spec, "required": ["savedmodel", "onnx"]},
        module="tfps_export_testmodels.lookup",
        args={"kind": "integer"},
    )
    assert required.returncode == 1
    assert "WILL FAIL (required)" in required.stdout
    assert "required format(s) onnx cannot be exported" in required.stderr


def test_a_model_module_that_breaks_the_contract_fails_the_check_with_its_reason(tmp_path):
    (tmp_path / "brokenmodel.py").write_text("def build_model(args):\n    raise ValueError('no such layer: Densse')\n")
    run = check(tmp_path, module="brokenmodel")
    assert run.returncode == 1
    assert "ContractError" in run.stderr and "missing required function(s)" in run.stderr


def test_invalid_input_names_the_field(tmp_path):
    run = check(tmp_path, {"formats": ["savedmodel"], "required": ["onnx"]})
    assert run.returncode == 2
    assert "spec.export.required" in run.stderr and "every required format must be listed in formats" in run.stderr
