"""A small CNN classifying the 8x8 handwritten digits that scikit-learn ships (``load_digits``: 1,797
images, no download), with a fixed held-out test split.

Args: ``test_fraction`` (0.2), ``split_seed`` (0), ``filters`` (16), ``hidden`` (64), ``learning_rate``
(0.003). Pixels are scaled to [0, 1]. Each worker reads its own shard of the shuffled training split,
repeated; the evaluator and :func:`test_split` use the test split only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import keras
import numpy as np
import tensorflow as tf

INPUT = "image"
CLASSES = 10


@lru_cache(maxsize=4)
def _split(test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(round(len(labels) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return images[train], labels[train], images[test], labels[test]


def _data(args: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return _split(float(args.get("test_fraction", 0.2)), int(args.get("split_seed", 0)))


def train_split(args: dict) -> tuple[np.ndarray, np.ndarray]:
    x, y, _, _ = _data(args)
    return x, y


def test_split(args: dict) -> tuple[np.ndarray, np.ndarray]:
    """The held-out images and labels (never trained on)."""
    _, _, x, y = _data(args)
    return x, y


def build_model(args: dict) -> keras.Model:
    filters, hidden = int(args.get("filters", 16)), int(args.get("hidden", 64))
    image = keras.Input((8, 8, 1), name=INPUT)
    x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu", name="conv1")(image)
    x = keras.layers.Conv2D(2 * filters, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.MaxPooling2D(2, name="pool")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(hidden, activation="relu", name="hidden")(x)
    probs = keras.layers.Dense(CLASSES, activation="softmax", name="probs")(x)
    return keras.Model(image, probs, name="digits_cnn")


def dataset(input_context: tf.distribute.InputContext | None, batch_size: int, args: dict) -> tf.data.Dataset:
    x, y = train_split(args)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    seed = int(args.get("shuffle_seed", 1)) + (input_context.input_pipeline_id if input_context else 0)
    return ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat().batch(batch_size).prefetch(2)


def eval_dataset(batch_size: int, args: dict) -> tf.data.Dataset:
    x, y = test_split(args)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch_size)


def loss(labels: tf.Tensor, predictions: tf.Tensor) -> tf.Tensor:
    return keras.losses.sparse_categorical_crossentropy(labels, predictions)


def optimizer(args: dict) -> keras.optimizers.Optimizer:
    return keras.optimizers.Adam(float(args.get("learning_rate", 0.003)))


def input_signature(args: dict) -> dict[str, tf.TensorSpec]:
    return {INPUT: tf.TensorSpec([None, 8, 8, 1], tf.float32, name=INPUT)}


def metrics(labels: tf.Tensor, predictions: tf.Tensor) -> dict[str, Any]:
    hit = tf.cast(tf.equal(tf.argmax(predictions, -1), tf.cast(tf.reshape(labels, [-1]), tf.int64)), tf.float32)
    return {"accuracy": tf.reduce_mean(hit)}
