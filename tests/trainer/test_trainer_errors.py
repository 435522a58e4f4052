"""Bad TF_CONFIG / TFPS_JOB / model module: one-line reason, termination log, distinct exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_cluster import make_settings

from tfps_operator.manifests.tfconfig import tf_config_json
from tfps_wire import exitcodes

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]


def _addr(role: str, i: int) -> str:
    return f"127.0.0.1:{20000 + i}"


CHIEF = tf_config_json({"chief": 1, "ps": 1, "worker": 1}, _addr, "chief", 0)


def run_trainer(
    tmp_path: Path, tf_config: str | None, job: str | None, log_path: str | None = None
) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "TFPS_JOB")}
    if tf_config is not None:
        env["TF_CONFIG"] = tf_config
    if job is not None:
        env["TFPS_JOB"] = job
    term = log_path or str(tmp_path / "termination.log")
    env.update(TFPS_TERMINATION_LOG=term, TFPS_PROGRESS_HOST="127.0.0.1", TFPS_PROGRESS_PORT="0")
    proc = subprocess.run([sys.executable, "-m", "tfps_trainer"], env=env, capture_output=True, text=True, timeout=100)
    written = Path(term).read_text() if Path(term).is_file() else ""
    return proc.returncode, proc.stderr, written


def _settings(tmp_path: Path, **kw: object) -> str:
    return make_settings(tmp_path / "job", **kw).to_env()


@pytest.mark.parametrize(
    ("tf_config", "expected"),
    [
        (None, "TF_CONFIG is not set"),
        ("{not json", "TF_CONFIG is not valid JSON"),
        (
            '{"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "boss", "index": 0}}',
            "TF_CONFIG.task.type: 'boss'",
        ),
        (
            '{"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"], "worker": ["127.0.0.1:3"]},'
            ' "task": {"type": "worker", "index": 4}}',
            "TF_CONFIG.task: worker/4 is not in the cluster",
        ),
        ('{"cluster": {"chief": ["nohostport"]}, "task": {"type": "chief", "index": 0}}', "TF_CONFIG.cluster.chief"),
        (
            '{"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "chief", "index": 0}}',
            "TF_CONFIG.cluster.ps: missing",
        ),
    ],
    ids=["missing", "not-json", "bad-role", "index-out-of-range", "bad-address", "no-ps"],
)
def test_bad_tf_config(tmp_path: Path, tf_config: str | None, expected: str) -> None:
    code, stderr, term = run_trainer(tmp_path, tf_config, _settings(tmp_path))
    assert code == exitcodes.CONFIG
    assert stderr.strip().count("\n") == 0, stderr  # exactly one line: TF is never imported
    assert expected in stderr
    assert term.strip() == stderr.strip()


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (None, "TFPS_JOB is not set"),
        ("[1, 2", "TFPS_JOB is not valid JSON"),
        (
            json.dumps({"job_name": "j", "model_module": "m", "steps": 0, "batch_size": 1, "paths": {"root": "/x"}}),
            "TFPS_JOB.steps: Input should be greater than or equal to 1",
        ),
    ],
    ids=["missing", "not-json", "zero-steps"],
)
def test_bad_job_settings(tmp_path: Path, job: str | None, expected: str) -> None:
    code, stderr, term = run_trainer(tmp_path, CHIEF, job)
    assert code == exitcodes.CONFIG
    assert stderr.strip().count("\n") == 0, stderr
    assert stderr.strip() == f"tfps-trainer chief/0: {expected}" or expected in stderr
    assert term.strip() == stderr.strip()


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("no_such_pkg.model", "model module 'no_such_pkg.model' cannot be imported"),
        (
            "json",
            "model module 'json' is missing required function(s): "
            "build_model, dataset, loss, optimizer, input_signature",
        ),
    ],
    ids=["unimportable", "missing-functions"],
)
def test_bad_model_module(tmp_path: Path, module: str, expected: str) -> None:
    code, stderr, term = run_trainer(tmp_path, CHIEF, _settings(tmp_path, model_module=module))
    assert code == exitcodes.CONTRACT
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("tfps-trainer chief/0: ") and expected in last
    assert term.strip() == last


def test_unwritable_termination_log_is_skipped(tmp_path: Path) -> None:
    code, stderr, _ = run_trainer(tmp_path, None, None, log_path=str(tmp_path / "missing-dir" / "log"))
    assert code == exitcodes.CONFIG and "TF_CONFIG is not set" in stderr


def test_a_model_module_that_raises_keeps_its_traceback_in_the_log_and_the_termination_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "broken_model.py").write_text(
        "def helper(args):\n    return args['units']\n\n\nCONFIG = helper({})\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'mods'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    code, stderr, term = run_trainer(tmp_path, CHIEF, _settings(tmp_path, model_module="broken_model"))
    assert code == exitcodes.CONTRACT
    last = stderr.strip().splitlines()[-1]
    assert last == "tfps-trainer chief/0: model module 'broken_model' raised KeyError on import: 'units'"
    assert 'broken_model.py", line 2, in helper' in stderr and "KeyError: 'units'" in stderr  # the whole traceback
    lines = term.strip().splitlines()
    assert lines[-1] == last  # the reason stays the last line of the termination message
    assert any('broken_model.py", line 5' in ln for ln in lines[:-1]) and len(term.encode()) <= 4096
