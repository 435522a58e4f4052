"""Job settings handed from the operator (or `tfps run`) to every trainer process.

This module is TF-free and Kubernetes-free on purpose: the operator imports it to build the
settings, trainer pods import it to read them. It is the only schema both sides share.

Transport: the JSON form of :class:`JobSettings` in the environment variable ``TFPS_JOB``
(see :data:`SETTINGS_ENV`). TF_CONFIG stays in ``TF_CONFIG`` as TensorFlow expects.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .uri import join

M = TypeVar("M", bound=BaseModel)

SETTINGS_ENV = "TFPS_JOB"
"""Environment variable carrying the JSON-encoded JobSettings."""

TERMINATION_LOG_ENV = "TFPS_TERMINATION_LOG"
"""Where a trainer writes its one-line failure reason (Kubernetes reads /dev/termination-log)."""
DEFAULT_TERMINATION_LOG = "/dev/termination-log"

DEFAULT_PROGRESS_PORT = 8470
"""Port of the chief's (and evaluator's) progress endpoint: GET /status (JSON), GET /metrics."""

DEFAULT_STEPS_PER_CLOSURE = 20
"""Training steps per scheduled closure (trainer_image/README.md, "Steps per closure", says why 20)."""
MAX_STEPS_PER_CLOSURE = 1000

DEFAULT_MIN_SHARD_BYTES = 256 << 10
"""A min-size partitioner's smallest shard when the job names none (TensorFlow's MinSizePartitioner default)."""

ExportFormat = Literal["savedmodel", "tflite", "onnx", "keras", "weights"]
Quantization = Literal["none", "dynamic", "float16", "int8"]
OutputKind = Literal["classification", "regression"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CheckpointSettings(_Frozen):
    every_steps: int | None = Field(default=None, ge=1)
    every_seconds: float | None = Field(default=None, gt=0)
    keep: int = Field(default=3, ge=1)


PartitionerKind = Literal["fixed_shards", "min_size", "max_size"]

PARTITIONER_ARGUMENTS: dict[PartitionerKind, tuple[str, ...]] = {
    "fixed_shards": ("num_shards",),
    "min_size": ("min_shard_bytes", "max_shards"),
    "max_size": ("max_shard_bytes", "max_shards"),
}
"""The fields each kind reads, named as the TensorFlow partitioner's constructor names its arguments."""


class PartitionerSettings(_Frozen):
    """The partitioner the chief gives ParameterServerStrategy (``JobSettings.partitioner`` None: none),
    one of ``tf.distribute.experimental.partitioners``; only the fields of ``kind`` may be set:

    ================  ==========================================================================
    ``fixed_shards``  ``FixedShardsPartitioner(num_shards)``
    ``min_size``      ``MinSizePartitioner(min_shard_bytes, max_shards)``: the kind when none is named
                      (settings written before there were kinds); unset fields take 256 KiB and 1
    ``max_size``      ``MaxSizePartitioner(max_shard_bytes, max_shards)``: ``max_shards`` None: no limit
    ================  ==========================================================================
    """

    kind: PartitionerKind = "min_size"
    num_shards: int | None = Field(default=None, ge=1)
    min_shard_bytes: int | None = Field(default=None, ge=1)
    max_shard_bytes: int | None = Field(default=None, ge=1)
    max_shards: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _fields_of_the_kind(self) -> PartitionerSettings:
        allowed = PARTITIONER_ARGUMENTS[self.kind]
        stray = [f for f in ("num_shards", "min_shard_bytes", "max_shard_bytes", "max_shards") if f not in allowed]
        if extra := [f for f in stray if getattr(self, f) is not None]:
            raise ValueError(f"{', '.join(extra)} do not apply to a {self.kind} partitioner")
        if self.kind != "min_size" and getattr(self, allowed[0]) is None:
            raise ValueError(f"a {self.kind} partitioner needs {allowed[0]}")
        return self

    def arguments(self) -> dict[str, int | None]:
        """The TensorFlow partitioner's constructor arguments, each of ``kind``'s fields with its default
        filled in (``min_size``: 256 KiB, 1 shard; ``max_size``: ``max_shards`` None, no limit)."""
        args: dict[str, int | None] = {f: getattr(self, f) for f in PARTITIONER_ARGUMENTS[self.kind]}
        if self.kind == "min_size":
            args["min_shard_bytes"] = args["min_shard_bytes"] or DEFAULT_MIN_SHARD_BYTES
            args["max_shards"] = args["max_shards"] or 1
        return args


