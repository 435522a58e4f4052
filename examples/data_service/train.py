"""A parameter-server program of one's own whose input pipeline runs in the job's tf.data service.

The same shape as examples/seed/train.py (TF_CONFIG through TFConfigClusterResolver, tf_keras model.fit under
ParameterServerStrategy), with one difference: when the job has a tf.data service, tfps puts its dispatcher in
``TFPS_DATA_SERVICE`` (``grpc://host:port``) and the sharding in ``TFPS_DATA_SERVICE_MODE`` (``dynamic`` or
``off``), and each worker's dataset is read from the service (``tf.data.experimental.service.distribute``):
the preprocessing ``map`` runs on the data workers, once for all training workers, and every worker reads one
shared iteration (``job_name``). Without the variable the program reads its data itself, as before.
"""

import argparse
import os

import tensorflow as tf
import tf_keras as keras

FEATURES = 32


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--checkpoint-dir", default="/tmp/ckpt")
    p.add_argument("--model-dir", default="/tmp/model")
    return p.parse_args()


def preprocess(i):
    """Stands in for decoding and feature engineering: CPU work per example."""
    x = tf.random.stateless_normal([FEATURES], seed=tf.stack([i, tf.constant(1, tf.int64)]))
    for _ in range(4):
        x = tf.tanh(x + tf.sin(x))
    return x, tf.reduce_sum(x, keepdims=True)


def dataset_fn(input_context, batch_size):
    ds = tf.data.Dataset.range(1 << 20).repeat().map(preprocess).batch(batch_size)
    service = os.environ.get("TFPS_DATA_SERVICE")
    if service:
        mode = os.environ.get("TFPS_DATA_SERVICE_MODE", "dynamic")
        policy = tf.data.experimental.service.ShardingPolicy
        ds = ds.apply(
            tf.data.experimental.service.distribute(
                processing_mode=policy.DYNAMIC if mode == "dynamic" else policy.OFF,
                service=service,
                job_name="train",
            )
        )
    elif input_context is not None:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.prefetch(2)


def main():
    args = parse_args()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        server = tf.distribute.Server(
            resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id, protocol="grpc"
        )
        server.join()
        return
    service = os.environ.get("TFPS_DATA_SERVICE")
    print(f"input: {'the tf.data service at ' + service if service else 'read by each worker'}", flush=True)
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(16, activation="relu", input_shape=(FEATURES,)), keras.layers.Dense(1)]
        )
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse", steps_per_execution=10)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
    data = keras.utils.experimental.DatasetCreator(lambda ctx: dataset_fn(ctx, args.batch_size))
    done = int(model.optimizer.iterations.numpy())
    if done < args.steps:
        model.fit(data, epochs=1, steps_per_epoch=args.steps - done, verbose=2)
    manager.save(checkpoint_number=int(model.optimizer.iterations.numpy()))
    model.save(args.model_dir)
    print(f"trained to step {int(model.optimizer.iterations.numpy())}; saved model to {args.model_dir}", flush=True)


if __name__ == "__main__":
    main()
