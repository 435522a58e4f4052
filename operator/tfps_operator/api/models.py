"""Pydantic models of the PSTrainingJob custom resource: the one source of truth for its fields.

Field names on the wire are camelCase (``batchSize``); Python attributes are snake_case. The CRD in
``crds/`` is generated from these models (``tfps crd``), including descriptions taken from the
docstrings and field descriptions below.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "tfps.dev"
VERSION = "v1alpha1"
KIND = "PSTrainingJob"
PLURAL = "pstrainingjobs"
SINGULAR = "pstrainingjob"
SHORT_NAMES = ("psjob", "psjobs")
CATEGORIES = ("tfps",)
API_VERSION = f"{GROUP}/{VERSION}"

Role = Literal["chief", "ps", "worker", "evaluator"]
ROLES: tuple[Role, ...] = ("chief", "ps", "worker", "evaluator")

QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
"""Kubernetes resource.Quantity syntax (the same regex the API server documents)."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON form as stored in Kubernetes (camelCase, no unset optional fields)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


Quantity = str | int | float


class ResourceRequirements(_Model):
    """Compute resources of a container, as in a Pod's ``resources``."""

    limits: dict[str, Quantity] | None = Field(default=None, description="Maximum resources, e.g. {cpu: '2', memory: 4Gi}.")
    requests: dict[str, Quantity] | None = Field(default=None, description="Guaranteed resources, e.g. {cpu: 500m, memory: 1Gi}.")


class ObjectMetaOverride(_Model):
    """Labels and annotations added to every pod of a replica type."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodSpecOverride(_Model):
    """Pod settings merged into the pods the operator builds. The operator keeps its own hardening
    defaults unless a field here overrides them; it always sets the container command, TF_CONFIG and
    the job's storage mount itself."""

    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = Field(default=None, description="Pod tolerations (core/v1 Toleration).")
    affinity: dict[str, Any] | None = Field(default=None, description="Pod affinity (core/v1 Affinity).")
    priority_class_name: str | None = None
    env: list[dict[str, Any]] | None = Field(default=None, description="Extra container env (core/v1 EnvVar); TF_CONFIG and TFPS_* are reserved.")
    volumes: list[dict[str, Any]] | None = Field(default=None, description="Extra pod volumes (core/v1 Volume).")
    volume_mounts: list[dict[str, Any]] | None = Field(default=None, description="Extra trainer container mounts (core/v1 VolumeMount).")
    resources: ResourceRequirements | None = None
    security_context: dict[str, Any] | None = Field(default=None, description="Trainer container securityContext (core/v1 SecurityContext).")
    pod_security_context: dict[str, Any] | None = Field(default=None, description="Pod securityContext (core/v1 PodSecurityContext).")
    image_pull_secrets: list[dict[str, str]] | None = None


class PodTemplateOverride(_Model):
    """Optional per-replica-type overrides of the generated pods."""

    metadata: ObjectMetaOverride | None = None
    spec: PodSpecOverride | None = None


class ReplicaSpec(_Model):
    """One replica type (chief, ps, worker or evaluator)."""

    replicas: int = Field(default=1, ge=0, le=1000, description="Number of pods of this type.")
    resources: ResourceRequirements | None = Field(default=None, description="Trainer container resources.")
    restart_policy: Literal["OnFailure", "Never", "ExitCode"] = Field(
        default="OnFailure",
        description=(
            "What a failed pod of this type does. OnFailure: a worker is recreated alone, a chief or PS "
            "failure restarts the whole job (counted against runPolicy.backoffLimit). Never: any failure "
            "fails the job. ExitCode: exit codes 1-127 are permanent failures, 128+ (signals) are retried."
        ),
    )
    template: PodTemplateOverride | None = None


