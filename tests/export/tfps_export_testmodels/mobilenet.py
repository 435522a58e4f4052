"""Test model: MobileNetV2 (alpha 0.35, 32x32 RGB, 10 classes, ``weights=None``): BatchNorm and depthwise
convolutions, the conv-net family. Synthetic images whose class sets the brightness of one of ten
patches, so a few steps of training move the model off its uniform start."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

SIZE, CLASSES = 32, 10


def build_model(args):
    model = keras.applications.MobileNetV2(
        input_shape=(SIZE, SIZE, 3),
        alpha=float(args.get("alpha", 0.35)),
        weights=None,
        include_top=True,
        classes=CLASSES,
        name="mobilenet_v2",
    )
    for layer in model.layers:  # moving statistics that follow a test's few dozen steps (default 0.999)
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = float(args.get("bn_momentum", 0.8))
    return model


def _images(seed, n):
    labels = tf.random.stateless_uniform([n], seed=seed, minval=0, maxval=CLASSES, dtype=tf.int64)
    noise = tf.random.stateless_uniform([n, SIZE, SIZE, 3], seed=seed + 1, minval=-0.3, maxval=0.3)
    rows = tf.cast(labels // 5, tf.int32) * 16
    cols = tf.cast(labels % 5, tf.int32) * 6
    yy = tf.range(SIZE)[None, :, None]
    xx = tf.range(SIZE)[None, None, :]
    patch = (
        (yy >= rows[:, None, None])
        & (yy < rows[:, None, None] + 16)
        & (xx >= cols[:, None, None])
        & (xx < cols[:, None, None] + 6)
    )
    return noise + 0.7 * tf.cast(patch, tf.float32)[..., None], labels


def dataset(input_context, batch_size, args):
    shard = input_context.input_pipeline_id if input_context is not None else 0

    def make(i):
        return _images(tf.stack([tf.cast(shard, tf.int64) + 17, i]), batch_size)

    return tf.data.Dataset.counter().map(make)


def loss(labels, predictions):
    return keras.losses.sparse_categorical_crossentropy(labels, predictions)


def optimizer(args):
    return keras.optimizers.Adam(float(args.get("learning_rate", 0.003)))


def input_signature(args):
    return {"image": tf.TensorSpec([None, SIZE, SIZE, 3], tf.float32, name="image")}


def sample_inputs(n, args):
    images, _ = _images(tf.constant([99, 0], tf.int64), n)
    return {"image": np.asarray(images)}
