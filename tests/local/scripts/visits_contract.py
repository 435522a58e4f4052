"""A contract module that counts its visits: every element of its dataset carries its id (0 .. ``ids`` - 1,
then again, epoch after epoch), and the model adds one to ``visits[id]`` for each element it takes a training
step on. ``visits`` is a model variable, so a checkpoint holds the count of the elements its steps trained
on: the visitation a restart keeps (docs/data-service.md). Nothing in it knows about the tf.data service.

Model args: ``ids`` (int, 4096) elements per epoch; ``features`` (int, 8).
"""

import keras
import tensorflow as tf

VISITS = "visits"


def _ids(args):
    return int(args.get("ids", 4096))


def _features(args):
    return int(args.get("features", 8))


class VisitCounter(keras.layers.Layer):
    """Passes its features through; in training, counts the ids of the batch."""

    def __init__(self, ids, **kwargs):
        super().__init__(**kwargs)
        self.ids = ids
        self.visits = self.add_weight(name=VISITS, shape=(ids,), initializer="zeros", trainable=False)

    def call(self, features, ids, training=False):
        if training:
            counts = tf.math.bincount(tf.cast(ids, tf.int32), minlength=self.ids, maxlength=self.ids, dtype=tf.float32)
            self.visits.value.assign_add(counts)  # one atomic op on the PS (Keras reads, adds and assigns)
        return features


class VisitModel(keras.Model):
    def __init__(self, ids, **kwargs):
        super().__init__(**kwargs)
        self.counter = VisitCounter(ids)
        self.dense = keras.layers.Dense(1)

    def call(self, inputs, training=False):
        return self.dense(self.counter(inputs["features"], inputs["id"], training=training))


def build_model(args):
    return VisitModel(_ids(args))


def dataset(input_context, batch_size, args):
    n, d = _ids(args), _features(args)

    def element(i):
        x = tf.random.stateless_normal([d], seed=tf.stack([i, tf.constant(7, tf.int64)]))
        return {"features": x, "id": i}, tf.reduce_sum(x, keepdims=True)

    ds = tf.data.Dataset.range(n)
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.repeat().map(element).batch(batch_size, drop_remainder=True)


def loss(labels, predictions):
    return tf.reduce_mean(tf.square(labels - predictions), axis=-1)


def optimizer(args):
    return keras.optimizers.SGD(0.01)


def input_signature(args):
    return {"features": tf.TensorSpec([None, _features(args)], tf.float32), "id": tf.TensorSpec([None], tf.int64)}
