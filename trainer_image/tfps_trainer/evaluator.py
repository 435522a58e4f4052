"""The evaluator: evaluates every new checkpoint; exits after evaluating the final one.

It is not part of the training cluster (its TF_CONFIG names only itself): it builds the model
locally, restores ``model`` and ``step`` from each new checkpoint (``expect_partial``), runs
``eval_batches`` batches of the model's ``eval_dataset(batch_size, args)`` (optional contract
function; default ``dataset(None, batch_size, args)``) and reports the mean loss and the module's
``metrics()`` on its progress endpoint and in TensorBoard (``<root>/tensorboard/eval``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import tensorflow as tf

from tfps_wire.job_settings import JobSettings

from . import checkpoints, modelio, tensorboard_scalars
from .contract import ModelContract
from .status_server import Progress

POLL_SECONDS = 1.0


class Evaluator:
    def __init__(self, settings: JobSettings, contract: ModelContract, progress: Progress) -> None:
        self.settings, self.contract, self.progress = settings, contract, progress
        args = dict(settings.model_args)
        self.model = modelio.build(contract, args)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        self.checkpoint = tf.train.Checkpoint(model=self.model, step=self.step)
        eval_fn = contract.fn("eval_dataset")
        if eval_fn is not None:
            ds = modelio.call(contract, "eval_dataset", eval_fn, settings.batch_size, args)
        else:
            ds = modelio.call(contract, "dataset", contract.dataset, None, settings.batch_size, args)
        self.dataset = ds.take(settings.eval_batches)
        self.writer = tf.summary.create_file_writer(os.path.join(settings.paths.tensorboard, "eval"))
        self._eval_batch = self._make_eval_batch()

    def _make_eval_batch(self) -> Any:
        model, loss_fn, metrics_fn = self.model, self.contract.loss, self.contract.fn("metrics")

        @tf.function
        def eval_batch(features: Any, labels: Any) -> dict[str, tf.Tensor]:
            predictions = model(features, training=False)
            out = {"loss": tf.reduce_mean(loss_fn(labels, predictions))}
            if metrics_fn is not None:
                out.update({k: tf.cast(v, tf.float32) for k, v in metrics_fn(labels, predictions).items()})
            return out

        return eval_batch

    def evaluate(self, path: str) -> dict[str, float]:
        self.checkpoint.restore(path).expect_partial()
        totals: dict[str, float] = {}
        n = 0
        for features, labels in self.dataset:
            for k, v in self._eval_batch(features, labels).items():
                totals[k] = totals.get(k, 0.0) + float(v)
            n += 1
        return {k: v / max(n, 1) for k, v in totals.items()}

    def run(self) -> str:
        directory, target = self.settings.paths.checkpoints, self.settings.steps
        assert target is not None  # __main__ runs a model module only with a target step
        seen: str | None = None
        while True:
            path = checkpoints.latest(directory)
            if path is None or path == seen:
                time.sleep(POLL_SECONDS)
                continue
            try:
                results = self.evaluate(path)
            except tf.errors.NotFoundError:  # rotated away by the chief while we read it: take the next
                seen = None
                continue
            seen = path
            step = int(self.step.numpy())
            info = checkpoints.info_for(path) if tf.io.gfile.exists(path + ".index") else None
            self.progress.update(
                step=step,
                loss=results.get("loss"),
                metrics=results,
                checkpoint=info,
                message=f"evaluated checkpoint step {step}",
            )
            with self.writer.as_default():
                for k, v in results.items():
                    tensorboard_scalars.scalar(k, v, step)
            self.writer.flush()
            print(
                f"tfps-trainer evaluator: step {step} " + " ".join(f"{k}={v:.6g}" for k, v in sorted(results.items())),
                flush=True,
            )
            if step >= target:
                return f"evaluated final checkpoint step {step}: " + ", ".join(
                    f"{k}={v:.6g}" for k, v in sorted(results.items())
                )


def run(settings: JobSettings, contract: ModelContract, progress: Progress) -> str:
    return Evaluator(settings, contract, progress).run()
