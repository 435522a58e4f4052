"""Test model: a lookup inside the model (``args.kind``: ``string`` for a StringLookup on a word, ``integer``
for an IntegerLookup on an id), then an embedding and a score. The target is a fixed value per token."""

from __future__ import annotations

import keras
import tensorflow as tf

WORDS = ["red", "green", "blue", "cyan", "magenta", "yellow"]
IDS = [3, 7, 11, 42, 64, 99]
VALUES = [0.5, -1.0, 2.0, 0.0, 1.5, -0.5]


def _integer(args):
    return args.get("kind", "string") == "integer"


def build_model(args):
    if _integer(args):
        token = keras.Input((1,), dtype="int64", name="token")
        ids = keras.layers.IntegerLookup(vocabulary=IDS, name="lookup")(token)
    else:
        token = keras.Input((1,), dtype="string", name="token")
        ids = keras.layers.StringLookup(vocabulary=WORDS, name="lookup")(token)
    # a wide embedding and a hidden layer: big enough for dynamic-range quantization to act on the weights
    x = keras.layers.Flatten()(keras.layers.Embedding(len(WORDS) + 1, int(args.get("dim", 64)), name="embed")(ids))
    x = keras.layers.Dense(int(args.get("hidden", 64)), activation="relu", name="hidden")(x)
    return keras.Model(token, keras.layers.Dense(1, name="score")(x), name="lookup_model")


def dataset(input_context, batch_size, args):
    vocab = tf.constant(IDS, tf.int64) if _integer(args) else tf.constant(WORDS)
    values = tf.constant(VALUES)
    shard = input_context.input_pipeline_id if input_context is not None else 0

    def make(i):
        pick = tf.random.stateless_uniform(
            [batch_size, 1],
            seed=tf.stack([tf.cast(shard, tf.int64) + 9, i]),
            minval=0,
            maxval=len(WORDS),
            dtype=tf.int64,
        )
        return tf.gather(vocab, pick), tf.gather(values, pick)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return keras.optimizers.Adam(0.05)


def input_signature(args):
    dtype = tf.int64 if _integer(args) else tf.string
    return {"token": tf.TensorSpec([None, 1], dtype, name="token")}