class Replicas(_Model):
    """The replica types of the job. The training cluster is chief + ps + worker; the evaluator runs
    beside it, outside the training cluster."""

    chief: ReplicaSpec = Field(default_factory=lambda: ReplicaSpec(replicas=1), description="Exactly one chief runs the training loop.")
    ps: ReplicaSpec = Field(default_factory=lambda: ReplicaSpec(replicas=1), description="Parameter servers (at least 1).")
    worker: ReplicaSpec = Field(default_factory=lambda: ReplicaSpec(replicas=1), description="Workers (at least 1).")
    evaluator: ReplicaSpec = Field(default_factory=lambda: ReplicaSpec(replicas=0), description="Optional side-car evaluator (0 or 1).")


class ModelSpec(_Model):
    """The user's model: a Python module implementing the trainer's model contract."""

    module: str = Field(min_length=1, max_length=253, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
                        description="Dotted Python module name, e.g. tfps_trainer.examples.linear.")
    args: dict[str, Any] = Field(default_factory=dict, description="Free-form arguments passed to every contract function.")


class CheckpointPolicy(_Model):
    """When checkpoints are written (at least one of everySteps, everySeconds) and how many are kept."""

    every_steps: int | None = Field(default=None, ge=1, description="Write a checkpoint every N global steps.")
    every_seconds: int | None = Field(default=None, ge=1, description="Write a checkpoint every N seconds.")
    keep: int = Field(default=3, ge=1, le=1000, description="Number of most recent checkpoints kept.")


class VariablePartitioner(_Model):
    """Shard large variables across PS (tf.distribute.experimental.partitioners.MinSizePartitioner)."""

    min_shard_bytes: int = Field(default=262144, ge=1, description="Minimum bytes per shard.")
    max_shards: int = Field(default=1, ge=1, le=1000, description="Maximum shards per variable (usually the PS count).")


class TrainingSpec(_Model):
    """The training loop."""

    steps: int = Field(ge=1, description="Target global step count.")
    batch_size: int = Field(default=32, ge=1, description="Per-worker batch size.")
    checkpoint: CheckpointPolicy = Field(default_factory=lambda: CheckpointPolicy(every_steps=100))
    check_numerics: bool = Field(default=False, description="Stop with a clear reason on NaN/Inf instead of checkpointing garbage.")
    variable_partitioner: VariablePartitioner | None = None
    port: int = Field(default=2222, ge=1024, le=65535, description="gRPC port of the TensorFlow servers.")
    seed: int | None = Field(default=None, description="Random seed for reproducible runs.")


class VolumeClaimTemplate(_Model):
    """A PVC the operator creates for the job (owned by it)."""

    storage_class_name: str | None = None
    access_modes: list[Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod", "ReadOnlyMany"]] = Field(
        default_factory=lambda: ["ReadWriteMany"], min_length=1
    )
    size: str = Field(default="10Gi", pattern=QUANTITY_PATTERN, description="Requested size, a resource quantity.")


class StorageSpec(_Model):
    """The volume holding checkpoints, TensorBoard logs and exports, mounted in every pod at mountPath.
    Files live under <mountPath>/<namespace>/<job>/{checkpoints,exports,tensorboard}."""

    claim_name: str | None = Field(default=None, min_length=1, max_length=253, description="An existing PersistentVolumeClaim.")
    volume_claim_template: VolumeClaimTemplate | None = None
    mount_path: str = Field(default="/tfps", pattern=r"^/[^:]*$", description="Where the volume is mounted.")


class Tolerance(_Model):
    """Allowed difference between an artifact and the TensorFlow model on the same inputs."""

    max_abs: float | None = Field(default=None, ge=0, description="Maximum absolute error.")
    max_rel: float | None = Field(default=None, ge=0, description="Maximum relative error.")
    min_argmax_agreement: float | None = Field(default=None, ge=0, le=1, description="For classifiers: share of samples whose argmax agrees.")


class TFLiteExport(_Model):
    quantization: Literal["none", "dynamic", "float16", "int8"] = "none"
    calibration_samples: int = Field(default=0, ge=0, le=100000, description="Samples from the model's dataset used to calibrate int8.")


