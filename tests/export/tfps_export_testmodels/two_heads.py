"""Test model: two inputs and two outputs, a classifier head (``kind``, softmax over 4) and a regression
head (``size``, 2 values); the dataset's labels are a dict keyed by the output names."""

from __future__ import annotations

import keras
import tensorflow as tf


def build_model(args):
    a = keras.Input((6,), name="a")
    b = keras.Input((3,), name="b")
    x = keras.layers.Concatenate()([keras.layers.Dense(16, activation="relu", name="a_dense")(a), b])
    x = keras.layers.Dense(16, activation="relu", name="shared")(x)
    kind = keras.layers.Dense(4, activation="softmax", name="kind")(x)
    size = keras.layers.Dense(2, name="size")(x)
    return keras.Model({"a": a, "b": b}, {"kind": kind, "size": size}, name="two_heads")


def dataset(input_context, batch_size, args):
    shard = input_context.input_pipeline_id if input_context is not None else 0

    def make(i):
        seed = tf.stack([tf.cast(shard, tf.int64) + 21, i])
        a = tf.random.stateless_normal([batch_size, 6], seed=seed)
        b = tf.random.stateless_normal([batch_size, 3], seed=seed + 1)
        kind = tf.argmax(a[:, :4] + 0.5 * tf.pad(b, [[0, 0], [0, 1]]), axis=-1)
        size = tf.stack([tf.reduce_sum(a, -1), 2.0 * b[:, 0] - a[:, 5]], axis=-1)
        return {"a": a, "b": b}, {"kind": kind, "size": size}

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    cls = keras.losses.sparse_categorical_crossentropy(labels["kind"], predictions["kind"])
    reg = tf.reduce_mean(tf.square(labels["size"] - predictions["size"]), axis=-1)
    return cls + 0.1 * reg


def optimizer(args):
    return keras.optimizers.Adam(0.01)


def input_signature(args):
    return {"a": tf.TensorSpec([None, 6], tf.float32, name="a"), "b": tf.TensorSpec([None, 3], tf.float32, name="b")}
