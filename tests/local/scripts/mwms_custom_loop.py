"""A MultiWorkerMirroredStrategy program with a custom training loop, as TFJob users write them: no tfps import.

Every worker (and the chief, when the cluster has one) runs it. Each replica reads its own shard of a
synthetic ``tf.data`` pipeline (``distribute_datasets_from_function``), a ``tf.function`` step runs
``strategy.run`` and all-reduces the loss. A ``tf.train.CheckpointManager`` writes every ``--checkpoint-every``
steps: on the lead (the chief, else worker 0) into the real checkpoint directory, elsewhere into a temporary
directory deleted after each save (every task must save: the variables are mirrored). At start every task
restores the latest checkpoint of the real directory, so a restarted job continues where it left off. At the
end every task saves the model with ``model.save(dir)``, the lead into the model directory. Directories come from flags.
"""

import argparse
import shutil
import tempfile

import numpy as np
import tensorflow as tf

FEATURES = 8
W_TRUE = np.linspace(1.0, -1.0, FEATURES).astype("float32").reshape(FEATURES, 1)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=32, help="per replica")
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--model-dir", required=True)
    return p.parse_args()


def is_lead(resolver):
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    has_chief = "chief" in resolver.cluster_spec().jobs
    return task_type == "chief" or (task_type == "worker" and task_id == 0 and not has_chief)


def write_dir(real_dir, resolver):
    if is_lead(resolver):
        return real_dir
    return tempfile.mkdtemp(prefix=f"workertemp_{resolver.task_type}_{resolver.task_id}_")


def make_dataset_fn(global_batch_size):
    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(global_batch_size)
        x = tf.random.stateless_normal([4096, FEATURES], seed=[23, 0])
        y = tf.matmul(x, W_TRUE) - 0.5
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds.shuffle(4096, seed=23).repeat().batch(batch).prefetch(2)

    return dataset_fn


def main():
    args = parse_args()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    global_batch_size = args.batch_size * strategy.num_replicas_in_sync
    print(f"task {resolver.task_type}-{resolver.task_id}: {strategy.num_replicas_in_sync} replicas", flush=True)

    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Input((FEATURES,), name="x"),
                tf.keras.layers.Dense(16, activation="relu"),
                tf.keras.layers.Dense(1),
            ]
        )
        optimizer = tf.keras.optimizers.SGD(args.learning_rate)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    latest = tf.train.latest_checkpoint(args.checkpoint_dir)
    if latest:
        checkpoint.restore(latest)
        print(f"restored {latest} at step {int(step.numpy())}", flush=True)
    else:
        print("starting at step 0", flush=True)
    ckpt_dir = write_dir(args.checkpoint_dir, resolver)
    manager = tf.train.CheckpointManager(checkpoint, ckpt_dir, max_to_keep=3)

    iterator = iter(strategy.distribute_datasets_from_function(make_dataset_fn(global_batch_size)))

    @tf.function
    def train_step(iterator):
        def step_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                per_example = tf.reduce_mean(tf.square(model(x, training=True) - y), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        losses = strategy.run(step_fn, args=(next(iterator),))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        step.assign_add(1)
        return loss

    while int(step.numpy()) < args.steps:
        loss = train_step(iterator)
        current = int(step.numpy())
        if current % args.checkpoint_every == 0 or current == args.steps:
            path = manager.save(checkpoint_number=current)
            print(f"step {current}: loss {float(loss):.4f}; saved {path}", flush=True)
            if ckpt_dir != args.checkpoint_dir:
                shutil.rmtree(ckpt_dir, ignore_errors=True)

    path = write_dir(args.model_dir, resolver)
    model.save(path)  # a Keras SavedModel (tf.saved_model.save would lose the Keras metadata the export reads)
    if path != args.model_dir:
        shutil.rmtree(path, ignore_errors=True)
    else:
        print(f"saved the model to {path}", flush=True)


if __name__ == "__main__":
    main()
