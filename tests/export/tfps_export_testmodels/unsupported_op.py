"""Test model: a custom layer using ``tf.math.igamma`` (TFLite built-ins and tf2onnx have no kernel for it)."""

from __future__ import annotations

import keras
import tensorflow as tf


class IncompleteGamma(keras.layers.Layer):
    def call(self, x):
        return tf.math.igamma(tf.abs(x) + 1.0, tf.abs(x) + 0.5)


def custom_objects():
    return {"IncompleteGamma": IncompleteGamma}


def build_model(args):
    x = keras.Input((4,), name="x")
    h = keras.layers.Dense(4, name="dense")(x)
    return keras.Model(x, keras.layers.Dense(1, name="y")(IncompleteGamma()(h)))


def dataset(input_context, batch_size, args):
    def make(i):
        x = tf.random.stateless_normal([batch_size, 4], seed=tf.stack([tf.constant(5, tf.int64), i]))
        return x, tf.reduce_sum(x, axis=-1, keepdims=True)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return keras.optimizers.SGD(0.01)


def input_signature(args):
    return {"x": tf.TensorSpec([None, 4], tf.float32, name="x")}
