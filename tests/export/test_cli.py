"""The exporter CLI's cheap failure paths (no TensorFlow import needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tfps_wire.exitcodes import ExportCode
from tfps_wire.export_result import parse_message
from tfps_wire.job_settings import ExportSettings, JobSettings, Paths


def _run(tmp_path, env_extra):
    log = tmp_path / "termination-log"
    env = {k: v for k, v in os.environ.items() if k != "TFPS_JOB"}
    env.update(TFPS_TERMINATION_LOG=str(log), **env_extra)
    code = (
        "import sys; from tfps_trainer.export.__main__ import main; rc = main([]); "
        "print('tensorflow-loaded' if 'tensorflow' in sys.modules else 'no-tensorflow'); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "no-tensorflow"
    return proc, log


def test_missing_settings_exit_2_with_one_line_reason(tmp_path):
    proc, log = _run(tmp_path, {})
    assert proc.returncode == ExportCode.SETTINGS_INVALID
    result = parse_message(log.read_text())
    assert result.reason == "SettingsInvalid" and "TFPS_JOB is not set" in result.message
    assert json.loads(proc.stdout.strip().splitlines()[-2]) == json.loads(log.read_text())


def test_disabled_export_is_refused_before_tensorflow_loads(tmp_path):
    job = JobSettings(
        job_name="j",
        model_module="m",
        steps=1,
        batch_size=1,
        paths=Paths(root=str(tmp_path)),
        export=ExportSettings(enabled=False),
    )
    proc, log = _run(tmp_path, {"TFPS_JOB": job.to_env()})
    assert proc.returncode == ExportCode.SETTINGS_INVALID
    assert "export.enabled is false" in parse_message(log.read_text()).message


def test_malformed_settings_name_the_field(tmp_path):
    proc, log = _run(tmp_path, {"TFPS_JOB": json.dumps({"job_name": "j"})})
    assert proc.returncode == ExportCode.SETTINGS_INVALID
    assert "TFPS_JOB." in parse_message(log.read_text()).message
