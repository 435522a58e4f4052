"""Test model: a legacy ``tf_keras`` (Keras 2) Sequential regressor; one input, bare-tensor dataset."""

from __future__ import annotations

import tensorflow as tf
import tf_keras


def build_model(args):
    return tf_keras.Sequential(
        [tf_keras.layers.Dense(32, activation="tanh", input_shape=(6,)), tf_keras.layers.Dense(2)], name="legacy"
    )


def dataset(input_context, batch_size, args):
    w = tf.constant([[0.5, -1.0], [1.5, 0.2], [-0.7, 0.9], [0.1, 0.1], [2.0, -0.3], [-1.2, 0.4]])

    def make(i):
        x = tf.random.stateless_normal([batch_size, 6], seed=tf.stack([tf.constant(3, tf.int64), i]))
        return x, tf.matmul(x, w)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return tf_keras.optimizers.SGD(0.05)


def input_signature(args):
    return {"x": tf.TensorSpec([None, 6], tf.float32, name="x")}
