"""A MultiWorkerMirroredStrategy program as TFJob users write them for ``tf.keras`` (Keras 2): no tfps import.

Every worker (and the chief, when the cluster has one) runs this same program: the strategy reads TF_CONFIG,
the workers train one model in lock step with all-reduce, each on its shard of a synthetic ``tf.data``
dataset. ``BackupAndRestore`` lets a restarted job continue from the last finished epoch;
``ModelCheckpoint`` writes the weights (with the optimizer, so the step) every epoch. At the end every task
calls ``model.save``: the lead (the chief, else worker 0) into the real model directory, the others into a
temporary directory they delete, TensorFlow's write-path rule for multi-worker saving. Directories come from
flags.

``--pid-dir DIR`` (for tests): each task writes its pid to ``DIR/<type>-<index>.pid`` on start.
"""

import argparse
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

FEATURES = 8
W_TRUE = np.linspace(-1.0, 1.0, FEATURES).astype("float32").reshape(FEATURES, 1)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps-per-epoch", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=32, help="per worker; the global batch is this times workers")
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--backup-dir", default=None, help="BackupAndRestore's directory; default <checkpoint-dir>/backup")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--pid-dir", default=None)
    return p.parse_args()


def is_lead(resolver):
    """The task that writes the real files: the chief, else worker 0 (TensorFlow's rule)."""
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:  # not distributed
        return True
    has_chief = "chief" in resolver.cluster_spec().jobs
    return task_type == "chief" or (task_type == "worker" and task_id == 0 and not has_chief)


def write_dir(real_dir, resolver):
    """``real_dir`` on the lead; a fresh temporary directory elsewhere (deleted after writing)."""
    if is_lead(resolver):
        return real_dir
    return tempfile.mkdtemp(prefix=f"workertemp_{resolver.task_type}_{resolver.task_id}_")


def dataset(global_batch_size):
    x = tf.random.stateless_normal([4096, FEATURES], seed=[11, 0])
    y = tf.matmul(x, W_TRUE) + 0.25
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=11).repeat().batch(global_batch_size)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options).prefetch(2)


class ReportStart(tf.keras.callbacks.Callback):
    """Says which step training starts from (after BackupAndRestore, listed before it, restored its backup)."""

    def on_train_begin(self, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step:
            print(f"resumed from the backup at step {step}", flush=True)
        else:
            print("starting at step 0", flush=True)

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        print(f"epoch {epoch + 1}: step {int(self.model.optimizer.iterations.numpy())}, loss {loss:.4f}", flush=True)


def main():
    args = parse_args()
    # the strategy first: it starts this task's collective server before any other op runs
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    if args.pid_dir:
        os.makedirs(args.pid_dir, exist_ok=True)
        with open(os.path.join(args.pid_dir, f"{resolver.task_type}-{resolver.task_id}.pid"), "w") as f:
            f.write(str(os.getpid()))
    workers = strategy.num_replicas_in_sync
    print(f"task {resolver.task_type}-{resolver.task_id}: {workers} replicas in sync", flush=True)

    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Input((FEATURES,), name="x"),
                tf.keras.layers.Dense(16, activation="relu"),
                tf.keras.layers.Dense(1),
            ]
        )
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")

    backup_dir = args.backup_dir or os.path.join(args.checkpoint_dir, "backup")
    model.fit(
        dataset(args.batch_size * workers),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[
            # the backup first: once the epoch's weights checkpoint exists, so does its backup
            tf.keras.callbacks.BackupAndRestore(backup_dir),
            tf.keras.callbacks.ModelCheckpoint(os.path.join(args.checkpoint_dir, "weights"), save_weights_only=True),
            ReportStart(),
        ],
        verbose=2,
    )

    path = write_dir(args.model_dir, resolver)
    model.save(path)
    if path != args.model_dir:
        shutil.rmtree(path, ignore_errors=True)
    else:
        print(f"saved the model to {path}", flush=True)


if __name__ == "__main__":
    main()
