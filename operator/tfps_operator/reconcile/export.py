"""The export phase: the pre-flight Job before training (``spec.export.preflight``), the export Job after
it, and what their results write to ``status.export`` and the job's conditions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tfps_wire.export_result import ExportFailed, PreflightReport

from ..api.models import Artifact, ExportStatus, FailedArtifact
from ..manifests.export_job import export_job, with_lineage
from . import conditions as C
from . import lineage, messages, waiting
from .context import Reconciliation, last
from .endings import cleanup, fail, succeed
from .observed import PodObs
from .plan import Create


def preflight_pending(r: Reconciliation) -> bool:
    """A new job with export and pre-flight on that has no pre-flight verdict yet (a job whose pods already
    exist, e.g. started by an operator without pre-flight, is not held back)."""
    e = r.job.spec.export
    # A script-mode program's model exists only after training: nothing to check before, unless a
    # contract module does the export.
    return (
        e.enabled
        and e.preflight
        and r.job.spec.model.module is not None
        and r.status.phase == "Pending"
        and r.status.restarts == 0
        and not r.obs.pods
        and C.get(r.status, C.EXPORT_PREFLIGHT) is None
    )


def preflight_waiting(job_name: str, pods: Iterable[PodObs]) -> waiting.Waiting | None:
    """Why the pre-flight Job's pod waits (the rule of the training pods, :func:`.waiting.why`), said of the
    pre-flight: the job waits on it."""
    w = waiting.why(pods)
    return None if w is None else waiting.Waiting(w.reason, f"export pre-flight (Job {job_name}): {w.message}")


def preflight(r: Reconciliation) -> bool:
    """Run the pre-flight Job and act on its verdict; True when training may start now."""
    manifest = export_job(r.job, r.cfg, preflight=True)
    name = manifest["metadata"]["name"]
    pj = r.obs.preflight_job
    if pj is None or pj.deleting:
        if pj is None and not any(isinstance(a, Create) and a.key == f"Job/{name}" for a in r.plan.actions):
            r.plan.actions.append(Create(manifest))
        return False
    pod = last(p for p in r.obs.preflight_pods if p.phase in ("Succeeded", "Failed"))
    if pod is None and not (pj.complete or pj.failed):
        waiting.report(r, preflight_waiting(name, r.obs.preflight_pods))
        return False
    report = messages.preflight_report(pod.message) if pod else None
    if report is None or isinstance(report, ExportFailed) and report.reason in ("InternalError", "Interrupted"):
        why = (
            f"{report.reason}: {report.message}"
            if report is not None
            else (f"exit code {pod.exit_code}: {pod.message[-300:]}" if pod else pj.message or "no result")
        )
        r.set_condition(
            C.EXPORT_PREFLIGHT,
            "False",
            "PreflightDidNotRun",
            f"pre-flight Job {name} gave no verdict ({why}); training anyway",
        )
        r.event("Warning", "PreflightDidNotRun", f"export pre-flight gave no verdict ({why}); training anyway")
        return True
    if isinstance(report, ExportFailed):
        fail(r, "ExportPreflightFailed", f"export pre-flight: {report.reason}: {report.message}")
        return False
    assert isinstance(report, PreflightReport)  # the pre-flight pod writes a report, or fails
    if not report.ok:
        failed = "; ".join(f.message for f in report.failed if f.label in report.required_failed)
        fail(
            r,
            "ExportPreflightFailed",
            f"export pre-flight: required format(s) {', '.join(report.required_failed)} cannot be exported: {failed}",
        )
        return False
    if report.failed:
        message = "will not be exported: " + "; ".join(f.message for f in report.failed)
        r.set_condition(C.EXPORT_PREFLIGHT, "False", "FormatsWillFail", message)
        r.event("Warning", "ExportPreflightWarning", message)
        return True
    r.set_condition(
        C.EXPORT_PREFLIGHT,
        "True",
        "PreflightPassed",
        "converted and verified with fresh weights: "
        + ", ".join(report.passed)
        + ("; " + "; ".join(report.warnings) if report.warnings else ""),
    )
    return True


def exporting(r: Reconciliation, manifest: dict[str, Any] | None) -> None:
    cleanup(r)
    ej = r.obs.export_job
    if manifest is None:  # export was switched off after training finished
        succeed(r, "TrainingSucceeded", "training finished; export is disabled")
        return
    name = manifest["metadata"]["name"]
    if ej is None:
        if not any(isinstance(a, Create) and a.key == f"Job/{name}" for a in r.plan.actions):
            r.plan.actions.append(Create(with_lineage(manifest, lineage.for_export(r.asked, r.status))))
        return
    if ej.complete:
        pod = last(p for p in r.obs.export_pods if p.phase == "Succeeded")
        result = messages.export_result(pod.message if pod else "")
        if isinstance(result, str):
            fail(r, "ExportFailed", f"export Job {name} completed but left no usable result: {result}")
            return
        record_export(r, name, result)
        if not result.ok:
            fail(r, "ExportFailed", f"{result.reason}: {result.message}")
            return
        formats = ", ".join(_label(a.format, a.quantization) for a in result.artifacts) or "see manifest"
        r.clear(C.EXPORTING, "ExportSucceeded", f"exported step {result.step} to {result.path}")
        succeed(r, "ExportSucceeded", f"exported checkpoint step {result.step} to {result.path} ({formats})")
    elif ej.failed:
        pod = last(p for p in r.obs.export_pods if p.phase == "Failed")
        result = messages.export_result(pod.message) if pod else "no pod"
        if not isinstance(result, str) and not result.ok:
            record_export(r, name, result)
        fail(r, "ExportFailed", export_failure(r, name, ej.message))


def _label(fmt: str, quantization: str | None) -> str:
    return f"{fmt} ({quantization})" if quantization not in (None, "none") else fmt


def record_export(r: Reconciliation, name: str, result: Any) -> None:
    """status.export from the exporter's result (also a failed one that published what passed), and the
    ExportComplete condition with an Event per format that was not exported."""
    if result.ok or result.artifacts or result.failed:
        r.status.export = ExportStatus(
            lineage=r.status.export.lineage if r.status.export else None,
            job_name=name,
            step=result.step,
            path=result.path,
            artifacts=[
                Artifact(
                    format=a.format,
                    path=a.path,
                    bytes=a.bytes,
                    sha256=a.sha256,
                    max_error=a.max_error,
                    quantization=a.quantization,
                )
                for a in result.artifacts
            ],
            failed=[
                FailedArtifact(format=f.format, quantization=f.quantization, reason=f.reason, message=f.message)
                for f in result.failed
            ],
        )
    if result.failed:
        not_exported = ", ".join(f.label for f in result.failed)
        r.set_condition(
            C.EXPORT_COMPLETE,
            "False",
            "FormatsFailed",
            f"not exported: {not_exported} (status.export.failed has the reasons)",
        )
        for f in result.failed:
            r.event("Warning", "ExportFormatFailed", f"{f.label} not exported: {f.message}")
    elif result.ok:
        r.set_condition(
            C.EXPORT_COMPLETE, "True", "AllFormatsExported", "every requested format was exported and verified"
        )


def export_failure(r: Reconciliation, name: str, job_message: str) -> str:
    pod = last(p for p in r.obs.export_pods if p.phase == "Failed")
    if pod is not None and (why := messages.export_failure(pod.exit_code, pod.message)) is not None:
        return why
    return f"export Job {name} failed: {job_message or 'no message'}"
