"""Test model: a Keras 3 classifier with a CUSTOM LAYER, two named inputs (float + int64 category).

Synthetic, deterministic data: class = argmax of a fixed linear map of the features plus a
per-category offset, so a few training steps give a meaningful (non-random) model.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

FEATURES, CATEGORIES, CLASSES = 16, 10, 4


@keras.saving.register_keras_serializable(package="tfps_tests")
class Gate(keras.layers.Layer):
    """x * sigmoid(x * w + b): a custom layer with its own weights."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")
        self.b = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="b")

    def call(self, x):
        return x * keras.ops.sigmoid(x * self.w + self.b)


def custom_objects():
    return {"Gate": Gate}


def build_model(args):
    hidden = int(args.get("hidden", 64))
    feats = keras.Input((FEATURES,), name="feats", dtype="float32")
    cat = keras.Input((1,), name="category", dtype="int64")
    emb = keras.layers.Flatten()(keras.layers.Embedding(CATEGORIES, 4, name="cat_embedding")(cat))
    x = keras.layers.Concatenate()([Gate(name="gate")(feats), emb])
    x = keras.layers.Dense(hidden, activation="relu", name="hidden")(x)
    probs = keras.layers.Dense(CLASSES, activation="softmax", name="probs")(x)
    return keras.Model({"feats": feats, "category": cat}, probs, name="custom_mlp")


def _problem():
    rng = np.random.default_rng(7)
    return rng.normal(size=(FEATURES, CLASSES)).astype(np.float32), rng.normal(size=(CATEGORIES, CLASSES)).astype(
        np.float32
    )


def dataset(input_context, batch_size, args):
    w, off = _problem()
    shard = input_context.input_pipeline_id if input_context is not None else 0

    def make(i):
        seed = tf.stack([tf.constant(11, tf.int64), tf.cast(shard, tf.int64) * (1 << 32) + i])
        x = tf.random.stateless_normal([batch_size, FEATURES], seed=seed)
        c = tf.random.stateless_uniform([batch_size, 1], seed=seed + 1, minval=0, maxval=CATEGORIES, dtype=tf.int64)
        logits = tf.matmul(x, w) + tf.gather(off, c[:, 0])
        return {"feats": x, "category": c}, tf.argmax(logits, axis=-1)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return keras.losses.sparse_categorical_crossentropy(labels, predictions)


def optimizer(args):
    return keras.optimizers.Adam(float(args.get("learning_rate", 0.01)))


def input_signature(args):
    return {
        "feats": tf.TensorSpec([None, FEATURES], tf.float32, name="feats"),
        "category": tf.TensorSpec([None, 1], tf.int64, name="category"),
    }
