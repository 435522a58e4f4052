"""Helpers for export tests: run the real exporter CLI in a subprocess against a job root."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tfps_wire.export_result import ExportFailed, ExportSucceeded, parse_message
from tfps_wire.job_settings import ExportSettings, JobSettings, Paths

HERE = Path(__file__).parent


@dataclass
class Run:
    rc: int
    result: ExportSucceeded | ExportFailed
    stdout: str
    stderr: str


def settings(root: Path, module: str, args: dict[str, Any] | None = None, **export: Any) -> JobSettings:
    return JobSettings(
        job_name="exp",
        namespace="tests",
        model_module=module,
        model_args=args or {},
        steps=1,
        batch_size=32,
        paths=Paths(root=str(root)),
        export=ExportSettings(**export),
    )


def run_export(job: JobSettings, *cli: str, timeout: float = 600, env: dict[str, str] | None = None) -> Run:
    """``python -m tfps_trainer.export`` as the export Job runs it; the result is read from the termination log.
    ``env``: more of the export container's environment (``TFPS_LINEAGE``)."""
    log = Path(job.paths.root).parent / f"termination-{Path(job.paths.root).name}.log"
    log.unlink(missing_ok=True)
    env = dict(
        os.environ,
        TFPS_JOB=job.to_env(),
        TFPS_TERMINATION_LOG=str(log),
        PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tfps_trainer.export", *cli], env=env, capture_output=True, text=True, timeout=timeout
    )
    text = log.read_text()
    assert text == proc.stdout.strip().splitlines()[-1], "the termination log and the last stdout line differ"
    return Run(proc.returncode, parse_message(text), proc.stdout, proc.stderr)


def snapshot(exports: Path) -> dict[str, Any]:
    """Everything under exports/ (names, sizes, mtimes, link targets), to prove a failed run changed nothing."""
    out: dict[str, Any] = {}
    if not exports.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(exports):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(exports).as_posix()
            if rel == ".lock":
                continue
            st = p.lstat()
            out[rel] = (os.readlink(p) if p.is_symlink() else None, st.st_size if p.is_file() else None, st.st_mtime_ns)
    return out


@pytest.fixture(scope="session")
def testmodels_on_path() -> None:
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
