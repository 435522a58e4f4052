"""The export step of `tfps run`: run ``python -m tfps_trainer.export`` and show what it produced.

The exporter reads the same TFPS_JOB, writes ``<root>/exports/<step>/`` with a manifest, and writes
its JSON result (``tfps_trainer.export.result``, TF-free) to its termination log. Transient failures
are retried up to ``spec.export.backoffLimit`` times.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from tfps_trainer.config import SETTINGS_ENV
from tfps_trainer.export.result import ArtifactResult, ExportFailed, ExportSucceeded, parse_message

from .procs import Child, stop_all
from .progress import Display
from .supervisor import LocalJob


RETRYABLE = {"PublishFailed", "InternalError", "Interrupted"}
"""Export failures worth another attempt; the others (bad model, failed verification...) repeat."""


@dataclass
class ExportOutcome:
    ok: bool
    message: str
    step: int | None = None
    path: str | None = None
    artifacts: list[ArtifactResult] = field(default_factory=list)


def read_result(child: Child) -> ExportSucceeded | ExportFailed | None:
    """The exporter's result from its termination log (None if it wrote none or garbage)."""
    try:
        return parse_message(child.reason())
    except ValueError:
        return None


def succeeded(plan: LocalJob, result: ExportSucceeded) -> ExportOutcome:
    """Absolute paths for the table; artifacts from manifest.json when the message was truncated."""
    root = plan.root
    artifacts = list(result.artifacts)
    export_dir = root / result.path
    if result.truncated or not artifacts:
        try:
            manifest = json.loads((root / result.manifest).read_text())
        except (OSError, ValueError) as exc:
            return ExportOutcome(False, f"ExportFailed: cannot read the export manifest {root / result.manifest}: {exc}")
        artifacts = [
            ArtifactResult(format=a["format"], path=str(Path(result.path) / a["path"]), bytes=a["bytes"],
                           sha256=a["sha256"], max_error=(a.get("verification") or {}).get("maxAbsError"))
            for a in manifest.get("artifacts", [])
        ]
    artifacts = [a.model_copy(update={"path": str(root / a.path)}) for a in artifacts]
    return ExportOutcome(True, f"exported step {result.step} to {export_dir}", step=result.step,
                         path=str(export_dir), artifacts=artifacts)


def run_export(plan: LocalJob, display: Display, grace: float = 10.0, poll: float = 0.5) -> ExportOutcome:
    """Run the exporter (retrying transient failures) to a verified export; stops it on any interruption."""
    env = {**plan.base_env(), SETTINGS_ENV: plan.settings.to_env()}
    child = plan.child("export", list(plan.exporter), env)
    attempts = plan.job.spec.export.backoff_limit + 1
    formats = ", ".join(plan.settings.export.formats)
    for attempt in range(1, attempts + 1):
        display.event(f"exporting {formats} (attempt {attempt}/{attempts}); log: {child.log_path}")
        try:
            child.start()
            while (code := child.poll()) is None:
                time.sleep(poll)
        finally:
            stop_all([child], grace)
        result = read_result(child)
        if code == 0 and isinstance(result, ExportSucceeded):
            out = succeeded(plan, result)
            if not out.ok:
                return out
            missing = set(plan.settings.export.formats) - {a.format for a in out.artifacts}
            if not missing:
                return out
            return ExportOutcome(False, f"ExportFailed: no {', '.join(sorted(missing))} artifact in {out.path}")
        reason = result.reason if isinstance(result, ExportFailed) else "ExporterDied"
        message = child.describe_failure(
            code, reason=f"{result.reason}: {result.message}" if isinstance(result, ExportFailed) else None)
        if attempt == attempts or reason not in RETRYABLE | {"ExporterDied"}:
            return ExportOutcome(False, f"ExportFailed: {message}")
        display.event(f"export attempt {attempt} failed ({reason}); retrying")
    raise AssertionError("unreachable")


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def artifact_rows(artifacts: list[ArtifactResult]) -> list[tuple[str, str, str, str]]:
    """(format, path, size, verified max error) per artifact."""
    return [
        (
            a.format if a.quantization in (None, "none") else f"{a.format} ({a.quantization})",
            a.path,
            human_size(a.bytes),
            "-" if a.max_error is None else f"{a.max_error:.3g}",
        )
        for a in artifacts
    ]