class Tolerance(_Frozen):
    """Allowed difference between an artifact's outputs and the TensorFlow model's on the same inputs.

    A field left None takes the exporter's default for the artifact (``tfps_trainer.export.verify``).
    """

    max_abs: float | None = Field(default=None, ge=0)
    max_rel: float | None = Field(default=None, ge=0)
    min_argmax_agreement: float | None = Field(default=None, ge=0, le=1)


class ExportSettings(_Frozen):
    enabled: bool = True
    formats: tuple[ExportFormat, ...] = ("savedmodel", "tflite", "onnx")
    required: tuple[ExportFormat, ...] = ("savedmodel",)
    """Formats whose failure fails the export; the others are recorded as missing. Only those in
    ``formats`` count."""
    tflite_quantization: Quantization = "none"
    tflite_calibration_samples: int = Field(default=0, ge=0)
    tflite_quantized_tolerance: Tolerance = Tolerance()
    onnx_opset: int = Field(default=17, ge=9)
    verify_samples: int = Field(default=64, ge=1)
    tolerances: dict[ExportFormat, Tolerance] = Field(default_factory=dict)
    output_kinds: dict[str, OutputKind] = Field(default_factory=dict)
    """Declared kind of a model output (by serving name); undeclared outputs are inferred."""


class Paths(_Frozen):
    """Where a job's files live: ``<root>`` is ``<mount>/<namespace>/<job>`` on a volume or
    ``gs://<bucket>/<prefix>/<namespace>/<job>`` in object storage (the same layout under it)."""

    root: str

    @property
    def checkpoints(self) -> str:
        return join(self.root, "checkpoints")

    @property
    def exports(self) -> str:
        return join(self.root, "exports")

    @property
    def tensorboard(self) -> str:
        return join(self.root, "tensorboard")

    @property
    def model(self) -> str:
        """Script mode: where the program saves its model for the export (``TFPS_MODEL_DIR``)."""
        return join(self.root, "model")


LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
"""TensorFlow's switch: "1" makes ``tf.keras`` tf_keras (Keras 2), anything else Keras 3."""


class ProgramDirs(_Frozen):
    """Script mode: the program's own directories (``spec.model.directories``), as its pods and the export
    Job see them; None where the job's own (:class:`Paths`) are used."""

    checkpoints: str | None = None
    saved_model: str | None = None
    tensorboard: str | None = None


class ScriptSettings(_Frozen):
    """Script mode: the program each role runs (wrapped by :mod:`tfps_trainer.script`)."""

    programs: dict[str, tuple[str, ...]] = Field(min_length=1)
    """Role (chief, ps, worker, evaluator) -> argv, before ``$(VAR)`` expansion."""
    keras: Literal["legacy", "keras3"] = "legacy"
    """Which Keras ``tf.keras`` is in the program and the exporter: legacy (Keras 2 through tf_keras) or keras3."""
    directories: ProgramDirs = ProgramDirs()

    def keras_env(self) -> dict[str, str]:
        """The variable that makes TensorFlow's ``tf.keras`` the chosen Keras (read when TF is first imported)."""
        return {LEGACY_KERAS_ENV: "1" if self.keras == "legacy" else "0"}


DATA_SERVICE_ENV = "TFPS_DATA_SERVICE"
"""Script mode: the dispatcher's target, ``grpc://<host>:<port>``, for
``tf.data.experimental.service.distribute`` or ``register_dataset``/``from_dataset_id`` (set only in a job with
a tf.data service)."""
DATA_SERVICE_MODE_ENV = "TFPS_DATA_SERVICE_MODE"
"""Script mode: ``dynamic`` or ``off``, the name :func:`DataServiceSettings.sharding_policy` maps to TensorFlow's."""

ProcessingMode = Literal["dynamic", "off"]
HostPort = Annotated[str, Field(pattern=r"^[^:/\s]+:[0-9]{1,5}$")]


