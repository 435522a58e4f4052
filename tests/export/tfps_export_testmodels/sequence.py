"""Test model: a recurrent sequence classifier (``args.cell``: ``lstm`` or ``gru``) over 12 steps of 5
features; 3 classes by which third of the sequence has the largest mean of feature 0."""

from __future__ import annotations

import keras
import tensorflow as tf

STEPS, FEATURES, CLASSES = 12, 5, 3


def build_model(args):
    cell = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[args.get("cell", "lstm")]
    seq = keras.Input((STEPS, FEATURES), name="seq")
    x = cell(int(args.get("units", 16)), name=args.get("cell", "lstm"))(seq)
    return keras.Model(seq, keras.layers.Dense(CLASSES, activation="softmax", name="probs")(x), name="sequence")


def dataset(input_context, batch_size, args):
    shard = input_context.input_pipeline_id if input_context is not None else 0

    def make(i):
        x = tf.random.stateless_normal([batch_size, STEPS, FEATURES], seed=tf.stack([tf.cast(shard, tf.int64) + 5, i]))
        thirds = tf.reduce_mean(tf.reshape(x[:, :, 0], [batch_size, CLASSES, STEPS // CLASSES]), axis=-1)
        return x, tf.argmax(thirds, axis=-1)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return keras.losses.sparse_categorical_crossentropy(labels, predictions)


def optimizer(args):
    return keras.optimizers.Adam(0.01)


def input_signature(args):
    return {"seq": tf.TensorSpec([None, STEPS, FEATURES], tf.float32, name="seq")}
