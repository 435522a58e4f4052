"""Run as a script: build the wide-and-deep example under a real ParameterServerStrategy over in-process
servers (4 PS, 1 worker), its tables split in 4 shards (one per PS), once with ``spread_rows`` false and
once true; take one batch of the example's own skewed data, differentiate the loss against each shard
of the deep table and print one JSON line per build: each shard's rows, device, gradient type and the
gradient's row indices (one per lookup, the shard's offset added back)."""

from __future__ import annotations

import json
import os

import tensorflow as tf

from tfps_operator.tools.local.ports import free_ports
from tfps_trainer import contract, modelio, sharding

MODULE = "tfps_trainer.examples.wide_deep"
PS = 4


def main() -> None:
    ps, worker = free_ports(PS), free_ports(1)
    spec = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{p}" for p in ps], "worker": [f"127.0.0.1:{p}" for p in worker]})
    servers = [
        tf.distribute.Server(spec, job_name=job, task_index=i, protocol="grpc", start=True)
        for job, n in (("ps", PS), ("worker", 1))
        for i in range(n)
    ]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc")
    c = contract.load(MODULE)
    for spread in (False, True):
        args = {"vocab_size": 100_000, "embed_dim": 4, "hidden": 8, "spread_rows": spread}
        strategy = tf.distribute.ParameterServerStrategy(
            resolver, variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(PS)
        )
        with strategy.scope():
            model = modelio.build(c, args)
        features, labels = next(iter(c.module.dataset(None, 2048, args)))
        table = sharding.backing(model.get_layer("deep_embedding").embeddings)
        shards = list(table.variables)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(c.module.loss(labels, model(features, training=True)))
        grads = tape.gradient(loss, shards)
        report, offset = [], 0
        for s, g in zip(shards, grads):
            report.append(
                {
                    "rows": int(s.shape[0]),
                    "device": s.device,
                    "gradient": type(g).__name__,
                    "positions": [offset + int(i) for i in g.indices.numpy()] if hasattr(g, "indices") else [],
                }
            )
            offset += int(s.shape[0])
        ids = [int(i) for i in features["ids"].numpy().ravel()]
        print("SPREAD " + json.dumps({"spread_rows": spread, "ids": ids, "shards": report}), flush=True)
    del servers
    os._exit(0)


if __name__ == "__main__":
    main()
