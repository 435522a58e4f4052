"""The table of invalid PSTrainingJobs: one source for the pure client-side tests and the tests
against the real API server. Each case names the wire path that the error must mention."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tfps_operator.api import models as m

API_VERSION = m.API_VERSION


def base_job(name: str = "job") -> dict[str, Any]:
    """A small valid job: only what is required, plus a worker count."""
    return {
        "apiVersion": API_VERSION,
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "model": {"module": "tfps_trainer.examples.linear"},
            "replicas": {"worker": {"replicas": 2}},
            "training": {"steps": 300},
        },
    }


def server_defaulted_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """The spec the API server stores for ``doc``: the client's defaulted spec without the chief and ps the
    reader fills in from the strategy (the CRD has no default for them)."""
    from tfps_operator.api.validate import validate_job

    spec = validate_job(doc).to_wire()["spec"]
    for role in ("chief", "ps"):
        if role not in doc["spec"].get("replicas", {}):
            del spec["replicas"][role]
    return spec


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """Mutation: set a dotted path (creating dicts on the way)."""
    keys = path.split(".")

    def apply(obj: dict) -> None:
        node = obj
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value

    return apply


def _del(path: str) -> Callable[[dict], None]:
    keys = path.split(".")

    def apply(obj: dict) -> None:
        node = obj
        for k in keys[:-1]:
            node = node[k]
        del node[keys[-1]]

    return apply


@dataclass(frozen=True)
class Case:
    id: str
    mutations: tuple[Callable[[dict], None], ...]
    path: str
    """Wire path the error must name (the API server's message contains it; tfps validate reports it)."""
    why: str = ""

    def manifest(self, name: str = "job") -> dict[str, Any]:
        obj = copy.deepcopy(base_job(name))
        for mutate in self.mutations:
            mutate(obj)
        return obj


def case(id: str, path: str, *mutations: Callable[[dict], None], why: str = "") -> Case:
    return Case(id, mutations, path, why)


W = "spec.replicas.worker"
ROLE_FIELDS = [m.replica_field(r) for r in m.ROLES]
"""The fields of spec.replicas, one per replica type."""
WT = f"{W}.template.spec"

INVALID: list[Case] = [
    # required fields
    case("missing-spec", "spec", _del("spec")),
    case("missing-model", "spec.model", _del("spec.model")),
    case(
        "missing-model-module",
        "spec.model",
        _set("spec.model", {"args": {}}),
        why="a contract module or a program of one's own (script mode)",
    ),
    case("missing-training-steps", "spec.training.steps", _set("spec.training", {"batchSize": 8})),
    case("env-missing-name", f"{WT}.env[0].name", _set(f"{WT}.env", [{"value": "x"}])),
    # types
    case("steps-string", "spec.training.steps", _set("spec.training.steps", "300")),
    case("module-int", "spec.model.module", _set("spec.model.module", 123)),
    case("args-list", "spec.model.args", _set("spec.model.args", [1, 2])),
    case("image-list", "spec.image", _set("spec.image", ["a", "b"])),
    case("check-numerics-string", "spec.training.checkNumerics", _set("spec.training.checkNumerics", "yes")),
    case("suspend-string", "spec.runPolicy.suspend", _set("spec.runPolicy.suspend", "no")),
    case(
        "cpu-float",
        f"{W}.resources.requests.cpu",
        _set(f"{W}.resources", {"requests": {"cpu": 0.5}}),
        why="quantities are int-or-string on the wire",
    ),
    # patterns and lengths
    case("module-pattern", "spec.model.module", _set("spec.model.module", "1bad-module")),
    case(
        "name-too-long",
        "metadata.name",
        _set("metadata.name", "j" * 50),
        why="<job>-evaluator-<index> must fit 63 characters",
    ),
    case(
        "name-not-dns1035",
        "metadata.name",
        _set("metadata.name", "9lives"),
        why="the job name is also a Service name (DNS-1035 label)",
    ),
    case("cpu-garbage", f"{W}.resources.limits.cpu", _set(f"{W}.resources", {"limits": {"cpu": "lots"}})),
    case(
        "template-memory-negative",
        f"{WT}.resources.limits.memory",
        _set(f"{WT}.resources", {"limits": {"memory": "-1Gi"}}),
    ),
    case("env-name-pattern", f"{WT}.env[0].name", _set(f"{WT}.env", [{"name": "1 bad", "value": "x"}])),
    case(
        "mount-path-relative",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "data"}),
    ),
    case(
        "pvc-size-pattern",
        "spec.storage.volumeClaimTemplate.size",
        _set("spec.storage", {"volumeClaimTemplate": {"size": "10 GB"}}),
    ),
    # ranges
    case("steps-zero", "spec.training.steps", _set("spec.training.steps", 0)),
    case("batch-size-negative", "spec.training.batchSize", _set("spec.training.batchSize", -1)),
    case("steps-per-closure-zero", "spec.training.stepsPerClosure", _set("spec.training.stepsPerClosure", 0)),
    case("steps-per-closure-too-many", "spec.training.stepsPerClosure", _set("spec.training.stepsPerClosure", 1001)),
    case("port-privileged", "spec.training.port", _set("spec.training.port", 80)),
    case("keep-zero", "spec.training.checkpoint.keep", _set("spec.training.checkpoint", {"everySteps": 10, "keep": 0})),
    case(
        "every-steps-zero", "spec.training.checkpoint.everySteps", _set("spec.training.checkpoint", {"everySteps": 0})
    ),
    case(
        "max-shards-zero",
        "spec.training.variablePartitioner.maxShards",
        _set("spec.training.variablePartitioner", {"maxShards": 0}),
    ),
    case(
        "fixed-shards-zero",
        "spec.training.variablePartitioner.fixedShards",
        _set("spec.training.variablePartitioner", {"fixedShards": 0}),
    ),
    case(
        "max-shard-bytes-zero",
        "spec.training.variablePartitioner.maxShardBytes",
        _set("spec.training.variablePartitioner", {"maxShardBytes": 0}),
    ),
    case("workers-too-many", f"{W}.replicas", _set(f"{W}.replicas", 1001)),
    case("opset-too-old", "spec.export.onnx.opset", _set("spec.export.onnx", {"opset": 8})),
    case("verify-samples-zero", "spec.export.verify.samples", _set("spec.export.verify", {"samples": 0})),
    case(
        "tolerance-negative",
        "spec.export.verify.tolerances.tflite.maxAbs",
        _set("spec.export.verify", {"tolerances": {"tflite": {"maxAbs": -1.0}}}),
    ),
    case("backoff-negative", "spec.runPolicy.backoffLimit", _set("spec.runPolicy.backoffLimit", -1)),
    case("deadline-zero", "spec.runPolicy.activeDeadlineSeconds", _set("spec.runPolicy.activeDeadlineSeconds", 0)),
    case("formats-empty", "spec.export.formats", _set("spec.export.formats", [])),
    # enums
    case("restart-policy-always", f"{W}.restartPolicy", _set(f"{W}.restartPolicy", "Always")),
    case("clean-pod-policy", "spec.runPolicy.cleanPodPolicy", _set("spec.runPolicy.cleanPodPolicy", "Sometimes")),
    case("format-unknown", "spec.export.formats[1]", _set("spec.export.formats", ["savedmodel", "pdf"])),
    case("quantization-int4", "spec.export.tflite.quantization", _set("spec.export.tflite", {"quantization": "int4"})),
    case(
        "access-mode-unknown",
        "spec.storage.volumeClaimTemplate.accessModes[0]",
        _set("spec.storage", {"volumeClaimTemplate": {"accessModes": ["ReadWriteSometimes"]}}),
    ),
    # cross-field rules (CEL)
    case("two-chiefs", "spec.replicas.chief.replicas", _set("spec.replicas.chief", {"replicas": 2})),
    case("no-chief", "spec.replicas.chief.replicas", _set("spec.replicas.chief", {"replicas": 0})),
    case("no-ps", "spec.replicas.ps.replicas", _set("spec.replicas.ps", {"replicas": 0})),
    # the elastic range
    case("min-above-replicas", "spec.replicas.worker.minReplicas", _set("spec.replicas.worker.minReplicas", 5)),
    case("scaled-past-max", "spec.replicas.worker.replicas", _set("spec.replicas.worker.maxReplicas", 1)),
    case("min-zero", "spec.replicas.worker.minReplicas", _set("spec.replicas.worker.minReplicas", 0)),
    case(
        "pending-timeout-too-short",
        "spec.replicas.worker.pendingTimeoutSeconds",
        _set("spec.replicas.worker.pendingTimeoutSeconds", 1),
    ),
    # spec.strategy
    case("strategy-unknown", "spec.strategy", _set("spec.strategy", "Horovod")),
    case(
        "mwms-contract-module",
        "spec.strategy",
        _set("spec.strategy", "MultiWorkerMirrored"),
        why="all-reduce runs the user's own program",
    ),
    case(
        "mwms-with-ps",
        "spec.replicas.ps.replicas",
        _set("spec.strategy", "MultiWorkerMirrored"),
        _set("spec.model", {"command": ["python", "t.py"]}),
        _set("spec.replicas.ps", {"replicas": 1}),
    ),
    case(
        "mwms-two-chiefs",
        "spec.replicas.chief.replicas",
        _set("spec.strategy", "MultiWorkerMirrored"),
        _set("spec.model", {"command": ["python", "t.py"]}),
        _set("spec.replicas.chief", {"replicas": 2}),
    ),
    case(
        "mwms-no-worker",
        "spec.replicas.worker.replicas",
        _set("spec.strategy", "MultiWorkerMirrored"),
        _set("spec.model", {"command": ["python", "t.py"]}),
        _set("spec.replicas.chief", {"replicas": 1}),
        _set("spec.replicas.worker", {"replicas": 0}),
    ),
    case(
        "all-workers-success-in-a-ps-job",
        "spec.runPolicy.successPolicy",
        _set("spec.runPolicy.successPolicy", "AllWorkers"),
        why="parameter servers and PS workers never exit",
    ),
    case(
        "partitioner-fixed-and-min-size",
        "spec.training.variablePartitioner.fixedShards",
        _set("spec.training.variablePartitioner", {"fixedShards": 3, "minShardBytes": 1024}),
        why="each field picks another TensorFlow partitioner",
    ),
    case(
        "partitioner-fixed-and-max-size",
        "spec.training.variablePartitioner.fixedShards",
        _set("spec.training.variablePartitioner", {"fixedShards": 3, "maxShardBytes": 1 << 20}),
    ),
    case(
        "partitioner-min-and-max-size",
        "spec.training.variablePartitioner.maxShardBytes",
        _set("spec.training.variablePartitioner", {"minShardBytes": 1024, "maxShardBytes": 1 << 20}),
    ),
    case(
        "partitioner-fixed-with-max-shards",
        "spec.training.variablePartitioner.maxShards",
        _set("spec.training.variablePartitioner", {"fixedShards": 3, "maxShards": 2}),
        why="fixedShards is the shard count itself",
    ),
    case("no-workers", f"{W}.replicas", _set(f"{W}.replicas", 0)),
    case("two-evaluators", "spec.replicas.evaluator.replicas", _set("spec.replicas.evaluator", {"replicas": 2})),
    case("no-checkpoint-trigger", "spec.training.checkpoint", _set("spec.training.checkpoint", {"keep": 2})),
    # the tf.data service: a dispatcher and data workers, both or neither
    case("two-dispatchers", "spec.replicas.dispatcher.replicas", _set("spec.replicas.dispatcher", {"replicas": 2})),
    case(
        "data-workers-without-dispatcher",
        "spec.replicas.dispatcher.replicas",
        _set("spec.replicas.dataWorker", {"replicas": 2}),
    ),
    case(
        "dispatcher-without-data-workers",
        "spec.replicas.dataWorker.replicas",
        _set("spec.replicas.dispatcher", {"replicas": 1}),
    ),
    case(
        "too-many-data-workers",
        "spec.replicas.dataWorker.replicas",
        _set("spec.replicas.dispatcher", {"replicas": 1}),
        _set("spec.replicas.dataWorker", {"replicas": 101}),
        why="<job>-dataworker-<index> must fit 63 characters",
    ),
    case(
        "data-service-without-servers",
        "spec.training.dataService",
        _set("spec.training.dataService", {"processingMode": "Dynamic"}),
    ),
    case(
        "data-service-mode-unknown",
        "spec.training.dataService.processingMode",
        _set("spec.replicas.dispatcher", {"replicas": 1}),
        _set("spec.replicas.dataWorker", {"replicas": 1}),
        _set("spec.training.dataService", {"processingMode": "Static"}),
    ),
    *[
        case(
            f"data-service-command-{r}",
            f"spec.replicas.{r}.template.spec.command",
            _set("spec.model", {"command": ["python", "train.py"]}),
            _set("spec.training", {"steps": 300}),
            _set("spec.storage", {"claimName": "data"}),
            _set("spec.replicas.dispatcher", {"replicas": 1}),
            _set("spec.replicas.dataWorker", {"replicas": 1}),
            _set(f"spec.replicas.{r}.template.spec.command", ["python", "x.py"]),
            why="the service runs the trainer image's own servers, also in script mode",
        )
        for r in ("dispatcher", "dataWorker")
    ],
    case(
        "min-available-without-the-data-service",
        "spec.runPolicy.schedulingPolicy.minAvailable",
        _set("spec.replicas.dispatcher", {"replicas": 1}),
        _set("spec.replicas.dataWorker", {"replicas": 2}),
        _set("spec.runPolicy.schedulingPolicy", {"minAvailable": 2}),
        why="chief + ps without the dispatcher and a data worker cannot train",
    ),
    case(
        "evaluator-without-checkpoints",
        "spec.training.checkpoint",
        _set("spec.replicas.evaluator", {"replicas": 1}),
        _set("spec.training.checkpoint", {"everySteps": 300}),
        why="the only checkpoint would be the final one",
    ),
    case(
        "int8-without-calibration",
        "spec.export.tflite.calibrationSamples",
        _set("spec.export.tflite", {"quantization": "int8"}),
    ),
    case("format-repeated", "spec.export.formats", _set("spec.export.formats", ["onnx", "onnx"])),
    case(
        "required-not-requested",
        "spec.export.required",
        _set("spec.export", {"formats": ["savedmodel", "onnx"], "required": ["savedmodel", "tflite"]}),
    ),
    case(
        "storage-both",
        "spec.storage",
        _set("spec.storage", {"claimName": "data", "volumeClaimTemplate": {"size": "1Gi"}}),
    ),
    case("storage-neither", "spec.storage", _set("spec.storage", {"mountPath": "/data"})),
    case(
        "storage-claim-and-uri",
        "spec.storage",
        _set("spec.storage", {"claimName": "data", "uri": "gs://bucket/jobs"}),
    ),
    case(
        "storage-uri-in-script-mode",
        "spec.storage.uri",
        _set("spec.storage", {"uri": "gs://bucket/jobs"}),
        _set("spec.model", {"command": ["python", "train.py"]}),
        _del("spec.training.steps"),
    ),
    case("storage-uri-without-bucket", "spec.storage.uri", _set("spec.storage", {"uri": "gs://"})),
    case("storage-uri-bucket-only-slash", "spec.storage.uri", _set("spec.storage", {"uri": "gs:///jobs"})),
    case("storage-uri-not-gs", "spec.storage.uri", _set("spec.storage", {"uri": "s3://bucket/jobs"})),
    case("storage-uri-bucket-uppercase", "spec.storage.uri", _set("spec.storage", {"uri": "gs://My-Bucket"})),
    case(
        "storage-credentials-without-uri",
        "spec.storage.credentialsSecret",
        _set("spec.storage", {"claimName": "data", "credentialsSecret": {"name": "gcs-key"}}),
    ),
    case(
        "env-tf-config",
        "spec.replicas.ps.template.spec.env",
        _set("spec.replicas.ps.template.spec.env", [{"name": "TF_CONFIG", "value": "{}"}]),
    ),
    case(
        "env-tfps-prefix",
        f"{WT}.env",
        _set(f"{WT}.env", [{"name": "OK", "value": "1"}, {"name": "TFPS_JOB", "value": "{}"}]),
    ),
    # what would break the operator's own pods
    case(
        "mount-over-storage",
        f"{WT}.volumeMounts",
        _set(
            f"{WT}",
            {"volumes": [{"name": "data", "emptyDir": {}}], "volumeMounts": [{"name": "data", "mountPath": "/tfps"}]},
        ),
        why="hides the job's checkpoints",
    ),
    case(
        "mount-over-root",
        "spec.replicas.chief.template.spec.volumeMounts",
        _set("spec.replicas.chief.template.spec.volumeMounts", [{"name": "x", "mountPath": "/"}]),
    ),
    case(
        "mount-over-custom-storage-path",
        "spec.replicas.ps.template.spec.volumeMounts",
        _set(
            "spec",
            {
                "model": {"module": "m"},
                "training": {"steps": 10},
                "storage": {"claimName": "data", "mountPath": "/data"},
                "replicas": {"ps": {"template": {"spec": {"volumeMounts": [{"name": "x", "mountPath": "/data/"}]}}}},
            },
        ),
    ),
    case(
        "mount-over-tmp",
        "spec.replicas.evaluator.template.spec.volumeMounts",
        _set("spec.replicas.evaluator.template.spec.volumeMounts", [{"name": "x", "mountPath": "/tmp"}]),
    ),
    *[
        case(
            f"mount-over-tmp-{r}",
            f"spec.replicas.{r}.template.spec.volumeMounts",
            _set("spec.replicas.dispatcher", {"replicas": 1}),
            _set("spec.replicas.dataWorker", {"replicas": 1}),
            _set(f"spec.replicas.{r}.template.spec.volumeMounts", [{"name": "x", "mountPath": "/tmp"}]),
        )
        for r in ("dispatcher", "dataWorker")
    ],
    case("port-is-progress-port", "spec.training.port", _set("spec.training.port", 8470)),
    case(
        "storage-size-zero",
        "spec.storage.volumeClaimTemplate.size",
        _set("spec.storage", {"volumeClaimTemplate": {"size": "0"}}),
    ),
    case(
        "storage-size-zero-suffixed",
        "spec.storage.volumeClaimTemplate.size",
        _set("spec.storage", {"volumeClaimTemplate": {"size": "0Gi"}}),
    ),
    # resources the API server would refuse in a Pod (the job could never create its pods)
    case(
        "gpu-request-without-limit",
        f"{W}.resources.limits",
        _set(f"{W}.resources", {"requests": {"nvidia.com/gpu": 1}}),
        why="an extended resource needs a limit (Kubernetes: 'Limit must be set for non overcommitable resources')",
    ),
    case(
        "gpu-request-below-limit",
        f"{W}.resources.requests",
        _set(f"{W}.resources", {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": "1"}}),
        why="extended resources cannot be overcommitted: request == limit",
    ),
    case(
        "gpu-fractional",
        f"{WT}.resources.limits",
        _set(f"{WT}.resources", {"limits": {"nvidia.com/gpu": "500m"}}),
        why="extended resources are whole numbers",
    ),
    case(
        "hugepages-request-without-limit",
        "spec.replicas.ps.resources.limits",
        _set("spec.replicas.ps.resources", {"requests": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}),
    ),
    case(
        "hugepages-without-cpu-or-memory",
        "spec.replicas.ps.resources",
        _set("spec.replicas.ps.resources", {"limits": {"hugepages-2Mi": "4Mi"}}),
    ),
    case(
        "hugepages-not-a-page-multiple",
        "spec.replicas.worker.resources.limits",
        _set(f"{W}.resources", {"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}}),
    ),
    case(
        "cpu-request-above-limit",
        f"{WT}.resources.requests",
        _set(f"{WT}.resources", {"limits": {"cpu": "1"}, "requests": {"cpu": "1001m"}}),
        why="compared as quantities: 1001m > 1",
    ),
    case(
        "memory-request-above-limit",
        "spec.export.resources.requests",
        _set("spec.export.resources", {"limits": {"memory": "1Gi"}, "requests": {"memory": "1025Mi"}}),
    ),
    case(
        "resource-name-not-standard",
        "spec.replicas.chief.resources.limits",
        _set("spec.replicas.chief.resources", {"limits": {"gpu": 1}}),
        why="a name without a domain must be cpu, memory, ephemeral-storage or hugepages-<size>",
    ),
    case(
        "resource-name-not-standard-request",
        "spec.replicas.evaluator.resources.requests",
        _set("spec.replicas.evaluator.resources", {"requests": {"cpus": "1"}}),
    ),
    # script mode, code from a ConfigMap, pod template fields
    *[
        case(
            f"template-command-without-script-{r}",
            f"spec.replicas.{r}.template.spec.command",
            _set(f"spec.replicas.{r}.template.spec.command", ["python", "x.py"]),
            why="a replica's command/args are script mode's",
        )
        for r in ("chief", "ps", "worker", "evaluator")
    ],
    case("template-args-without-script", f"{WT}.command", _set(f"{WT}.args", ["--x"])),
    case(
        "keras-for-a-contract-module",
        "spec.model.keras",
        _set("spec.model.keras", "legacy"),
        why="keras chooses tf.keras for a program of one's own; a contract module imports its Keras",
    ),
    case("keras-unknown", "spec.model.keras", _set("spec.model.keras", "keras2")),
    case("script-empty-command", "spec.model.command", _set("spec.model.command", [])),
    case("script-empty-argument", "spec.model.command[1]", _set("spec.model.command", ["python", ""])),
    case(
        "code-item-dotdot",
        "spec.model.source.items[0].path",
        _set("spec.model.source", {"configMap": "code", "items": [{"key": "a.py", "path": "x/../../a.py"}]}),
    ),
    case(
        "code-item-absolute",
        "spec.model.source.items[0].path",
        _set("spec.model.source", {"configMap": "code", "items": [{"key": "a.py", "path": "/etc/a.py"}]}),
    ),
    case("code-configmap-name", "spec.model.source.configMap", _set("spec.model.source", {"configMap": "Code_Dir"})),
    case(
        "init-container-named-trainer",
        f"{WT}.initContainers",
        _set(f"{WT}.initContainers", [{"name": "trainer", "image": "busybox"}]),
        why="the operator's container is named trainer",
    ),
    case("init-container-without-name", f"{WT}.initContainers", _set(f"{WT}.initContainers", [{"image": "busybox"}])),
    case(
        "template-label-reserved",
        f"{W}.template.metadata.labels",
        _set(f"{W}.template.metadata", {"labels": {"tfps.dev/replica-type": "chief"}}),
        why="the operator finds and counts its pods by these labels",
    ),
    case("service-account-name-pattern", f"{WT}.serviceAccountName", _set(f"{WT}.serviceAccountName", "Not_A_Name")),
    # Pod Security baseline: the rules no namespace relaxes (api/podsecurity.py)
    case(
        "host-process-container",
        f"{WT}.securityContext.windowsOptions.hostProcess",
        _set(f"{WT}.securityContext", {"windowsOptions": {"hostProcess": True}}),
        why="a Windows HostProcess container runs on the node",
    ),
    case(
        "host-process-pod",
        f"{WT}.podSecurityContext.windowsOptions.hostProcess",
        _set(f"{WT}.podSecurityContext", {"runAsUser": 1000, "windowsOptions": {"hostProcess": True}}),
    ),
    case(
        "unmasked-proc-mount",
        f"{WT}.securityContext.procMount",
        _set(f"{WT}.securityContext", {"procMount": "Unmasked"}),
    ),
    case(
        "init-container-unmasked-proc-mount",
        f"{WT}.initContainers[0].securityContext.procMount",
        _set(
            f"{WT}.initContainers", [{"name": "init", "image": "busybox", "securityContext": {"procMount": "Unmasked"}}]
        ),
    ),
    case(
        "init-container-host-process",
        f"{WT}.initContainers[0].securityContext.windowsOptions.hostProcess",
        _set(
            f"{WT}.initContainers",
            [{"name": "init", "image": "busybox", "securityContext": {"windowsOptions": {"hostProcess": True}}}],
        ),
    ),
    case(
        "init-container-host-port",
        f"{WT}.initContainers[0].ports[1].hostPort",
        _set(
            f"{WT}.initContainers",
            [
                {
                    "name": "init",
                    "image": "busybox",
                    "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 81}],
                }
            ],
        ),
        why="a host port binds the node's network",
    ),
    case("replica-image-empty", f"{W}.image", _set(f"{W}.image", "")),
    # runPolicy.schedulingPolicy
    case(
        "min-available-above-pods",
        "spec.runPolicy.schedulingPolicy.minAvailable",
        _set("spec.runPolicy.schedulingPolicy", {"minAvailable": 5}),
        why="chief + 1 ps + 2 workers = 4 pods: a group of 5 can never be placed",
    ),
    case(
        "min-available-below-chief-and-ps",
        "spec.runPolicy.schedulingPolicy.minAvailable",
        _set("spec.replicas.ps", {"replicas": 2}),
        _set("spec.runPolicy.schedulingPolicy", {"minAvailable": 2}),
        why="a PS job cannot train without its chief and every PS (1 + 2 = 3)",
    ),
    case(
        "min-available-below-mwms-workers",
        "spec.runPolicy.schedulingPolicy.minAvailable",
        _set("spec.strategy", "MultiWorkerMirrored"),
        _set("spec.model", {"command": ["python", "t.py"]}),
        _set("spec.runPolicy.schedulingPolicy", {"minAvailable": 1}),
        why="all-reduce cannot train without every worker (2)",
    ),
    case(
        "min-available-zero",
        "spec.runPolicy.schedulingPolicy.minAvailable",
        _set("spec.runPolicy.schedulingPolicy", {"minAvailable": 0}),
    ),
    case(
        "queue-not-a-name",
        "spec.runPolicy.schedulingPolicy.queue",
        _set("spec.runPolicy.schedulingPolicy", {"queue": "Team Queue"}),
    ),
    case(
        "schedule-timeout-zero",
        "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
        _set("spec.runPolicy.schedulingPolicy", {"scheduleTimeoutSeconds": 0}),
    ),
    case(
        "scheduling-policy-typo",
        "spec.runPolicy.schedulingPolicy.minAvailble",
        _set("spec.runPolicy.schedulingPolicy", {"minAvailble": 3}),
    ),
    # unknown fields: rejected with strict field validation (kubectl's default), pruned otherwise
    case("unknown-spec-field", "spec.foo", _set("spec.foo", 1)),
    case("typo-template", f"{W}.templat", _set(f"{W}.templat", {})),
    case(
        "output-kind-unknown",
        "spec.export.verify.outputKinds.probs",
        _set("spec.export.verify", {"outputKinds": {"probs": "ranking"}}),
    ),
    case(
        "tolerance-unknown-format",
        "spec.export.verify.tolerances.pdf",
        _set("spec.export.verify", {"tolerances": {"pdf": {"maxAbs": 1.0}}}),
    ),
    # paths and names the operator's pods rely on (api/reserved.py)
    case(
        "storage-mount-root",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "/"}),
        why="every pod would mount the job's volume over its root filesystem",
    ),
    case(
        "storage-mount-system-dir",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "/usr/local/tfps"}),
    ),
    case(
        "storage-mount-above-system-dir",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "/var"}),
        why="/var/run is under it",
    ),
    case(
        "storage-mount-over-trainer-python",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "/opt"}),
        why="the trainer image's Python environment is /opt/tfps",
    ),
    case(
        "storage-mount-under-tmp",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "/tmp/data"}),
    ),
    case(
        "storage-mount-not-clean",
        "spec.storage.mountPath",
        _set("spec.storage", {"claimName": "data", "mountPath": "/data/../etc"}),
    ),
    case("storage-claim-not-a-name", "spec.storage.claimName", _set("spec.storage", {"claimName": "Data_PVC"})),
    case(
        "credentials-secret-not-a-name",
        "spec.storage.credentialsSecret.name",
        _set("spec.storage", {"uri": "gs://bucket/x", "credentialsSecret": {"name": "GCS Key"}}),
    ),
    case(
        "mount-over-termination-log",
        f"{WT}.volumeMounts",
        _set(f"{WT}.volumeMounts", [{"name": "x", "mountPath": "/dev/termination-log"}]),
        why="the operator reads each container's verdict there",
    ),
    case("mount-relative", f"{WT}.volumeMounts", _set(f"{WT}.volumeMounts", [{"name": "x", "mountPath": "data"}])),
    case(
        "volume-named-like-the-operators",
        f"{WT}.volumes",
        _set(f"{WT}.volumes", [{"name": "storage", "emptyDir": {}}]),
    ),
    case("env-home", f"{WT}.env", _set(f"{WT}.env", [{"name": "HOME", "value": "/data"}])),
    case(
        "template-label-pod-group",
        f"{W}.template.metadata.labels",
        _set(f"{W}.template.metadata", {"labels": {"scheduling.x-k8s.io/pod-group": "other"}}),
    ),
    case(
        "template-annotation-reserved",
        f"{W}.template.metadata.annotations",
        _set(f"{W}.template.metadata", {"annotations": {"tfps.dev/restart": "0"}}),
    ),
    # serving: only a verified export, in the runtime's format, on storage that outlives the job
    case(
        "serving-from-the-jobs-own-claim",
        "spec.serving",
        _set("spec.serving", {"runtime": "tensorflow"}),
        why="the default volumeClaimTemplate's claim is deleted with the job",
    ),
    case(
        "serving-without-export",
        "spec.serving",
        _set("spec.storage", {"claimName": "models"}),
        _set("spec.export", {"enabled": False}),
        _set("spec.serving", {}),
    ),
    case(
        "serving-tensorflow-savedmodel-not-required",
        "spec.serving.runtime",
        _set("spec.storage", {"claimName": "models"}),
        _set("spec.export", {"formats": ["savedmodel", "onnx"], "required": ["onnx"]}),
        _set("spec.serving", {"runtime": "tensorflow"}),
    ),
    case(
        "serving-onnx-not-required-by-default",
        "spec.serving.runtime",
        _set("spec.storage", {"claimName": "models"}),
        _set("spec.export", {"formats": ["savedmodel", "onnx"]}),
        _set("spec.serving", {"runtime": "onnx"}),
        why="unset, required is savedmodel alone",
    ),
    case(
        "serving-runtime-unknown",
        "spec.serving.runtime",
        _set("spec.storage", {"claimName": "models"}),
        _set("spec.serving", {"runtime": "tflite"}),
    ),
    case(
        "serving-name-not-dns-1035",
        "spec.serving.name",
        _set("spec.storage", {"claimName": "models"}),
        _set("spec.serving", {"name": "1ranker"}),
    ),
    case(
        "serving-max-below-min",
        "spec.serving.maxReplicas",
        _set("spec.storage", {"claimName": "models"}),
        _set("spec.serving", {"minReplicas": 3, "maxReplicas": 2}),
    ),
    *[
        c
        for r in ROLE_FIELDS
        for c in (
            case(
                f"mount-under-storage-{r}",
                f"spec.replicas.{r}.template.spec.volumeMounts",
                _set(f"spec.replicas.{r}.template.spec.volumeMounts", [{"name": "x", "mountPath": "/tfps/datasets"}]),
            ),
            case(
                f"env-credentials-with-secret-{r}",
                f"spec.replicas.{r}.template.spec.env",
                _set("spec.storage", {"uri": "gs://bucket/x", "credentialsSecret": {"name": "gcs-key"}}),
                _set(
                    f"spec.replicas.{r}.template.spec.env", [{"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/k"}]
                ),
            ),
            case(
                f"init-container-trainer-port-{r}",
                f"spec.replicas.{r}.template.spec.initContainers",
                _set(
                    f"spec.replicas.{r}.template.spec.initContainers",
                    [{"name": "proxy", "image": "envoy", "ports": [{"containerPort": 2222}]}],
                ),
            ),
        )
    ],
    # the program's own directories (spec.model.directories): script mode, under a mount of the lead
    case(
        "directories-without-command",
        "spec.model.directories",
        _set("spec.model.directories", {"checkpoints": "/train/ckpt"}),
        why="a contract module's trainer writes to the job's volume",
    ),
    case(
        "directories-relative",
        "spec.model.directories.checkpoints",
        _set("spec.model", {"command": ["python", "t.py"], "directories": {"checkpoints": "train/ckpt"}}),
    ),
    case(
        "directories-dot-dot",
        "spec.model.directories.savedModel",
        _set("spec.model", {"command": ["python", "t.py"], "directories": {"savedModel": "/train/../etc"}}),
    ),
    case(
        "directories-not-under-a-lead-mount",
        "spec.model.directories.savedModel",
        _set("spec.model", {"command": ["python", "t.py"], "directories": {"savedModel": "/train/model"}}),
        _set(f"{WT}.volumes", [{"name": "train", "persistentVolumeClaim": {"claimName": "train"}}]),
        _set(f"{WT}.volumeMounts", [{"name": "train", "mountPath": "/train"}]),
        why="the chief leads a ParameterServer job: the worker's mounts are not the lead's",
    ),
    case(
        "directories-beside-the-mount",
        "spec.model.directories.tensorboard",
        _set("spec.strategy", "MultiWorkerMirrored"),
        _set("spec.model", {"command": ["python", "t.py"], "directories": {"tensorboard": "/trainlogs"}}),
        _set(f"{WT}.volumes", [{"name": "train", "persistentVolumeClaim": {"claimName": "train"}}]),
        _set(f"{WT}.volumeMounts", [{"name": "train", "mountPath": "/train"}]),
    ),
]

assert len({c.id for c in INVALID}) == len(INVALID), "case ids must be unique"
