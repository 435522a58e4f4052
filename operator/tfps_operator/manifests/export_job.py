"""The export Job: ``python -m tfps_trainer.export`` on the job's storage after training succeeded."""

from __future__ import annotations

import copy
from typing import Any

from tfps_wire.job_settings import SETTINGS_ENV
from tfps_wire.lineage import LINEAGE_ENV, Lineage

from ..api.models import PSTrainingJob
from ..settings import BuildConfig
from ..strategies import lead_of
from . import labels, names
from .pods import merged_meta, pod_spec, settings_env

EXPORT_COMMAND = ["python", "-m", "tfps_trainer.export"]
PREFLIGHT_COMMAND = [*EXPORT_COMMAND, "--preflight"]


def export_job(job: PSTrainingJob, cfg: BuildConfig, preflight: bool = False) -> dict[str, Any]:
    """A ``batch/v1`` Job owned by the PSTrainingJob. It runs with the lead's (the chief's, else the
    workers') template overrides
    (labels, annotations, scheduling, pull secrets, extra volumes, mounted read-only: it loads the same model
    code, and the model a script-mode program saved in a directory of its own, ``spec.model.directories``),
    ``spec.export.resources`` and ``spec.export.backoffLimit``. The exporter reports its result as the
    container's termination message (tfps_wire.export_result).

    ``preflight``: the pre-flight Job instead (``--preflight``: fresh weights, nothing published, before
    training), which is not retried: its verdict is deterministic."""
    name = job.metadata.name
    lead, _ = lead_of(job)
    chief_template = job.spec.replicas.of(lead).template
    spec = pod_spec(
        job,
        cfg,
        command=PREFLIGHT_COMMAND if preflight else EXPORT_COMMAND,
        env=[{"name": SETTINGS_ENV, "value": settings_env(job, cfg)}],
        ports=[],
        resources=job.spec.export.resources,
        override=chief_template,
        where=f"spec.replicas.{lead}.template.spec",
        role=lead,
    )
    # The lead's own volumes (the program's directories among them) are read, never written: the export
    # publishes on the job's storage only.
    theirs = (
        {m["name"] for m in (chief_template.spec.volume_mounts or [])}
        if chief_template and chief_template.spec
        else set()
    )
    for mount in spec["containers"][0]["volumeMounts"]:
        if mount["name"] in theirs:
            mount["readOnly"] = True
    if chief_template and chief_template.spec and chief_template.spec.resources:
        # The chief's resources are for training; the export has its own.
        res = job.spec.export.resources
        container = spec["containers"][0]
        container.pop("resources", None)
        if res:
            container["resources"] = res.to_wire()
    ours = labels.base_labels(name, labels.PREFLIGHT_COMPONENT if preflight else labels.EXPORT_COMPONENT)
    pod_labels, annotations = merged_meta(chief_template, ours)
    job_name = names.preflight_job_name(name) if preflight else names.export_job_name(name)
    template_meta: dict[str, Any] = {"labels": pod_labels}
    if annotations:
        template_meta["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": labels.child_metadata(job, job_name, dict(ours)),
        "spec": {
            "backoffLimit": 0 if preflight else job.spec.export.backoff_limit,
            "template": {"metadata": template_meta, "spec": spec},
        },
    }


def with_lineage(manifest: dict[str, Any], lineage: Lineage) -> dict[str, Any]:
    """The export Job ``manifest`` with ``lineage`` in its container's environment (``TFPS_LINEAGE``): what
    the exporter writes into the manifest of what it publishes, since it holds no API credentials."""
    out = copy.deepcopy(manifest)
    container = out["spec"]["template"]["spec"]["containers"][0]
    env = [e for e in container.get("env", []) if e.get("name") != LINEAGE_ENV]
    container["env"] = [*env, {"name": LINEAGE_ENV, "value": lineage.to_env()}]
    return out
