"""From a validated PSTrainingJob to the settings every trainer process receives (TFPS_JOB)."""

from __future__ import annotations

from tfps_wire.job_settings import (
    CheckpointSettings,
    ExportSettings,
    JobSettings,
    PartitionerSettings,
    Paths,
    ScriptSettings,
    Tolerance,
)
from tfps_wire.uri import join

from ..api.models import ROLES, PSTrainingJob, replica_counts
from ..api.models import Tolerance as ApiTolerance


def job_root(mount_path: str, job: PSTrainingJob) -> str:
    """``<mount>/<namespace>/<job>``: where checkpoints, TensorBoard logs and exports live; with
    ``spec.storage.uri``, ``<uri>/<namespace>/<job>`` whatever ``mount_path`` is."""
    return join(job.spec.storage.uri or mount_path, job.metadata.namespace, job.metadata.name)


def _tolerance(tol: ApiTolerance | None) -> Tolerance:
    return Tolerance(**tol.model_dump(exclude_none=True)) if tol else Tolerance()


CODE_DIR = "/tfps-code"
"""Where ``spec.model.source`` (a ConfigMap) is mounted in every pod."""


def _script(job: PSTrainingJob) -> ScriptSettings | None:
    if not job.spec.model.script_mode:
        return None
    counts = replica_counts(job)
    return ScriptSettings(
        programs={r: tuple(job.spec.program(r) or ()) for r in ROLES if counts[r]},
        keras=job.spec.model.keras or "legacy",
    )


def job_settings(job: PSTrainingJob, mount_path: str | None = None, code_dir: str | None = None) -> JobSettings:
    """The trainer's view of the job. ``mount_path`` overrides the spec's (``tfps run`` uses its workdir;
    a ``spec.storage.uri`` wins over both);
    ``code_dir`` is where the job's code is (``tfps run --code DIR``; on a cluster :data:`CODE_DIR` when
    ``spec.model.source`` is set)."""
    spec = job.spec
    t = spec.training
    e = spec.export
    part = t.variable_partitioner
    return JobSettings(
        job_name=job.metadata.name,
        namespace=job.metadata.namespace,
        model_module=spec.model.module,
        model_args=spec.model.args,
        script=_script(job),
        strategy=spec.strategy,
        code_dir=code_dir or (CODE_DIR if spec.model.source else None),
        steps=t.steps,
        batch_size=t.batch_size,
        steps_per_closure=t.steps_per_closure,
        checkpoint=CheckpointSettings(
            every_steps=t.checkpoint.every_steps,
            every_seconds=t.checkpoint.every_seconds,
            keep=t.checkpoint.keep,
        ),
        check_numerics=t.check_numerics,
        partitioner=PartitionerSettings(min_shard_bytes=part.min_shard_bytes, max_shards=part.max_shards)
        if part
        else None,
        paths=Paths(root=job_root(mount_path or spec.storage.mount_path, job)),
        export=ExportSettings(
            enabled=e.enabled,
            formats=tuple(e.formats),
            required=tuple(e.required_formats()),
            tflite_quantization=e.tflite.quantization,
            tflite_calibration_samples=e.tflite.calibration_samples,
            tflite_quantized_tolerance=_tolerance(e.tflite.quantized_tolerance),
            onnx_opset=e.onnx.opset,
            verify_samples=e.verify.samples,
            tolerances={fmt: _tolerance(tol) for fmt, tol in (e.verify.tolerances or {}).items()},
            output_kinds=dict(e.verify.output_kinds or {}),
        ),
        seed=t.seed,
    )
