"""A parameter-server program as TFJob users wrote them for ``tf.keras`` of TF 2.x (Keras 2): no tfps import.

PS and workers serve; the chief builds a ParameterServerStrategy from TF_CONFIG, compiles a ``tf.keras``
model under its scope and calls ``model.fit`` on a ``tf.data`` dataset, with ``ModelCheckpoint`` (weights,
every epoch), ``TensorBoard``, a learning-rate schedule read through ``optimizer.lr``, resumes from its
latest checkpoint, and saves with ``model.save(dir)``. Directories come from flags.
"""

import argparse
import os

import numpy as np
import tensorflow as tf

FEATURES = 8
W_TRUE = np.linspace(-1.0, 1.0, FEATURES).astype("float32").reshape(FEATURES, 1)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--model-dir", required=True)
    return p.parse_args()


def dataset(batch_size):
    x = tf.random.stateless_normal([2048, FEATURES], seed=[7, 0])
    y = tf.matmul(x, W_TRUE) + 0.25
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=7).repeat().batch(batch_size).prefetch(2)


class HalveLearningRate(tf.keras.callbacks.Callback):
    """A Keras 2 idiom: the learning rate read and set through ``optimizer.lr``."""

    def on_epoch_end(self, epoch, logs=None):
        lr = self.model.optimizer.lr
        tf.keras.backend.set_value(lr, tf.keras.backend.get_value(lr) * 0.5)
        print(f"epoch {epoch + 1}: learning rate now {float(tf.keras.backend.get_value(lr)):.4f}", flush=True)


def main():
    args = parse_args()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=resolver.task_type,
            task_index=resolver.task_id,
            protocol=resolver.rpc_layer or "grpc",
            start=True,
        )
        server.join()
        return
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Input((FEATURES,), name="x"),
                tf.keras.layers.Dense(16, activation="relu"),
                tf.keras.layers.Dense(1),
            ]
        )
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse", steps_per_execution=10)
    prefix = os.path.join(args.checkpoint_dir, "weights")
    initial_epoch = 0
    latest = tf.train.latest_checkpoint(args.checkpoint_dir)
    if latest:
        model.load_weights(latest)
        initial_epoch = int(model.optimizer.iterations.numpy()) // args.steps_per_epoch
        print(f"resumed from {latest} at epoch {initial_epoch}", flush=True)
    model.fit(
        dataset(args.batch_size),
        epochs=args.epochs,
        initial_epoch=initial_epoch,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[
            tf.keras.callbacks.ModelCheckpoint(prefix, save_weights_only=True),
            tf.keras.callbacks.TensorBoard(args.log_dir),
            HalveLearningRate(),
        ],
        verbose=2,
    )
    model.save(args.model_dir)


if __name__ == "__main__":
    main()
