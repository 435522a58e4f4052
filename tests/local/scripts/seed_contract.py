"""A contract module for the seed program's model, used only to export its checkpoints: the same
tf_keras Sequential as examples/seed/train.py, restored from the checkpoint's ``model`` key."""

import tensorflow as tf
import tf_keras

FEATURES = 8


def build_model(args):
    return tf_keras.Sequential(
        [tf_keras.layers.Dense(16, activation="relu", input_shape=(FEATURES,)), tf_keras.layers.Dense(1)]
    )


def dataset(input_context, batch_size, args):
    x = tf.random.stateless_normal([1024, FEATURES], seed=[7, 0])
    return tf.data.Dataset.from_tensor_slices((x, tf.reduce_sum(x, axis=1, keepdims=True))).repeat().batch(batch_size)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return tf_keras.optimizers.SGD(0.05)


def input_signature(args):
    return {"features": tf.TensorSpec([None, FEATURES], tf.float32)}
