"""Test model: a custom layer that is NOT registered with Keras, so loading a ``.keras`` file of it needs
``custom_objects()`` from the contract (as the classic ``load_model(..., custom_objects=...)`` recipe)."""

from __future__ import annotations

import keras
import tensorflow as tf


class LearnedScale(keras.layers.Layer):
    """y = x * exp(s) + t, per feature (not registered: found only through custom_objects)."""

    def build(self, input_shape):
        self.s = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="s")
        self.t = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="t")

    def call(self, x):
        return x * keras.ops.exp(self.s) + self.t


def custom_objects():
    return {"LearnedScale": LearnedScale}


def build_model(args):
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(16, activation="tanh", name="hidden")(LearnedScale(name="scale")(x))
    return keras.Model(x, keras.layers.Dense(1, name="y")(h), name="custom_scale")


def dataset(input_context, batch_size, args):
    w = tf.constant([[1.0], [-2.0], [0.5], [0.0], [3.0], [-1.0], [0.25], [2.0]])

    def make(i):
        x = tf.random.stateless_normal([batch_size, 8], seed=tf.stack([tf.constant(31, tf.int64), i]))
        return x, tf.tanh(tf.matmul(x, w) / 3.0)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return keras.optimizers.Adam(0.01)


def input_signature(args):
    return {"x": tf.TensorSpec([None, 8], tf.float32, name="x")}
