"""A small linear / MLP regression on deterministic synthetic data (fast; tests and quickstart).

Batches are ``({"features": x}, y)``; the model takes ``{"features": x}`` and returns ``[batch, 1]``.

Data: ``y = x . w_true + bias_true + noise`` with ``x ~ N(0, 1)^D``; ``w_true`` is fixed by
``data_seed`` so every worker (and the exporter) sees the same problem. Each worker's stream is
its own shard (seeded by ``input_pipeline_id``) and repeats forever.

Model args (``spec.model.args``), all optional:
    ``features`` (int, 8)        input width D
    ``hidden`` (int, 0)          0 = linear model; > 0 = one ReLU hidden layer of this width
    ``learning_rate`` (float, 0.05)
    ``optimizer`` ("sgd" | "adam", "sgd")
    ``noise`` (float, 0.01)      label noise std
    ``data_seed`` (int, 1234)
    ``nan_at_batch`` (int, None) test hook: from this batch index on (per worker), labels are 3e38
                                 (finite), so the squared error overflows to Inf and the weights
                                 to NaN: a diverging loss for checkNumerics to catch in the
                                 training step (a NaN made in the input pipeline would be caught
                                 there instead).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

INPUT = "features"


def _features(args: dict) -> int:
    return int(args.get("features", 8))


def _true_weights(args: dict) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng(int(args.get("data_seed", 1234)))
    d = _features(args)
    return rng.normal(size=(d, 1)).astype(np.float32), float(rng.normal())


def build_model(args: dict) -> keras.Model:
    d = _features(args)
    inputs = keras.Input(shape=(d,), name=INPUT, dtype="float32")
    x = inputs
    hidden = int(args.get("hidden", 0))
    if hidden > 0:
        x = keras.layers.Dense(hidden, activation="relu", name="hidden")(x)
    outputs = keras.layers.Dense(1, name="output")(x)
    return keras.Model(inputs={INPUT: inputs}, outputs=outputs, name="linear")


def dataset(input_context: tf.distribute.InputContext | None, batch_size: int, args: dict) -> tf.data.Dataset:
    d = _features(args)
    w, b = _true_weights(args)
    w_t, b_t = tf.constant(w), tf.constant(b, tf.float32)
    noise = float(args.get("noise", 0.01))
    seed = int(args.get("data_seed", 1234))
    shard = input_context.input_pipeline_id if input_context is not None else 0
    nan_at = args.get("nan_at_batch")

    def make_batch(i: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        s = tf.stack([tf.constant(seed, tf.int64), tf.cast(shard, tf.int64) * (1 << 32) + i])
        x = tf.random.stateless_normal([batch_size, d], seed=s)
        eps = tf.random.stateless_normal([batch_size, 1], seed=s + 7) * noise
        y = tf.matmul(x, w_t) + b_t + eps
        if nan_at is not None:
            y = tf.where(i >= int(nan_at), tf.fill(tf.shape(y), 3e38), y)
        return {INPUT: x}, y

    return tf.data.Dataset.counter().map(make_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    return tf.reduce_mean(tf.square(tf.cast(labels, predictions.dtype) - predictions), axis=-1)


def optimizer(args: dict) -> keras.optimizers.Optimizer:
    lr = float(args.get("learning_rate", 0.05))
    if str(args.get("optimizer", "sgd")).lower() == "adam":
        return keras.optimizers.Adam(learning_rate=lr)
    return keras.optimizers.SGD(learning_rate=lr)


def input_signature(args: dict) -> dict[str, tf.TensorSpec]:
    return {INPUT: tf.TensorSpec([None, _features(args)], tf.float32, name=INPUT)}


def sample_inputs(n: int, args: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(int(args.get("data_seed", 1234)) + 1)
    return {INPUT: rng.normal(size=(n, _features(args))).astype(np.float32)}


def metrics(labels: tf.Tensor, predictions: tf.Tensor) -> dict[str, Any]:
    err = tf.cast(labels, predictions.dtype) - predictions
    return {"mae": tf.reduce_mean(tf.abs(err)), "mse": tf.reduce_mean(tf.square(err))}
