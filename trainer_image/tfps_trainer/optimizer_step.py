"""The optimizer's step under ParameterServerStrategy: an atomic counter, set to the global step at checkpoints.

A Keras 3 optimizer counts its updates in ``iterations`` with ``assign(iterations + 1)``: a read and a
write of the variable on the PS. Workers that apply updates at the same time race, and increments are
lost (1 PS, 2 workers: 4,614 after 6,300 steps). Learning-rate schedules and Adam's bias correction
read that counter, so they would see a step behind the real one. :func:`count_atomically` makes the
counter's ``assign_add`` the PS's own atomic add (one op instead of a read and a write: no extra round
trip), which counts every update. A closure re-run after a worker failure adds its steps again, so at
each checkpoint the chief sets the counter to the exact global step (:func:`sync`).

``tf_keras`` (Keras 2) optimizers already count with an atomic ``assign_add`` and are left alone.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

_classes: dict[type, type] = {}


def _atomic_class(cls: type) -> type:
    if cls not in _classes:

        def assign_add(self: Any, value: Any) -> Any:
            return self._value.assign_add(tf.cast(value, self._value.dtype))

        _classes[cls] = type(f"AtomicCounter{cls.__name__}", (cls,), {"assign_add": assign_add})
    return _classes[cls]


def counters(optimizer: Any) -> list[Any]:
    """The Keras 3 step counters of ``optimizer`` and of the optimizers it wraps (loss scaling)."""
    out: list[Any] = []
    while isinstance(optimizer, keras.optimizers.Optimizer):
        counter = getattr(optimizer, "_iterations", None)
        if isinstance(counter, keras.Variable):
            out.append(counter)
        optimizer = getattr(optimizer, "inner_optimizer", None)
    return out


def count_atomically(optimizer: Any) -> Any:
    """Make the Keras 3 step counters of ``optimizer`` count with the PS's atomic add.

    Returns the counter that counts one per training step (None for a ``tf_keras`` optimizer, and for
    a wrapper such as a loss-scale optimizer, whose inner optimizer skips steps on purpose).
    """
    found = counters(optimizer)
    for counter in found:
        if not type(counter).__name__.startswith("AtomicCounter"):
            counter.__class__ = _atomic_class(type(counter))
    wrapper = getattr(optimizer, "inner_optimizer", None) is not None
    return found[0] if found and not wrapper else None


def sync(counter: Any, step: int) -> int | None:
    """Set ``counter`` to ``step`` (the chief's exact count) if it differs; return what it held (None: no counter)."""
    if counter is None:
        return None
    before = int(counter.numpy())
    if before != step:
        counter.assign(step)
    return before
