"""What an export is of: the lineage fixed when training succeeds (``status.export.lineage``: the spec's
hash and the trainer image's digest, read from the pod status of the lead whose success ended training),
and the :class:`tfps_wire.lineage.Lineage` the export Job is handed (``TFPS_LINEAGE``), built from the job
and its status alone, so any pass builds the same one, also after the lead's pod is gone.

Which digest: the lead's (the chief, or worker 0 without one), the process that ran the training loop
and wrote the final checkpoint; another role's template may name another image. A pod status without an
``imageID`` (a kubelet that has not reported one) records none: the manifest says the digest is unknown
rather than guessing it from the image's name."""

from __future__ import annotations

from tfps_wire.lineage import ImageRef, Lineage, TrainingOutcome, of_spec, spec_sha256

from ..api.models import ExportLineage, PSTrainingJob, PSTrainingJobStatus
from .observed import PodObs


def fixed(job: PSTrainingJob, lead: PodObs | None) -> ExportLineage:
    """The lineage recorded in ``status.export`` when training succeeds, ``lead`` the pod whose success
    ended it (None when it is not among the observed pods)."""
    return ExportLineage(
        spec_sha256=spec_sha256(job.spec.to_wire()),
        image=(lead.image or None) if lead else None,
        image_id=(lead.image_id or None) if lead else None,
        pod=lead.name if lead else None,
    )


def for_export(job: PSTrainingJob, status: PSTrainingJobStatus) -> Lineage:
    """What the export Job tells the exporter: the spec, the image recorded when training succeeded, and
    the end of training (``status.checkpoint``: the final checkpoint; ``status.progress``: the chief's last
    report)."""
    recorded = status.export.lineage if status.export else None
    image = None
    if recorded is not None and recorded.image_id:
        image = ImageRef(image=recorded.image or "", image_id=recorded.image_id, pod=recorded.pod or "")
    ck, progress = status.checkpoint, status.progress
    training = TrainingOutcome(
        step=ck.step if ck else None,
        target_steps=job.spec.training.steps,
        final_checkpoint=ck.path if ck else None,
        loss=progress.loss if progress else None,
        steps_per_second=progress.steps_per_second if progress else None,
        reported_step=progress.step if progress else None,
        reported_at=progress.updated.isoformat() if progress and progress.updated else None,
    )
    source = job.spec.model.source
    return of_spec(
        job.spec.to_wire(),
        "operator",
        image=image,
        training=training,
        code_source=source.config_map if source else None,
    )
