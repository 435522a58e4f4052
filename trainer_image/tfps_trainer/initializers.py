"""Initial values of partitioned variables drawn shard by shard, each on its own PS.

ParameterServerStrategy creates a partitioned variable one shard at a time, on the shard's PS, and asks
the initial value for just that shard (``partition_shape``, ``partition_offset``) when it knows the
variable's shape. Keras 3 creates its variables without a shape and with a function that takes no
arguments, so the strategy computes the *whole* table on the chief and sends each PS its slice: a
20,000,000 x 32 table costs the chief 2.6 GB and each PS a received copy of its rows besides the
variable.

:func:`install` makes the Keras variables of this process offer a per-shard initial value where the
initializer allows it: constants as they are; random initializers draw the shard's rows with a seed of
their own (derived from the initializer's seed and the shard's offset, so shards are not copies of each
other); variance-scaling initializers (Glorot, He, LeCun) keep the scale of the *whole* variable's fans.
Other initializers (orthogonal, identity, custom) return the whole value, which TensorFlow slices, as
before. A random table so drawn has the same distribution as one drawn whole, not the same numbers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf
from keras import initializers as ki
from keras.src.backend.tensorflow.core import Variable as TFVariable  # no public hook for the initial value
from keras.src.initializers.random_initializers import compute_fans

_SAME_FOR_EVERY_SHARD = (ki.Zeros, ki.Ones, ki.Constant)
_BY_ELEMENT = (ki.RandomUniform, ki.RandomNormal, ki.TruncatedNormal)


def _shard_seed(seed: int, offset: Sequence[int]) -> int:
    return (int(seed) * 1_000_003 + int(offset[0]) + 1) % (2**31 - 1)


def _variance_scaling(init: Any, full_shape: Sequence[int], seed: int) -> Callable[..., Any]:
    """``init`` (a VarianceScaling) with its scale from ``full_shape``'s fans, drawing any shape."""
    fan_in, fan_out = compute_fans(full_shape, input_axes=init.input_axes, output_axes=init.output_axes)
    fan = {"fan_in": fan_in, "fan_out": fan_out}.get(init.mode, (fan_in + fan_out) / 2.0)
    scale = init.scale / max(1.0, fan)
    if init.distribution == "truncated_normal":
        return ki.TruncatedNormal(stddev=math.sqrt(scale) / 0.87962566103423978, seed=seed)
    if init.distribution == "untruncated_normal":
        return ki.RandomNormal(stddev=math.sqrt(scale), seed=seed)
    limit = math.sqrt(3.0 * scale)
    return ki.RandomUniform(minval=-limit, maxval=limit, seed=seed)


def for_shard(init: Any, full_shape: Sequence[int], offset: Sequence[int]) -> Callable[..., Any] | None:
    """An initializer that draws the shard at ``offset`` of a ``full_shape`` variable (None: it cannot)."""
    if isinstance(init, _SAME_FOR_EVERY_SHARD):
        return init
    seed = getattr(init, "seed", None)
    if not isinstance(seed, int):  # a SeedGenerator's state is not per shard
        return None
    if type(init) in _BY_ELEMENT:
        shard = copy.copy(init)
        shard.seed = _shard_seed(seed, offset)
        return shard
    if isinstance(init, ki.VarianceScaling):
        return _variance_scaling(init, full_shape, _shard_seed(seed, offset))
    return None


def initial_value(initializer: Any, shape: Sequence[int], dtype: Any) -> Callable[..., Any]:
    """The initial value ParameterServerStrategy calls once per shard (or without arguments: whole)."""

    def value(partition_shape: Sequence[int] | None = None, partition_offset: Sequence[int] | None = None) -> Any:
        if partition_shape is not None and partition_offset is not None:
            shard = for_shard(initializer, shape, partition_offset)
            if shard is not None:
                return shard(tuple(partition_shape), dtype=dtype)
        return initializer(shape, dtype=dtype)

    return value


def _initialize_with_initializer(self: Any, initializer: Any) -> None:
    # Keras' own call passes neither shape nor dtype, and without them the strategy computes the whole
    # initial value first (on the chief) and sends each PS its slice.
    self._value = tf.Variable(
        initial_value(initializer, self._shape, self._dtype),
        shape=self._shape,
        dtype=self._dtype,
        trainable=self.trainable,
        name=self.name,
        aggregation=self._map_aggregation(self.aggregation),
        synchronization=self._map_synchronization(self.synchronization),
    )


def install() -> None:
    """Keras variables created from now on in this process offer per-shard initial values."""
    TFVariable._initialize_with_initializer = _initialize_with_initializer


__all__ = ["for_shard", "initial_value", "install"]
