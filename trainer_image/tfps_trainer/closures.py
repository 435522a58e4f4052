"""The training closures the chief schedules: several training steps in one ``tf.function`` on a worker.

Each scheduled closure costs the chief, the coordinator and the worker a fixed overhead (a remote
function call and its result); running ``steps_per_closure`` steps inside one closure pays it once
for all of them. A closure of the full size runs a function with the count traced in; a shorter one
(before a checkpoint boundary or the target) runs a second function that takes the count as a tensor,
so neither is retraced per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

NUMERICS_TAG = "tfps: non-finite training loss"


def closure_size(scheduled: int, end: int, steps_per_closure: int) -> int:
    """Steps in the next closure: ``steps_per_closure``, or fewer so that ``end`` is hit exactly."""
    return min(steps_per_closure, end - scheduled)


class TrainClosures:
    """``schedule(coordinator, iterator, n)``: one closure of ``n`` training steps; its result is the
    mean loss of those steps (float32)."""

    def __init__(
        self,
        strategy: Any,
        model: Any,
        optimizer: Any,
        train_vars: list[Any],
        loss_fn: Callable[[Any, Any], Any],
        steps_per_closure: int,
        check_numerics: bool = False,
    ) -> None:
        self.steps_per_closure = steps_per_closure

        def replica_fn(batch: Any) -> tf.Tensor:
            features, labels = batch
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                loss = tf.reduce_mean(loss_fn(labels, predictions))
                if model.losses:
                    loss += tf.add_n(model.losses)
                if check_numerics:
                    loss = tf.debugging.check_numerics(loss, NUMERICS_TAG)
            grads = tape.gradient(loss, train_vars)
            optimizer.apply_gradients(zip(grads, train_vars))
            return loss

        def one_step(iterator: Any) -> tf.Tensor:
            return tf.cast(strategy.run(replica_fn, args=(next(iterator),)), tf.float32)

        def steps(iterator: Any, n: Any) -> tf.Tensor:
            total = tf.constant(0.0, tf.float32)
            for _ in tf.range(n):
                total += one_step(iterator)
            return total / tf.cast(n, tf.float32)

        def full_steps(iterator: Any) -> tf.Tensor:
            return steps(iterator, steps_per_closure)

        self._full = tf.function(one_step if steps_per_closure == 1 else full_steps)
        self._partial = tf.function(steps)
        self._counts: dict[int, tf.Tensor] = {}

    def schedule(self, coordinator: Any, iterator: Any, n: int) -> Any:
        """Schedule ``n`` (1 to ``steps_per_closure``) steps as one closure; return its RemoteValue."""
        if n == self.steps_per_closure:
            return coordinator.schedule(self._full, args=(iterator,))
        if n not in self._counts:
            self._counts[n] = tf.constant(n, tf.int32)
        return coordinator.schedule(self._partial, args=(iterator, self._counts[n]))
