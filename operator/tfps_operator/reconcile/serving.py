"""The serving handoff (``spec.serving``): when, and only when, the job's export is complete and the runtime's
format passed verification, the KServe InferenceService is created or rolled forward to serve it; what
happened is ``status.serving`` and condition Serving, with one Event each time its reason changes.

Ownership (docs/serving.md): the InferenceService is not the job's child. It outlives the job (no
ownerReference; TTL deletion leaves it serving), and a later job naming the same InferenceService rolls it
forward to its own export. Between two jobs the newer complete export wins (the time each job succeeded,
then the name): an older one never rolls it back. An InferenceService the operator did not write (no
``tfps.dev/job`` annotation) is never changed. The model's files are on storage the job does not own (the
API refuses serving from a ``volumeClaimTemplate`` claim, which goes with the job).
"""

from __future__ import annotations

from datetime import datetime

from tfps_wire.serving_layout import FORMAT

from ..api.models import ServingStatus
from ..manifests import inference_service as isvc_m
from . import conditions as C
from .context import Reconciliation
from .observed import InferenceServiceObs
from .plan import ApplyInferenceService


def handoff(r: Reconciliation) -> None:
    """Decide the job's serving: a finished job's export handed to KServe, or why it is not."""
    serving = r.job.spec.serving
    if serving is None or r.status.phase not in ("Succeeded", "Failed"):
        return
    name = isvc_m.serving_name(r.job)
    fmt = FORMAT[serving.runtime]
    ex = r.status.export
    if r.status.phase == "Failed":
        if r.status.reason in ("ExportFailed", "ExportPreflightFailed"):
            _not_served(r, "ExportNotVerified", f"not served: the export failed ({_failed_message(r)})")
        else:
            _not_served(r, "NotExported", f"not served: the job failed before its export ({r.status.reason})")
        return
    failed = next((f for f in (ex.failed if ex else []) if f.format == fmt), None)
    if failed is not None:
        _not_served(r, "ExportNotVerified", f"not served: {fmt} failed verification: {failed.message}")
        return
    if ex is None or ex.path is None or ex.step is None or not any(a.format == fmt for a in ex.artifacts):
        _not_served(r, "NotExported", f"not served: the job has no verified {fmt} export")
        return
    obs = r.obs.serving
    if obs is None or r.status.completion_time is None:
        return  # not looked up in this pass: the next one is
    if obs.unreadable:
        _not_served(r, "InferenceServiceUnreadable", f"InferenceService {name} cannot be read: {obs.unreadable}")
        return
    if not obs.installed:
        _not_served(
            r,
            "KServeNotInstalled",
            f"not served: KServe is not installed (the API server serves no {isvc_m.API_VERSION} InferenceService); "
            f"the export is at {ex.path}",
        )
        return
    want = isvc_m.inference_service(r.job, ex.path, ex.step, r.status.completion_time)
    uri = want["spec"]["predictor"]["model"]["storageUri"]
    r.status.serving = ServingStatus(inference_service=name, runtime=serving.runtime, storage_uri=uri, step=ex.step)
    have = obs.isvc
    if have is None:
        r.plan.actions.append(ApplyInferenceService(want))
        _set(r, "False", "Applying", f"creating InferenceService {name} for step {ex.step} ({uri})")
        return
    if have.deleting:
        _set(r, "False", "Applying", f"InferenceService {name} is being deleted; it is created again once gone")
        r.plan.requeue(5.0)
        return
    other = have.annotations.get(isvc_m.JOB)
    if other is None:
        _not_served(r, "NameTaken", f"InferenceService {name} exists and was not made by tfps: left unchanged")
        return
    if other != r.job.metadata.name and _newer(have, other, r.status.completion_time, r.job.metadata.name):
        _set(
            r,
            "False",
            "Superseded",
            f"InferenceService {name} serves job {other}'s newer export (step {have.annotations.get(isvc_m.STEP)}, "
            f"{have.storage_uri})",
        )
        return
    if have.annotations.get(isvc_m.SPEC_HASH) != want["metadata"]["annotations"][isvc_m.SPEC_HASH]:
        r.plan.actions.append(ApplyInferenceService(want, have.resource_version))
        was = f" from {have.storage_uri}" if have.storage_uri and have.storage_uri != uri else ""
        _set(r, "False", "Applying", f"rolling InferenceService {name} forward to step {ex.step} ({uri}){was}")
        return
    ready = f"; KServe reports Ready={have.ready}" if have.ready else ""
    url = f" at {have.url}" if have.url else ""
    _set(r, "True", "InferenceServiceApplied", f"InferenceService {name}{url} serves step {ex.step} ({uri}){ready}")


def _newer(have: InferenceServiceObs, other: str, mine: datetime, me: str) -> bool:
    """Whether the export the InferenceService serves (job ``other``'s) is newer than this job's."""
    raw = have.annotations.get(isvc_m.EXPORTED_AT, "")
    try:
        theirs = datetime.fromisoformat(raw)
    except ValueError:
        return False  # unreadable: ours replaces it
    return (theirs, other) > (mine, me)


def _failed_message(r: Reconciliation) -> str:
    cond = C.get(r.status, C.FAILED)
    return (cond.message if cond is not None else "") or (r.status.reason or "")


def _not_served(r: Reconciliation, reason: str, message: str) -> None:
    _set(r, "False", reason, message, warning=True)


def _set(r: Reconciliation, value: C.Status, reason: str, message: str, warning: bool = False) -> None:
    """Condition Serving, and one Event when its reason changes (not for each new wording)."""
    old = C.get(r.status, C.SERVING)
    r.set_condition(C.SERVING, value, reason, message)
    if old is None or old.reason != reason:
        if value == "True":
            r.event("Normal", "Served", message)
        elif warning:
            r.event("Warning", "NotServed", message)
