"""Run as a script: for each job file's ``variablePartitioner`` in ``sys.argv[1:]``, build the wide-and-deep
model under a ParameterServerStrategy with the partitioner the chief builds (``sharding.partitioner`` of
the settings the operator maps the job to), over in-process servers (2 PS, 1 worker); print one JSON line
per job with each variable's shard rows and devices and the chief's log lines."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import tensorflow as tf
import yaml

from tfps_operator.api.validate import validate_job
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.tools.local.ports import free_ports
from tfps_trainer import contract, modelio, sharding
from tfps_trainer.partitioning import describe_partitioner


def main() -> None:
    ps, worker = free_ports(2), free_ports(1)
    spec = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{p}" for p in ps], "worker": [f"127.0.0.1:{p}" for p in worker]})
    servers = [
        tf.distribute.Server(spec, job_name=job, task_index=i, protocol="grpc", start=True)
        for job, n in (("ps", 2), ("worker", 1))
        for i in range(n)
    ]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc")
    for path in sys.argv[1:]:
        settings = job_settings(validate_job(yaml.safe_load(Path(path).read_text())))
        strategy = tf.distribute.ParameterServerStrategy(
            resolver, variable_partitioner=sharding.partitioner(settings.partitioner)
        )
        with strategy.scope():
            model = modelio.build(contract.load(settings.model_module), dict(settings.model_args))
        variables = {}
        for v in model.weights:
            tv = sharding.backing(v)
            shards = list(getattr(tv, "variables", [tv]))
            variables[v.path] = {
                "rows": [int(s.shape[0]) if s.shape.rank else 1 for s in shards],
                "devices": [s.device for s in shards],
            }
        report = {
            "partitioner": describe_partitioner(settings.partitioner) if settings.partitioner else None,
            "variables": variables,
            "log": sharding.describe(model.weights),
        }
        print("SHARDS " + json.dumps(report), flush=True)
    del servers
    os._exit(0)


if __name__ == "__main__":
    main()
