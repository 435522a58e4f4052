"""From a validated PSTrainingJob to the settings every trainer process receives (TFPS_JOB)."""

from __future__ import annotations

from tfps_wire.job_settings import (
    DEFAULT_MIN_SHARD_BYTES,
    CheckpointSettings,
    DataServiceSettings,
    ExportSettings,
    JobSettings,
    PartitionerSettings,
    Paths,
    ProgramDirs,
    ScriptSettings,
    Tolerance,
)
from tfps_wire.uri import join

from ..api.models import DATA_SERVICE_ROLES, ROLES, PSTrainingJob, VariablePartitioner, replica_counts
from ..api.models import Tolerance as ApiTolerance
from . import names


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
    dirs = job.spec.model.directories
    return ScriptSettings(
        programs={r: tuple(job.spec.program(r) or ()) for r in ROLES if counts[r] and r not in DATA_SERVICE_ROLES},
        keras=job.spec.model.keras or "legacy",
        directories=ProgramDirs(
            checkpoints=dirs.checkpoints, saved_model=dirs.saved_model, tensorboard=dirs.tensorboard
        )
        if dirs is not None
        else ProgramDirs(),
    )


def _partitioner(part: VariablePartitioner | None) -> PartitionerSettings | None:
    """The partitioner the spec's fields pick, with its arguments; min-size defaults filled in, so the
    settings say what the chief builds."""
    if part is None:
        return None
    if part.kind == "fixed_shards":
        return PartitionerSettings(kind="fixed_shards", num_shards=part.fixed_shards)
    if part.kind == "max_size":
        return PartitionerSettings(kind="max_size", max_shard_bytes=part.max_shard_bytes, max_shards=part.max_shards)
    return PartitionerSettings(
        kind="min_size",
        min_shard_bytes=part.min_shard_bytes or DEFAULT_MIN_SHARD_BYTES,
        max_shards=part.max_shards or 1,
    )


DATA_SERVICE_DIR = "data-service"
"""The dispatcher's journal, under the job's root (next to its checkpoints, on the same volume or bucket)."""
DATA_SERVICE_NAME = "tfps-train"
"""The dataset id the chief registers and the iteration every training worker reads: one for the job's life."""


def data_service(job: PSTrainingJob, root: str, dispatcher: str | None = None) -> DataServiceSettings | None:
    """The job's tf.data service, or None without one. ``dispatcher`` (``host:port``) defaults to the
    dispatcher pod's DNS name and the job's port (``tfps run`` passes its loopback address)."""
    counts = replica_counts(job)
    if counts["dispatcher"] == 0:
        return None
    spec = job.spec.training.data_service
    mode = spec.processing_mode if spec is not None else "Dynamic"
    name, ns, port = job.metadata.name, job.metadata.namespace, job.spec.training.port
    return DataServiceSettings(
        dispatcher=dispatcher or f"{names.pod_fqdn(name, ns, 'dispatcher', 0)}:{port}",
        data_workers=tuple(f"{names.pod_fqdn(name, ns, 'dataworker', i)}:{port}" for i in range(counts["dataworker"])),
        processing_mode="dynamic" if mode == "Dynamic" else "off",
        work_dir=join(root, DATA_SERVICE_DIR),
        dataset_id=DATA_SERVICE_NAME,
        iteration=DATA_SERVICE_NAME,
    )


def job_settings(
    job: PSTrainingJob, mount_path: str | None = None, code_dir: str | None = None, dispatcher: str | None = None
) -> JobSettings:
    """The trainer's view of the job. ``mount_path`` overrides the spec's (``tfps run`` uses its workdir;
    a ``spec.storage.uri`` wins over both);
    ``code_dir`` is where the job's code is (``tfps run --code DIR``; on a cluster :data:`CODE_DIR` when
    ``spec.model.source`` is set); ``dispatcher``: the tf.data service's address (:func:`data_service`)."""
    spec = job.spec
    root = job_root(mount_path or spec.storage.mount_path, job)
    t = spec.training
    e = spec.export
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
        partitioner=_partitioner(t.variable_partitioner),
        paths=Paths(root=root),
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
        data_service=data_service(job, root, dispatcher),
    )
