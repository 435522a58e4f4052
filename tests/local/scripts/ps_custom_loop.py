"""A ParameterServerStrategy program with a custom training loop, as TFJob users write them: no tfps import.

PS and workers start a ``tf.distribute.Server`` and serve. The chief builds a ``ParameterServerStrategy``
from TF_CONFIG and a ``ClusterCoordinator``; it creates a ``tf.keras`` model, its optimizer and a step
variable under the strategy's scope (the variables live on the parameter servers), gives every worker its own
synthetic dataset (``create_per_worker_dataset``), schedules ``--checkpoint-every`` step closures at a time
(``schedule``), waits for them (``join``), and checkpoints with a ``tf.train.CheckpointManager``, restoring
the latest checkpoint at start so a restarted job continues. At the end it saves the model with
``model.save(dir)``. Directories come from flags.
"""

import argparse

import numpy as np
import tensorflow as tf

FEATURES = 8
W_TRUE = np.linspace(-0.5, 1.5, FEATURES).astype("float32").reshape(FEATURES, 1)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--model-dir", required=True)
    return p.parse_args()


def dataset_fn(batch_size):
    x = tf.random.stateless_normal([4096, FEATURES], seed=[31, 0])
    y = tf.matmul(x, W_TRUE) + 0.1
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=31).repeat().batch(batch_size).prefetch(2)


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

    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
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
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
        print(f"restored {manager.latest_checkpoint} at step {int(step.numpy())}", flush=True)
    else:
        print("starting at step 0", flush=True)

    per_worker_dataset = coordinator.create_per_worker_dataset(lambda: dataset_fn(args.batch_size))
    per_worker_iterator = iter(per_worker_dataset)

    @tf.function
    def train_step(iterator):
        def step_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            step.assign_add(1)
            return loss

        return strategy.run(step_fn, args=(next(iterator),))

    while int(step.numpy()) < args.steps:
        chunk = min(args.checkpoint_every - int(step.numpy()) % args.checkpoint_every, args.steps - int(step.numpy()))
        losses = [coordinator.schedule(train_step, args=(per_worker_iterator,)) for _ in range(chunk)]
        coordinator.join()
        current = int(step.numpy())
        path = manager.save(checkpoint_number=current)
        print(f"step {current}: loss {float(losses[-1].fetch()):.4f}; saved {path}", flush=True)

    model.save(args.model_dir)
    print(f"saved the model to {args.model_dir}", flush=True)


if __name__ == "__main__":
    main()
