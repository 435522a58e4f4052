"""Wide-and-deep binary classifier with a large embedding table partitioned across the PS.

Inputs: ``{"dense": float32[None, dense_features], "ids": int32[None, ids_per_example]}``;
output: click probability ``[batch, 1]``. Both the wide part (a 1-wide embedding, i.e. a linear
model over the sparse ids) and the deep part (``vocab_size x embed_dim``, mean-pooled, concatenated
with the dense features, then an MLP) use :class:`ShardedEmbedding`.

Partitioning: with a job ``variablePartitioner`` (e.g. ``maxShards: 2``) ParameterServerStrategy
creates the tables as ``ShardedVariable``s, one shard per PS. :class:`tfps_trainer.layers.ShardedEmbedding`
keeps the lookup per shard and the trainer's sparse Adagrad (:mod:`tfps_trainer.optimizers`) updates
only the rows a batch used, so a step costs O(batch), not O(vocabulary).

The ids are skewed (low ids are hot, as in a frequency-sorted vocabulary). With ``spread_rows`` (the
default here) both tables store row ``r`` at ``(r * a) mod vocab_size`` (see ``ShardedEmbedding``),
so the hot rows, and the PS work they cause, are spread over every PS rather than all on the first.

Model args (all optional): ``vocab_size`` (200000), ``embed_dim`` (16), ``ids_per_example`` (4),
``dense_features`` (8), ``hidden`` (32), ``learning_rate`` (0.05), ``data_seed`` (7),
``spread_rows`` (true; false gives ``keras.layers.Embedding``'s row order).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfps_trainer.layers import ShardedEmbedding


def _cfg(args: dict) -> dict[str, Any]:
    return {
        "vocab_size": int(args.get("vocab_size", 200_000)),
        "embed_dim": int(args.get("embed_dim", 16)),
        "ids_per_example": int(args.get("ids_per_example", 4)),
        "dense_features": int(args.get("dense_features", 8)),
        "hidden": int(args.get("hidden", 32)),
        "learning_rate": float(args.get("learning_rate", 0.05)),
        "data_seed": int(args.get("data_seed", 7)),
        "spread_rows": _flag(args.get("spread_rows", True), "spread_rows"),
    }


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"model arg {name} must be true or false (got {value!r})")
    return value


def build_model(args: dict) -> keras.Model:
    c = _cfg(args)
    dense = keras.Input(shape=(c["dense_features"],), name="dense", dtype="float32")
    ids = keras.Input(shape=(c["ids_per_example"],), name="ids", dtype="int32")
    spread = c["spread_rows"]
    wide = ShardedEmbedding(c["vocab_size"], 1, spread_rows=spread, name="wide_embedding")(ids)  # [b, n, 1]
    wide_logit = keras.ops.sum(wide, axis=1)  # [b, 1]
    deep = ShardedEmbedding(c["vocab_size"], c["embed_dim"], spread_rows=spread, name="deep_embedding")(ids)
    x = keras.layers.Concatenate()([keras.ops.mean(deep, axis=1), dense])
    x = keras.layers.Dense(c["hidden"], activation="relu", name="deep_hidden")(x)
    deep_logit = keras.layers.Dense(1, name="deep_logit")(x)
    prob = keras.layers.Activation("sigmoid", name="prob")(keras.layers.Add()([wide_logit, deep_logit]))
    return keras.Model(inputs={"dense": dense, "ids": ids}, outputs=prob, name="wide_deep")


def _ground_truth(c: dict[str, Any]) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(c["data_seed"])
    return rng.normal(size=(c["dense_features"], 1)).astype(np.float32), 1009  # prime bucket count


def dataset(input_context: tf.distribute.InputContext | None, batch_size: int, args: dict) -> tf.data.Dataset:
    """Label = 1 when ``dense . w + mean(bucket_weight[id % 1009]) > 0``: learnable by both parts."""
    c = _cfg(args)
    w, buckets = _ground_truth(c)
    w_t = tf.constant(w)
    bucket_w = tf.constant(np.random.default_rng(c["data_seed"] + 1).normal(size=(buckets,)).astype(np.float32))
    shard = input_context.input_pipeline_id if input_context is not None else 0
    seed = c["data_seed"]

    def make_batch(i: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        s = tf.stack([tf.constant(seed, tf.int64), tf.cast(shard, tf.int64) * (1 << 32) + i])
        dense = tf.random.stateless_normal([batch_size, c["dense_features"]], seed=s)
        # Skewed ids (squares of uniforms) so some rows are hot, like real categorical data.
        u = tf.random.stateless_uniform([batch_size, c["ids_per_example"]], seed=s + 1)
        ids = tf.cast(tf.square(u) * c["vocab_size"], tf.int32)
        score = tf.matmul(dense, w_t)[:, 0] + tf.reduce_mean(tf.gather(bucket_w, ids % buckets), axis=1)
        labels = tf.cast(score > 0, tf.float32)[:, None]
        return {"dense": dense, "ids": ids}, labels

    return tf.data.Dataset.counter().map(make_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    return keras.losses.binary_crossentropy(tf.cast(labels, predictions.dtype), predictions)


def optimizer(args: dict) -> keras.optimizers.Optimizer:
    # The trainer runs Keras' Adagrad as tfps_trainer.optimizers.Adagrad: the same updates, applied
    # only to the embedding rows a batch used.
    return keras.optimizers.Adagrad(learning_rate=_cfg(args)["learning_rate"])


def input_signature(args: dict) -> dict[str, tf.TensorSpec]:
    c = _cfg(args)
    return {
        "dense": tf.TensorSpec([None, c["dense_features"]], tf.float32, name="dense"),
        "ids": tf.TensorSpec([None, c["ids_per_example"]], tf.int32, name="ids"),
    }


def custom_objects() -> dict[str, Any]:
    return {"ShardedEmbedding": ShardedEmbedding}


def sample_inputs(n: int, args: dict) -> dict[str, np.ndarray]:
    c = _cfg(args)
    rng = np.random.default_rng(c["data_seed"] + 2)
    return {
        "dense": rng.normal(size=(n, c["dense_features"])).astype(np.float32),
        "ids": (rng.uniform(size=(n, c["ids_per_example"])) ** 2 * c["vocab_size"]).astype(np.int32),
    }


def metrics(labels: tf.Tensor, predictions: tf.Tensor) -> dict[str, Any]:
    hits = tf.cast(tf.equal(tf.cast(predictions > 0.5, tf.float32), tf.cast(labels, tf.float32)), tf.float32)
    return {"accuracy": tf.reduce_mean(hits)}
