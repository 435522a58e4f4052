"""The "medium" benchmark model as a ``tf_keras`` (Keras 2) model, for ``model.fit``: same data and loss."""

from __future__ import annotations

import tf_keras
from medium import CLASSES, FEATURES, INPUT, dataset, input_signature, loss

__all__ = ["build_model", "dataset", "input_signature", "loss", "optimizer"]


def build_model(args: dict) -> tf_keras.Model:
    inputs = tf_keras.Input(shape=(FEATURES,), name=INPUT, dtype="float32")
    x = tf_keras.layers.Dense(256, activation="relu", name="hidden1")(inputs)
    x = tf_keras.layers.Dense(256, activation="relu", name="hidden2")(x)
    outputs = tf_keras.layers.Dense(CLASSES, name="logits")(x)
    return tf_keras.Model(inputs={INPUT: inputs}, outputs=outputs, name="medium_tf_keras")


def optimizer(args: dict) -> tf_keras.optimizers.Optimizer:
    return tf_keras.optimizers.Adam(learning_rate=float(args.get("learning_rate", 1e-3)))
