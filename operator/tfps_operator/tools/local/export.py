"""The export step of `tfps run`: run ``python -m tfps_trainer.export`` and show what it produced.

The exporter reads the same TFPS_JOB, writes ``<root>/exports/<step>/`` with a manifest, and writes
its JSON result (``tfps_wire.export_result``, TF-free) to its termination log. Transient failures
are retried up to ``spec.export.backoffLimit`` times.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from tfps_wire.export_result import (
    ArtifactResult,
    ExportFailed,
    ExportSucceeded,
    FormatFailure,
    artifact_label,
    human_size,
    parse_message,
)
from tfps_wire.job_settings import SETTINGS_ENV
from tfps_wire.lineage import LINEAGE_ENV, Lineage, TrainingOutcome, of_spec
from tfps_wire.termination import parse_success
from tfps_wire.uri import is_uri, join

from .procs import Child, stop_all
from .progress_display import Display
from .supervisor import LocalJob, TrainingResult

RETRYABLE = {"PublishFailed", "InternalError", "Interrupted"}
"""Export failures worth another attempt; the others (bad model, failed verification...) repeat."""


@dataclass
class ExportOutcome:
    ok: bool
    """Every required format was exported (optional ones may be in ``failed``)."""
    message: str
    step: int | None = None
    path: str | None = None
    artifacts: list[ArtifactResult] = field(default_factory=list)
    failed: list[FormatFailure] = field(default_factory=list)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    """Per artifact label: verification warnings and notes from the manifest (e.g. inconclusive, fixed batch)."""


def read_result(child: Child) -> ExportSucceeded | ExportFailed | None:
    """The exporter's result from its termination log (None if it wrote none or garbage)."""
    try:
        return parse_message(child.reason())
    except ValueError:
        return None


def published(plan: LocalJob, result: ExportSucceeded | ExportFailed) -> ExportOutcome:
    """What an export published, with absolute paths for the table. Artifacts, failures, warnings and notes
    come from manifest.json; the termination message (which may be truncated, and has no warnings) only
    when the manifest cannot be read and the message is complete."""
    assert result.path is not None and result.manifest is not None
    artifacts, failed = list(result.artifacts), list(result.failed)
    warnings: dict[str, list[str]] = {}
    if is_uri(plan.settings.paths.root):
        # object storage: the exporter read its manifest back before reporting; its message is what we have
        export_uri = join(plan.settings.paths.root, result.path)
        if result.truncated and isinstance(result, ExportSucceeded):
            return ExportOutcome(False, f"ExportFailed: the exporter's result was truncated; see {export_uri}")
        artifacts = [a.model_copy(update={"path": join(plan.settings.paths.root, a.path)}) for a in artifacts]
        return _outcome(plan, result, export_uri, artifacts, failed, warnings)
    root = plan.root
    export_dir = root / result.path
    try:
        manifest = json.loads((root / result.manifest).read_text())
    except (OSError, ValueError) as exc:
        if result.truncated or not artifacts:
            return ExportOutcome(
                False, f"ExportFailed: cannot read the export manifest {root / result.manifest}: {exc}"
            )
        artifacts = [a.model_copy(update={"path": str(root / a.path)}) for a in artifacts]
    else:
        artifacts = []
        for a in manifest.get("artifacts", []):
            verification = a.get("verification") or {}
            artifacts.append(
                ArtifactResult(
                    format=a["format"],
                    path=str(export_dir / a["path"]),
                    bytes=a["bytes"],
                    sha256=a["sha256"],
                    max_error=verification.get("maxAbsError"),
                    quantization=a.get("quantization"),
                )
            )
            notes = [*verification.get("warnings", []), *a.get("notes", [])]
            if notes:
                warnings[artifact_label(a["format"], a.get("quantization"))] = notes
        failed = [FormatFailure.model_validate(f) for f in manifest.get("failed", [])]

    return _outcome(plan, result, str(export_dir), artifacts, failed, warnings)


