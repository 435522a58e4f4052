"""A PSTrainingJob with every field of spec and status set (non-default where possible), for round trips."""

from __future__ import annotations

from datetime import UTC, datetime

from tfps_operator.api import models as m

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _resources(cpu: str) -> m.ResourceRequirements:
    return m.ResourceRequirements(
        limits={"cpu": cpu, "memory": "2Gi", "nvidia.com/gpu": 1}, requests={"cpu": "250m", "memory": 1073741824}
    )


def _replica(n: int, policy: str, cls: type[m.ReplicaSpec] = m.ReplicaSpec, **more: object) -> m.ReplicaSpec:
    return cls(
        replicas=n,
        **more,
        resources=_resources("2"),
        restart_policy=policy,
        template=m.PodTemplateOverride(
            metadata=m.ObjectMetaOverride(labels={"team": "ml"}, annotations={"note": "x"}),
            spec=m.PodSpecOverride(
                node_selector={"disk": "ssd"},
                tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                            ]
                        }
                    }
                },
                priority_class_name="high",
                env=[
                    {"name": "LOG_LEVEL", "value": "debug"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
                volume_mounts=[{"name": "scratch", "mountPath": "/scratch"}],
                resources=_resources("1500m"),
                security_context={"runAsNonRoot": True, "readOnlyRootFilesystem": True},
                pod_security_context={"fsGroup": 1000},
                image_pull_secrets=[{"name": "regcred"}],
            ),
        ),
    )


def full_spec() -> m.PSTrainingJobSpec:
    return m.PSTrainingJobSpec(
        image="registry.example/tfps-trainer:1.2.3",
        model=m.ModelSpec(
            module="tfps_trainer.examples.wide_deep",
            args={"embedding_dim": 16, "layers": [64, 32], "lr": 0.01, "nested": {"a": None, "b": True}},
        ),
        replicas=m.Replicas(
            chief=_replica(1, "Never"),
            ps=_replica(2, "ExitCode"),
            worker=_replica(  # type: ignore[arg-type]
                3, "OnFailure", m.WorkerReplicaSpec, min_replicas=2, max_replicas=8, pending_timeout_seconds=120
            ),
            evaluator=_replica(1, "Never"),
        ),
        training=m.TrainingSpec(
            steps=5000,
            batch_size=128,
            checkpoint=m.CheckpointPolicy(every_steps=250, every_seconds=600, keep=7),
            check_numerics=True,
            variable_partitioner=m.VariablePartitioner(min_shard_bytes=1 << 20, max_shards=2),
            port=2345,
            seed=42,
        ),
        storage=m.StorageSpec(claim_name="training-data", mount_path="/data"),
        export=m.ExportSpec(
            enabled=False,
            formats=["onnx", "tflite"],
            tflite=m.TFLiteExport(quantization="int8", calibration_samples=100),
            onnx=m.ONNXExport(opset=15),
            verify=m.VerifySpec(
                samples=32,
                tolerances={
                    "tflite": m.Tolerance(max_abs=0.05, max_rel=0.1, min_argmax_agreement=0.99),
                    "onnx": m.Tolerance(max_abs=1e-5),
                },
            ),
            resources=_resources("3"),
            backoff_limit=2,
        ),
        run_policy=m.RunPolicy(
            backoff_limit=5,
            active_deadline_seconds=3600,
            ttl_seconds_after_finished=60,
            clean_pod_policy="All",
            suspend=True,
            scheduler_name="volcano",
            stall_seconds=900,
        ),
    )


def full_status() -> m.PSTrainingJobStatus:
    return m.PSTrainingJobStatus(
        phase="Exporting",
        conditions=[
            m.Condition(
                type="Running",
                status="False",
                reason="TrainingDone",
                message="done",
                last_transition_time=T0,
                observed_generation=2,
            ),
            m.Condition(
                type="Exporting",
                status="True",
                reason="ExportJobCreated",
                message="job x",
                last_transition_time=T0,
                observed_generation=2,
            ),
        ],
        observed_generation=2,
        replica_statuses={
            "chief": m.ReplicaStatus(active=1, ready=1),
            "ps": m.ReplicaStatus(active=2, ready=2),
            "worker": m.ReplicaStatus(active=2, ready=1, succeeded=1, failed=3),
            "evaluator": m.ReplicaStatus(failed=1),
        },
        workers="1/3",
        cluster_size=m.ClusterSize(ps=2, worker=3),
        worker_selector="tfps.dev/job-name=full,tfps.dev/replica-type=worker",
        workers_left_out=0,
        resize=m.ResizeStatus.model_validate(
            {
                "from": {"ps": 2, "worker": 2},
                "to": {"ps": 2, "worker": 3},
                "method": "Restart",
                "reason": "Scaled",
                "requested": T0,
                "completed": T0,
                "step": 1200,
                "resumedFrom": 1200,
                "stepsLost": 0,
            }
        ),
        resizes=1,
        restarts=2,
        start_time=T0,
        completion_time=T0,
        checkpoint=m.CheckpointStatus(step=5000, path="/data/ns/full/checkpoints/ckpt-20", time=T0),
        progress=m.TrainingProgress(step=5000, loss=0.125, steps_per_second=42.5, updated=T0),
        export=m.ExportStatus(
            job_name="full-export",
            step=5000,
            path="/data/ns/full/exports/5000",
            artifacts=[
                m.Artifact(format="onnx", path="/data/x/model.onnx", bytes=12345, sha256="ab" * 32, max_error=1e-6),
                m.Artifact(
                    format="tflite",
                    path="/data/x/model.tflite",
                    bytes=2345,
                    sha256="cd" * 32,
                    max_error=0.01,
                    quantization="int8",
                ),
            ],
        ),
    )


def full_job(name: str = "full", namespace: str = "default") -> m.PSTrainingJob:
    return m.PSTrainingJob(
        metadata=m.ObjectMeta(name=name, namespace=namespace), spec=full_spec(), status=full_status()
    )
