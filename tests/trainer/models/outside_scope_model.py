"""The PS tutorial's trap: a Keras preprocessing layer built at module level, outside strategy.scope()."""

import keras
import tensorflow as tf

from tfps_trainer.examples import linear

LOOKUP = keras.layers.StringLookup(vocabulary=["a", "b", "c"])  # module level: its table lives on the chief

build_model = linear.build_model
loss = linear.loss
optimizer = linear.optimizer
input_signature = linear.input_signature


def dataset(input_context, batch_size, args):
    base = linear.dataset(input_context, batch_size, args)

    def add_token(x, y):
        ids = LOOKUP(tf.fill([batch_size], "b"))
        return {k: v + tf.cast(tf.reshape(ids, [-1, 1]), v.dtype) * 0 for k, v in x.items()}, y

    return base.map(add_token)
