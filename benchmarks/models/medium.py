"""Benchmark model "medium": Dense 256-256-10 (ReLU) with Adam on synthetic 10-class data (Keras 3 contract).

Inputs are ``{"features": x}`` with ``x ~ N(0, 1)^32``; the label is the argmax of ``x @ W`` for a fixed
random ``W``, so the problem is learnable and the loss falls. Each worker's stream is its own shard.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

INPUT = "features"
FEATURES = 32
CLASSES = 10


def _projection() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(FEATURES, CLASSES)).astype(np.float32)


def build_model(args: dict) -> keras.Model:
    inputs = keras.Input(shape=(FEATURES,), name=INPUT, dtype="float32")
    x = keras.layers.Dense(256, activation="relu", name="hidden1")(inputs)
    x = keras.layers.Dense(256, activation="relu", name="hidden2")(x)
    outputs = keras.layers.Dense(CLASSES, name="logits")(x)
    return keras.Model(inputs={INPUT: inputs}, outputs=outputs, name="medium")


def dataset(input_context: tf.distribute.InputContext | None, batch_size: int, args: dict) -> tf.data.Dataset:
    w = tf.constant(_projection())
    shard = input_context.input_pipeline_id if input_context is not None else 0

    def make_batch(i: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        seed = tf.stack([tf.constant(99, tf.int64), tf.cast(shard, tf.int64) * (1 << 32) + i])
        x = tf.random.stateless_normal([batch_size, FEATURES], seed=seed)
        return {INPUT: x}, tf.argmax(tf.matmul(x, w), axis=1)

    return tf.data.Dataset.counter().map(make_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    labels = tf.reshape(tf.cast(labels, tf.int64), [-1])  # tf_keras fit hands labels as [batch, 1]
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=predictions)


def optimizer(args: dict) -> keras.optimizers.Optimizer:
    return keras.optimizers.Adam(learning_rate=float(args.get("learning_rate", 1e-3)))


def input_signature(args: dict) -> dict[str, tf.TensorSpec]:
    return {INPUT: tf.TensorSpec([None, FEATURES], tf.float32, name=INPUT)}