class ONNXExport(_Model):
    opset: int = Field(default=17, ge=9, le=23)


class VerifySpec(_Model):
    samples: int = Field(default=64, ge=1, le=100000, description="Real inputs each artifact is checked on.")
    tolerances: dict[Literal["savedmodel", "tflite", "onnx"], Tolerance] | None = None


class ExportSpec(_Model):
    """Turn the final checkpoint into verified deployable artifacts."""

    enabled: bool = True
    formats: list[Literal["savedmodel", "tflite", "onnx"]] = Field(
        default_factory=lambda: ["savedmodel", "tflite", "onnx"], min_length=1, max_length=3
    )
    tflite: TFLiteExport = Field(default_factory=TFLiteExport)
    onnx: ONNXExport = Field(default_factory=ONNXExport)
    verify: VerifySpec = Field(default_factory=VerifySpec)
    resources: ResourceRequirements | None = None
    backoff_limit: int = Field(default=1, ge=0, le=10)


class RunPolicy(_Model):
    """How the job as a whole is run (Kubeflow TFJob's runPolicy)."""

    backoff_limit: int = Field(default=3, ge=0, le=100, description="Whole-job restarts allowed before Failed/BackoffLimitExceeded.")
    active_deadline_seconds: int | None = Field(default=None, ge=1, description="Fail the job after this many seconds of running.")
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, description="Delete the job this long after it finished.")
    clean_pod_policy: Literal["All", "Running", "None"] = Field(default="Running", description="Which pods to delete when training ends.")
    suspend: bool = Field(default=False, description="true deletes the pods and keeps the job; false resumes it.")
    scheduler_name: str | None = None
    stall_seconds: int | None = Field(default=None, ge=1, description="Mark the job Stalled when no new checkpoint appears for this long.")


class PSTrainingJobSpec(_Model):
    """A TensorFlow parameter-server training job."""

    image: str | None = Field(default=None, description="Trainer image; the operator's default when empty.")
    model: ModelSpec
    replicas: Replicas = Field(default_factory=Replicas)
    training: TrainingSpec
    storage: StorageSpec = Field(default_factory=StorageSpec)
    export: ExportSpec = Field(default_factory=ExportSpec)
    run_policy: RunPolicy = Field(default_factory=RunPolicy)


Phase = Literal["Pending", "Running", "Restarting", "Exporting", "Succeeded", "Failed", "Suspended"]


class Condition(_Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    observed_generation: int | None = None


class ReplicaStatus(_Model):
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0


class CheckpointStatus(_Model):
    step: int | None = None
    path: str | None = None
    time: datetime | None = None


class TrainingProgress(_Model):
    step: int | None = None
    loss: float | None = None
    steps_per_second: float | None = None
    updated: datetime | None = None


class Artifact(_Model):
    format: Literal["savedmodel", "tflite", "onnx"]
    path: str
    bytes: int | None = None
    sha256: str | None = None
    max_error: float | None = None
    quantization: str | None = None


class ExportStatus(_Model):
    job_name: str | None = None
    step: int | None = None
    path: str | None = None
    artifacts: list[Artifact] = Field(default_factory=list)


class PSTrainingJobStatus(_Model):
    phase: Phase | None = None
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    replica_statuses: dict[Role, ReplicaStatus] = Field(default_factory=dict)
    restarts: int = 0
    start_time: datetime | None = None
    completion_time: datetime | None = None
    checkpoint: CheckpointStatus | None = None
    progress: TrainingProgress | None = None
    export: ExportStatus | None = None


class ObjectMeta(_Model):
    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PSTrainingJob(_Model):
    api_version: Literal["tfps.dev/v1alpha1"] = API_VERSION
    kind: Literal["PSTrainingJob"] = KIND
    metadata: ObjectMeta
    spec: PSTrainingJobSpec
    status: PSTrainingJobStatus | None = None
