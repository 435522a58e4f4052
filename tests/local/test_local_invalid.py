"""`tfps run` on bad input: non-zero exit, the field path in the message, and nothing started."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from tfps_operator.tools.local import cli as local_cli
from tfps_operator.tools.local.procs import Child

VALID = """\
apiVersion: tfps.dev/v1alpha1
kind: PSTrainingJob
metadata:
  name: quick
spec:
  model:
    module: tfps_trainer.examples.linear
  training:
    steps: 20
"""


def _args(file: Path, workdir: Path, steps: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(file=str(file), workdir=str(workdir), steps=steps, no_export=False)


@pytest.fixture
def no_process_started(monkeypatch):
    """Fail the test if `tfps run` tries to start any child process."""

    def forbidden(self):
        raise AssertionError(f"process {self.name} started on invalid input")

    monkeypatch.setattr(Child, "start", forbidden)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s.replace("steps: 20", "steps: 0"), "spec.training.steps"),
        (
            lambda s: s.replace("    steps: 20", "    steps: 20\n  replicas:\n    ps:\n      replicas: -1"),
            "spec.replicas.ps.replicas",
        ),
        (lambda s: s.replace("  model:\n    module: tfps_trainer.examples.linear\n", ""), "spec.model"),
        (lambda s: s.replace("  training:", "  trainng:\n    steps: 1\n  training:"), "spec.trainng"),
        (lambda s: s.replace("module: tfps_trainer.examples.linear", "module: 'not a module'"), "spec.model.module"),
        (
            lambda s: s.replace("    steps: 20", "    steps: 20\n  export:\n    formats: [savedmodel, pickle]"),
            "spec.export.formats",
        ),
        (
            lambda s: s.replace("    steps: 20", "    steps: 20\n  replicas:\n    ps:\n      replicas: 0"),
            "spec.replicas.ps.replicas",
        ),
        (lambda s: s.replace("    steps: 20", "    steps: '20'"), "spec.training.steps"),
    ],
    ids=[
        "steps-zero",
        "ps-negative",
        "model-missing",
        "unknown-field",
        "bad-module-name",
        "bad-format",
        "no-ps",
        "steps-string",
    ],
)
def test_invalid_job_names_field_and_starts_nothing(tmp_path, capsys, no_process_started, mutate, field):
    job = tmp_path / "job.yaml"
    job.write_text(mutate(VALID))
    workdir = tmp_path / "work"
    rc = local_cli.main(_args(job, workdir))
    err = capsys.readouterr().err
    assert rc == local_cli.EXIT_INVALID
    assert field in err, err
    assert not workdir.exists(), "nothing may be written on invalid input"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("a: [unclosed", "not valid YAML"),
        ("- 1\n- 2\n", "expected a PSTrainingJob mapping"),
        (VALID + "---\n" + VALID, "found 2"),
        ("", "no PSTrainingJob document found"),
    ],
)
def test_malformed_file(tmp_path, capsys, no_process_started, content, needle):
    job = tmp_path / "job.yaml"
    job.write_text(content)
    assert local_cli.main(_args(job, tmp_path / "w")) == local_cli.EXIT_INVALID
    assert needle in capsys.readouterr().err


def test_missing_file_and_bad_steps(tmp_path, capsys, no_process_started):
    assert local_cli.main(_args(tmp_path / "nope.yaml", tmp_path / "w")) == local_cli.EXIT_INVALID
    assert "nope.yaml: cannot read" in capsys.readouterr().err
    job = tmp_path / "job.yaml"
    job.write_text(VALID)
    assert local_cli.main(_args(job, tmp_path / "w", steps=0)) == local_cli.EXIT_INVALID
    assert "--steps: must be ≥ 1" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert local_cli.main(_args(job, tmp_path / "file")) == local_cli.EXIT_INVALID
    assert "--workdir" in capsys.readouterr().err


def test_cli_entry_point_reports_field(tmp_path):
    """Through the real `tfps` command: exit 2, field path on stderr, no workdir created."""
    job = tmp_path / "job.yaml"
    job.write_text(VALID.replace("steps: 20", "steps: -5"))
    workdir = tmp_path / "work"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tfps_operator.tools.cli import main; sys.exit(main())",
            "run",
            str(job),
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "spec.training.steps" in proc.stderr
    assert not workdir.exists()


def test_plan_applies_overrides(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(VALID)
    args = _args(job, tmp_path / "w", steps=7)
    args.no_export = True
    plan = local_cli.local_job_from_args(args)
    assert plan.settings.steps == 7
    assert plan.settings.export.enabled is False
    assert plan.root == (tmp_path / "w" / "default" / "quick").resolve()
    assert plan.settings.paths.checkpoints == str(plan.root / "checkpoints")
    assert not (tmp_path / "w").exists()


def test_plan_carries_steps_per_closure_to_the_trainer(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(VALID + "    stepsPerClosure: 5\n")
    assert local_cli.local_job_from_args(_args(job, tmp_path / "w")).settings.steps_per_closure == 5
    job.write_text(VALID + "    stepsPerClosure: 0\n")
    with pytest.raises(local_cli.InvalidInput, match="spec.training.stepsPerClosure"):
        local_cli.local_job_from_args(_args(job, tmp_path / "w"))