class DataServiceSettings(_Frozen):
    """The job's tf.data service (docs/data-service.md): where its dispatcher listens, how the dataset is
    shared among the data workers, and the names every training process reads it under."""

    dispatcher: HostPort
    """``host:port`` of the dispatcher (its pod's DNS name on a cluster, loopback under ``tfps run``)."""
    data_workers: tuple[HostPort, ...] = ()
    """``host:port`` of each data worker: the chief waits until one listens (a data worker listens once it
    has reached the dispatcher) before it trains, so a service whose data workers cannot reach the dispatcher
    fails the job with their names instead of leaving every training worker waiting for elements."""
    processing_mode: ProcessingMode = "dynamic"
    """``dynamic``: ``ShardingPolicy.DYNAMIC`` (splits, at most once per epoch); ``off``: ``ShardingPolicy.OFF``."""
    work_dir: str
    """The dispatcher's journal (fault-tolerant mode): ``<job root>/data-service``."""
    dataset_id: str = Field(min_length=1)
    """The id the chief registers the dataset under: the same after every restart, so the dataset is registered
    once for the job's life."""
    iteration: str = Field(min_length=1)
    """The shared job name every training worker reads under (``from_dataset_id(job_name=...)``): one iteration
    of the dataset for the whole job, which a restarted training cluster joins where it stood."""

    @property
    def target(self) -> str:
        return f"grpc://{self.dispatcher}"

    def script_env(self) -> dict[str, str]:
        """What a script-mode program gets: :data:`DATA_SERVICE_ENV` and :data:`DATA_SERVICE_MODE_ENV`."""
        return {DATA_SERVICE_ENV: self.target, DATA_SERVICE_MODE_ENV: self.processing_mode}


class JobSettings(_Frozen):
    job_name: str
    namespace: str = "default"
    model_module: str | None = None
    """The contract module; in script mode optional (then it serves only the export)."""
    model_args: dict[str, Any] = Field(default_factory=dict)
    script: ScriptSettings | None = None
    strategy: Literal["ParameterServer", "MultiWorkerMirrored"] = "ParameterServer"
    """How the training cluster trains together (``spec.strategy``): which roles its TF_CONFIG has."""
    code_dir: str | None = None
    """Where the job's code (``spec.model.source``) is: the working directory, first on PYTHONPATH."""
    steps: int | None = Field(default=None, ge=1)
    """Target step; None only in script mode (the program decides)."""
    batch_size: int = Field(ge=1)
    steps_per_closure: int = Field(default=DEFAULT_STEPS_PER_CLOSURE, ge=1, le=MAX_STEPS_PER_CLOSURE)
    """Training steps each closure the chief schedules runs on a worker, in one ``tf.function``."""
    checkpoint: CheckpointSettings = CheckpointSettings()
    check_numerics: bool = False
    partitioner: PartitionerSettings | None = None
    paths: Paths
    export: ExportSettings = ExportSettings()
    progress_port: int = Field(default=DEFAULT_PROGRESS_PORT, ge=1, le=65535)
    seed: int | None = None
    eval_batches: int = Field(default=10, ge=1)
    """Batches the evaluator runs per checkpoint."""
    data_service: DataServiceSettings | None = None
    """The job's tf.data service; None: each training worker runs the input pipeline itself."""

    @property
    def checkpoint_dir(self) -> str:
        """Where the checkpoints are: the program's own directory in script mode when it names one."""
        return (self.script and self.script.directories.checkpoints) or self.paths.checkpoints

    @property
    def model_dir(self) -> str:
        """Script mode: where the program saves its final model."""
        return (self.script and self.script.directories.saved_model) or self.paths.model

    @property
    def tensorboard_dir(self) -> str:
        return (self.script and self.script.directories.tensorboard) or self.paths.tensorboard

    def to_env(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> JobSettings:
        """Read settings from ``TFPS_JOB``; raise :class:`SettingsError` with a one-line reason."""
        env = os.environ if environ is None else environ
        raw = env.get(SETTINGS_ENV)
        if not raw:
            raise SettingsError(f"{SETTINGS_ENV} is not set: the operator or `tfps run` must provide the job settings")
        return from_json_env(cls, SETTINGS_ENV, raw)


class SettingsError(ValueError):
    """The job settings are missing or malformed."""


def from_json_env(model: type[M], env: str, raw: str) -> M:
    """``model`` from ``raw``, the JSON value of the environment variable ``env``; raises
    :class:`SettingsError` naming the variable and, for a bad field, its path."""
    try:
        return model.model_validate(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{env} is not valid JSON: {exc.msg} at position {exc.pos}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise SettingsError(f"{env}.{where}: {first['msg']}") from None
