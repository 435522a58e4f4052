"""`tfps check FILE`: the export pre-flight on this machine, before any training.

Builds the job's model with fresh weights, runs every requested conversion and verification (the
exporter's ``--preflight``: the same code as the export Job), and prints what will be exported and
what will fail, and why. Nothing is trained and nothing is published; it takes seconds.

Exit codes: 0 every required format converts and verifies (optional ones may fail: listed); 1 a
required format fails or the model cannot be built; 2 invalid input.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Set
from pathlib import Path

from tfps_wire.export_result import ExportFailed, PreflightReport, human_size, parse_any
from tfps_wire.job_settings import SETTINGS_ENV

from ...manifests.jobsettings import job_settings
from ..client.errors import InvalidJob
from ..jobfile import load_job, refusal_text
from .cli import EXIT_FAILED, EXIT_INVALID, print_table
from .procs import Child, stop_all
from .supervisor import LocalJob

PREFLIGHT_FLAG = "--preflight"


def preflight_rows(report: PreflightReport, required: Set[str]) -> list[tuple[str, str, str, str, str]]:
    """(format, verdict, size, max error, argmax agreement): those that convert, then those that will fail."""
    rows = [
        (
            a.label,
            "ok",
            human_size(a.bytes),
            "-" if a.max_error is None else f"{a.max_error:.3g}",
            "-" if a.argmax_agreement is None else f"{a.argmax_agreement:.3f}",
        )
        for a in report.artifacts
    ]
    rows += [
        (f.label, "WILL FAIL (required)" if f.format in required else "will fail", "-", "-", "-") for f in report.failed
    ]
    return rows


def run_preflight(plan: LocalJob, poll: float = 0.2) -> tuple[PreflightReport | ExportFailed | None, Child]:
    env = {**plan.base_env(), SETTINGS_ENV: plan.settings.to_env()}
    child = plan.child("preflight", [*plan.exporter, PREFLIGHT_FLAG], env)
    try:
        child.start()
        while child.poll() is None:
            time.sleep(poll)
    finally:
        stop_all([child], 10.0)
    try:
        result = parse_any(child.reason())
    except ValueError:
        return None, child
    return (result if isinstance(result, (PreflightReport, ExportFailed)) else None), child


def main(args: argparse.Namespace) -> int:
    try:
        job = load_job(args.file)
    except InvalidJob as exc:
        print(f"tfps check: {refusal_text(exc)}", file=sys.stderr)
        return EXIT_INVALID
    if not job.spec.export.enabled:
        print(f"tfps check: {args.file}: spec.export.enabled is false: nothing to check", file=sys.stderr)
        return EXIT_INVALID
    if job.spec.model.module is None:
        print(
            f"tfps check: {args.file}: script mode without spec.model.module: the program's model exists only "
            "after training, so there is nothing to check before it (the export verifies the saved model)",
            file=sys.stderr,
        )
        return EXIT_INVALID
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tfps-check-") as workdir:
        plan = LocalJob(job=job, settings=job_settings(job, mount_path=workdir))
        plan.logs.mkdir(parents=True, exist_ok=True)
        report, child = run_preflight(plan)
        if report is None:
            print(f"tfps check: {child.describe_failure(child.poll())}", file=sys.stderr)
            return EXIT_FAILED
        if isinstance(report, ExportFailed):
            print(
                f"tfps check: the model cannot be exported at all: {report.reason}: {report.message}\n"
                f"{Path(child.log_path).read_text(errors='replace')[-3000:]}",
                file=sys.stderr,
            )
            return EXIT_FAILED
    required = set(job.spec.export.required_formats())
    title = (
        f"export pre-flight of {job.spec.model.module} ({job.metadata.namespace}/{job.metadata.name}), "
        f"fresh weights, {time.monotonic() - started:.0f}s"
    )
    notes = [f.message for f in report.failed] + report.warnings
    print_table(
        title,
        ("format", "verdict", "size", "max error", "argmax agreement"),
        preflight_rows(report, required),
        notes,
        sys.stdout.isatty(),
    )
    if not report.ok:
        print(f"tfps check: required format(s) {', '.join(report.required_failed)} cannot be exported", file=sys.stderr)
        return EXIT_FAILED
    return 0