def _outcome(
    plan: LocalJob,
    result: ExportSucceeded | ExportFailed,
    export_dir: str,
    artifacts: list[ArtifactResult],
    failed: list[FormatFailure],
    warnings: dict[str, list[str]],
) -> ExportOutcome:
    def outcome(ok: bool, message: str) -> ExportOutcome:
        return ExportOutcome(
            ok, message, step=result.step, path=export_dir, artifacts=artifacts, failed=failed, warnings=warnings
        )

    if isinstance(result, ExportFailed):
        return outcome(False, f"ExportFailed: {result.reason}: {result.message}")
    unaccounted = set(plan.settings.export.formats) - {a.format for a in artifacts} - {f.format for f in failed}
    if unaccounted:
        return outcome(False, f"ExportFailed: no {', '.join(sorted(unaccounted))} artifact in {export_dir}")
    missing = f"; not exported: {', '.join(f.label for f in failed)}" if failed else ""
    return outcome(True, f"exported step {result.step} to {export_dir}{missing}")


def local_lineage(plan: LocalJob, trained: TrainingResult | None) -> Lineage:
    """What ``tfps run`` tells the exporter about the training it supervised: the spec, the chief's final
    checkpoint (its success summary) and its last progress report; no image (local processes)."""
    status = trained.status if trained else None
    final = parse_success(trained.message) if trained else None
    training = TrainingOutcome(
        step=final.step if final else (status.checkpoint_step if status else None),
        target_steps=plan.settings.steps,
        final_checkpoint=final.path if final else (status.checkpoint_path if status else None),
        loss=status.loss if status else None,
        steps_per_second=status.steps_per_second if status else None,
        reported_step=status.step if status else None,
    )
    return of_spec(plan.job.spec.to_wire(), "tfps run", training=training)


def run_export(
    plan: LocalJob,
    display: Display,
    trained: TrainingResult | None = None,
    grace: float = 10.0,
    poll: float = 0.5,
) -> ExportOutcome:
    """Run the exporter (retrying transient failures) to a verified export; stops it on any interruption.
    ``trained``: how training ended, for the export's lineage."""
    env = {
        **plan.base_env(),
        SETTINGS_ENV: plan.settings.to_env(),
        LINEAGE_ENV: local_lineage(plan, trained).to_env(),
    }
    child = plan.export_child(env)
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
            return published(plan, result)
        if isinstance(result, ExportFailed) and result.manifest is not None:
            return published(plan, result)  # a required format failed; what passed was published
        reason = result.reason if isinstance(result, ExportFailed) else "ExporterDied"
        message = child.describe_failure(
            code, reason=f"{result.reason}: {result.message}" if isinstance(result, ExportFailed) else None
        )
        if attempt == attempts or reason not in RETRYABLE | {"ExporterDied"}:
            return ExportOutcome(False, f"ExportFailed: {message}")
        display.event(f"export attempt {attempt} failed ({reason}); retrying")
    raise AssertionError("unreachable")


def artifact_rows(out: ExportOutcome) -> list[tuple[str, str, str, str, str]]:
    """(format, status, path, size, verified max error) per artifact, then the formats that failed."""
    rows = [
        (
            artifact_label(a.format, a.quantization),
            "verified" + (" (see notes)" if artifact_label(a.format, a.quantization) in out.warnings else ""),
            a.path,
            human_size(a.bytes),
            "-" if a.max_error is None else f"{a.max_error:.3g}",
        )
        for a in out.artifacts
    ]
    rows += [(f.label, "NOT EXPORTED", f.reason, "-", "-") for f in out.failed]
    return rows


def notes_lines(out: ExportOutcome) -> list[str]:
    """One line per failure reason and per warning or note, under the table."""
    lines = [f"{f.label}: not exported: {f.message}" for f in out.failed]
    lines += [f"{label}: {note}" for label, notes in out.warnings.items() for note in notes]
    return lines
