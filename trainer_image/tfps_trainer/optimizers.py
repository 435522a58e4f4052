"""Optimizers that update an embedding table sparsely: only the rows a batch used, on the PS that holds them.

An embedding lookup's gradient is ``tf.IndexedSlices`` (the rows used and their gradients; per shard
when the table is partitioned). Keras 3's optimizers turn most of them into dense updates: Adagrad
takes ``sqrt`` over the whole accumulator, SGD with momentum and Adam decay every row of their slots,
FTRL rewrites every row. Each step then reads and writes the full table on the PS: O(vocabulary)
instead of O(batch).

The classes here are the Keras 3 optimizers of the same name with a sparse ``update_step`` for
``IndexedSlices`` gradients (dense gradients take the parent's path unchanged). Each sparse update
is one op on the variable's device: a ``ResourceSparseApply*`` kernel, or scatter ops for lazy Adam.
Duplicate ids in a batch are summed first, as the dense gradient sums them.

=============  ====================================================================================
``Adagrad``    Same result as Keras 3's dense update (rows a batch does not use have a zero gradient
               there too). The epsilon goes where TensorFlow's kernel puts it:
               ``lr * g / (sqrt(acc) + eps)`` for Keras' ``lr * g / sqrt(acc + eps)``.
``SGD``        Without momentum Keras 3's SGD is already sparse. With momentum the sparse update is
               lazy: a row's momentum decays only on the steps that use the row (TensorFlow 1's and
               Keras 2's sparse momentum).
``LazyAdam``   Adam whose moments are updated only for the rows used; bias correction by the global
               step. Neither Keras 3 nor tf_keras has one.
``Ftrl``       The FTRL-Proximal kernel on the rows used. Keras 3's dense FTRL recomputes every row
               from its linear slot on every step, so a row no batch used becomes 0 after the first
               step; here it keeps its value until a batch uses it.
=============  ====================================================================================

:func:`sparse_equivalent` says which optimizer the trainer may swap in for the one a model module
returns without changing its result (Keras 3's ``Adagrad``: done by default); :func:`dense_hint`
names the sparse variant for the others.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf


def _dedup(grad: tf.IndexedSlices) -> tuple[tf.Tensor, tf.Tensor]:
    """Values and indices with each index once (its rows summed), as a dense gradient would hold them."""
    unique, positions = tf.unique(grad.indices)
    values = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique)[0])
    return values, unique


def _handle(v: Any) -> Any:
    return (v.value if isinstance(v, keras.Variable) else v).handle


def _tf_var(v: Any) -> Any:
    return v.value if isinstance(v, keras.Variable) else v


@keras.saving.register_keras_serializable(package="tfps")
class Adagrad(keras.optimizers.Adagrad):
    """Keras 3 Adagrad; an ``IndexedSlices`` gradient updates only its rows (``ResourceSparseApplyAdagradV2``)."""

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> Any:
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        acc = self._accumulators[self._get_variable_index(variable)]
        values, indices = _dedup(gradient)
        dtype = variable.dtype
        return tf.raw_ops.ResourceSparseApplyAdagradV2(
            var=_handle(variable),
            accum=_handle(acc),
            lr=tf.cast(learning_rate, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(values, dtype),
            indices=indices,
            use_locking=False,
        )


@keras.saving.register_keras_serializable(package="tfps")
class SGD(keras.optimizers.SGD):
    """Keras 3 SGD; with momentum an ``IndexedSlices`` gradient updates only its rows and their momentum
    (``ResourceSparseApplyKerasMomentum``: lazy momentum)."""

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> Any:
        if not isinstance(gradient, tf.IndexedSlices) or not self.momentum:
            return super().update_step(gradient, variable, learning_rate)
        m = self.momentums[self._get_variable_index(variable)]
        values, indices = _dedup(gradient)
        dtype = variable.dtype
        return tf.raw_ops.ResourceSparseApplyKerasMomentum(
            var=_handle(variable),
            accum=_handle(m),
            lr=tf.cast(learning_rate, dtype),
            grad=tf.cast(values, dtype),
            indices=indices,
            momentum=tf.cast(self.momentum, dtype),
            use_locking=False,
            use_nesterov=self.nesterov,
        )


@keras.saving.register_keras_serializable(package="tfps")
class LazyAdam(keras.optimizers.Adam):
    """Adam whose ``IndexedSlices`` updates touch only the rows used: their two moments and their values.

    Dense gradients are Keras 3's Adam. ``amsgrad`` is not supported for sparse gradients (its maximum
    would have to be kept per row lazily too): it is refused when the optimizer is built.
    """

    def build(self, variables: Any) -> None:
        if self.amsgrad:
            raise ValueError("LazyAdam: amsgrad=True is not supported (use keras.optimizers.Adam)")
        super().build(variables)

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> Any:
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        i = self._get_variable_index(variable)
        m, v = _tf_var(self._momentums[i]), _tf_var(self._velocities[i])
        dtype = variable.dtype
        values, indices = _dedup(gradient)
        values = tf.cast(values, dtype)
        step = tf.cast(self.iterations + 1, dtype)
        b1, b2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        lr = tf.cast(learning_rate, dtype) * tf.sqrt(1 - tf.pow(b2, step)) / (1 - tf.pow(b1, step))
        m_rows = b1 * tf.gather(m, indices) + (1 - b1) * values
        v_rows = b2 * tf.gather(v, indices) + (1 - b2) * tf.square(values)
        update = lr * m_rows / (tf.sqrt(v_rows) + tf.cast(self.epsilon, dtype))
        return tf.group(
            m.scatter_update(tf.IndexedSlices(m_rows, indices)),
            v.scatter_update(tf.IndexedSlices(v_rows, indices)),
            _tf_var(variable).scatter_sub(tf.IndexedSlices(update, indices)),
        )


@keras.saving.register_keras_serializable(package="tfps")
class Ftrl(keras.optimizers.Ftrl):
    """Keras 3 FTRL; an ``IndexedSlices`` gradient updates only its rows (``ResourceSparseApplyFtrlV2``)."""

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> Any:
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        i = self._get_variable_index(variable)
        dtype = variable.dtype
        lr = tf.cast(learning_rate, dtype)
        values, indices = _dedup(gradient)
        # Keras folds beta into the L2 strength; the kernel's quadratic term is 2 * l2.
        l2 = tf.cast(self.l2_regularization_strength, dtype) + tf.cast(self.beta, dtype) / (2.0 * lr)
        return tf.raw_ops.ResourceSparseApplyFtrlV2(
            var=_handle(variable),
            accum=_handle(self._accumulators[i]),
            linear=_handle(self._linears[i]),
            grad=tf.cast(values, dtype),
            indices=indices,
            lr=lr,
            l1=tf.cast(self.l1_regularization_strength, dtype),
            l2=l2,
            l2_shrinkage=tf.cast(self.l2_shrinkage_regularization_strength, dtype),
            lr_power=tf.cast(self.learning_rate_power, dtype),
            use_locking=False,
        )


SPARSE = (Adagrad, SGD, LazyAdam, Ftrl)

# Keras 3 classes whose sparse variant gives the same result: the trainer swaps it in.
_EQUIVALENT: dict[type, type] = {keras.optimizers.Adagrad: Adagrad}
# Keras 3 classes with a sparse variant whose result differs on rows a batch did not use.
_VARIANT: dict[type, str] = {
    keras.optimizers.SGD: "tfps_trainer.optimizers.SGD (lazy momentum)",
    keras.optimizers.Adam: "tfps_trainer.optimizers.LazyAdam",
    keras.optimizers.Ftrl: "tfps_trainer.optimizers.Ftrl",
}


def updates_sparsely(optimizer: Any) -> bool | None:
    """True: ``IndexedSlices`` gradients update only their rows; False: densely; None: not known
    (a tf_keras or user-defined optimizer)."""
    cls = type(optimizer)
    if isinstance(optimizer, SPARSE):
        return True
    if cls is keras.optimizers.SGD:
        return not optimizer.momentum
    if cls in _EQUIVALENT or cls in _VARIANT:
        return False
    return None


def sparse_equivalent(optimizer: Any) -> type | None:
    """Turn ``optimizer`` (not yet built) into its sparse class in place when that gives the same result;
    return the class it had, or None when it is left as it is."""
    before = type(optimizer)
    cls = _EQUIVALENT.get(before)
    if cls is None or getattr(optimizer, "built", False):
        return None
    optimizer.__class__ = cls
    return before


def describe(optimizer: Any, swapped_from: type | None = None) -> str:
    """One line for the chief's log: how ``optimizer`` updates embedding rows."""
    name = type(optimizer).__name__
    if swapped_from is not None:
        return (
            f"optimizer {swapped_from.__module__.split('.')[0]}.{swapped_from.__name__} -> "
            f"tfps_trainer.optimizers.{name}: embedding gradients update only the rows a batch used (same result)"
        )
    sparse = updates_sparsely(optimizer)
    if sparse:
        return f"optimizer {name}: embedding gradients update only the rows a batch used"
    if sparse is False:
        return (
            f"optimizer {name}: updates every row of an embedding table on every step (O(vocabulary)); "
            f"{dense_hint(optimizer)} updates only the rows a batch used"
        )
    return f"optimizer {type(optimizer).__module__.split('.')[0]}.{name}: sparse or dense updates not known to tfps"


def dense_hint(optimizer: Any) -> str | None:
    """For an optimizer that updates sparse gradients densely: the sparse class to use instead."""
    if updates_sparsely(optimizer) is not False:
        return None
    return _VARIANT.get(type(optimizer))


__all__ = ["SGD", "Adagrad", "Ftrl", "LazyAdam", "dense_hint", "describe", "sparse_equivalent", "updates_sparsely"]
