"""An input-bound model: a CPU-bound preprocessing ``map`` (real work: ``rounds`` dense layers of tanh over
every example's features, on the batch) that costs several times the training step (one Dense layer on the
result), for ``benchmarks/data_service_bench.py``.

Model args: ``features`` (int, 64); ``rounds`` (int, 24) preprocessing layers (the benchmark runs 1000);
``ids`` (int, 2**30) batches in an epoch (the dataset repeats).
"""

import keras
import numpy as np
import tensorflow as tf

LAYERS = 8
"""Distinct weight matrices the ``rounds`` cycle through (the dataset's graph, registered with the dispatcher,
stays small)."""


def _features(args):
    return int(args.get("features", 64))


def build_model(args):
    inputs = keras.Input(shape=(_features(args),), name="features")
    return keras.Model({"features": inputs}, keras.layers.Dense(1, name="output")(inputs))


def dataset(input_context, batch_size, args):
    """One element of the source per batch (its id seeds the batch): with dynamic sharding each source element
    is a split the data worker asks the dispatcher for, so a split per batch, not per example."""
    d, rounds = _features(args), int(args.get("rounds", 24))
    rng = np.random.default_rng(0)
    weights = tf.constant(rng.normal(scale=1.0 / np.sqrt(d), size=(LAYERS, d, d)).astype("float32"))

    def layer(r, x):
        return r + 1, tf.tanh(tf.matmul(x, weights[r % LAYERS]) + x)

    def preprocess(i):
        x = tf.random.stateless_normal([batch_size, d], seed=tf.stack([i, tf.constant(3, tf.int64)]))
        _, x = tf.while_loop(lambda r, _: r < rounds, layer, (tf.constant(0), x))  # a small graph to ship
        return {"features": x}, tf.reduce_mean(x, axis=1, keepdims=True)

    ds = tf.data.Dataset.range(int(args.get("ids", 1 << 30)))
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.repeat().map(preprocess)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return keras.optimizers.SGD(0.01)


def input_signature(args):
    return {"features": tf.TensorSpec([None, _features(args)], tf.float32)}
