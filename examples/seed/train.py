"""A classic TFJob-style parameter-server training program (no tfps imports).

Reads TF_CONFIG through TFConfigClusterResolver. PS and worker tasks start a tf.distribute.Server and
serve; the chief builds a ParameterServerStrategy, compiles and fits a tf_keras model under
strategy.scope(), checkpoints with tf.train.CheckpointManager (resuming from the latest one), writes
TensorBoard events, and saves the model at the end. The directories come from flags, as in a TFJob.
"""

import argparse

import numpy as np
import tensorflow as tf
import tf_keras as keras


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--checkpoint-dir", default="/tmp/ckpt")
    p.add_argument("--log-dir", default="/tmp/logs")
    p.add_argument("--model-dir", default="/tmp/model")
    return p.parse_args()


FEATURES = 8
W_TRUE = np.linspace(-1.0, 1.0, FEATURES).astype("float32").reshape(FEATURES, 1)


def dataset_fn(input_context, batch_size):
    seed = 1000 + (input_context.input_pipeline_id if input_context else 0)
    x = tf.random.stateless_normal([4096, FEATURES], seed=[seed, 0])
    y = tf.matmul(x, W_TRUE) + 0.5
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=seed).repeat().batch(batch_size)
    return ds.prefetch(2)


class SaveCheckpoint(keras.callbacks.Callback):
    def __init__(self, manager, step):
        super().__init__()
        self.manager, self.step = manager, step

    def on_epoch_end(self, epoch, logs=None):
        self.step.assign(self.model.optimizer.iterations)
        path = self.manager.save(checkpoint_number=int(self.step.numpy()))
        print(f"epoch {epoch + 1}: saved {path} (loss {logs.get('loss') if logs else None})", flush=True)


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
    if resolver.task_type == "evaluator":
        return

    strategy = tf.distribute.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = keras.Sequential(
            [keras.layers.Dense(16, activation="relu", input_shape=(FEATURES,)), keras.layers.Dense(1)]
        )
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse", steps_per_execution=10)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
        print(f"restored {manager.latest_checkpoint} at step {int(step.numpy())}", flush=True)
    initial_epoch = int(step.numpy()) // args.steps_per_epoch

    data = keras.utils.experimental.DatasetCreator(lambda ctx: dataset_fn(ctx, args.batch_size))
    model.fit(
        data,
        epochs=args.epochs,
        initial_epoch=initial_epoch,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[SaveCheckpoint(manager, step), keras.callbacks.TensorBoard(args.log_dir)],
        verbose=2,
    )
    model.save(args.model_dir)
    print(f"saved model to {args.model_dir}", flush=True)


if __name__ == "__main__":
    main()
