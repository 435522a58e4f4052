"""The :mod:`~tfps_trainer.examples.linear` problem with a legacy ``tf_keras`` (Keras 2) model.

Shows that the contract also takes tf_keras models and optimizers: same data, loss and signature.
"""

from __future__ import annotations

import tf_keras

from .linear import INPUT, _features, dataset, input_signature, loss, metrics, sample_inputs

__all__ = ["build_model", "dataset", "input_signature", "loss", "metrics", "optimizer", "sample_inputs"]


def build_model(args: dict) -> tf_keras.Model:
    inputs = tf_keras.Input(shape=(_features(args),), name=INPUT, dtype="float32")
    x = inputs
    hidden = int(args.get("hidden", 0))
    if hidden > 0:
        x = tf_keras.layers.Dense(hidden, activation="relu", name="hidden")(x)
    outputs = tf_keras.layers.Dense(1, name="output")(x)
    return tf_keras.Model(inputs={INPUT: inputs}, outputs=outputs, name="linear_tf_keras")


def optimizer(args: dict) -> tf_keras.optimizers.Optimizer:
    return tf_keras.optimizers.SGD(learning_rate=float(args.get("learning_rate", 0.05)))
