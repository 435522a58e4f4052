"""Keras 3 on PS-partitioned variables (ParameterServerStrategy ``variable_partitioner``).

Keras 3 layers do get a ``ShardedVariable`` (one shard per PS) behind their ``keras.Variable``
when a partitioner applies, but three things in Keras 3 / TF 2.21 do not handle it:

1. ``GradientTape`` cannot differentiate against it (it has no ``handle``);
2. the Keras 3 optimizer's distributed update colocates with it (``NotImplementedError``);
3. checkpointing it through ``keras.Variable._serialize_to_tensors`` fails (no ``device``).

The trainer therefore differentiates and optimizes per shard (:func:`optimizer_variables`) and
saves a sharded Keras variable through the ShardedVariable's own slice saveables
(:func:`make_checkpointable`): the checkpoint holds one full tensor per variable, written as
slices, so it restores into a sharded model (resume) and an unsharded one (export, evaluator).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import keras
import tensorflow as tf
from tensorflow.python.distribute.sharded_variable import ShardedVariable  # no public alias in TF 2.21

from tfps_wire.job_settings import PartitionerSettings

from . import partitioning


def backing(v: Any) -> Any:
    """The TensorFlow variable behind a Keras 3 variable (others as they are)."""
    return v.value if isinstance(v, keras.Variable) else v


def is_sharded(v: Any) -> bool:
    return isinstance(backing(v), ShardedVariable)


def optimizer_variables(variables: Iterable[Any]) -> list[Any]:
    """``variables`` with every sharded one replaced by its shards (plain variables, one per PS)."""
    out: list[Any] = []
    for v in variables:
        tv = backing(v)
        out.extend(tv.variables if isinstance(tv, ShardedVariable) else [v])
    return out


_classes: dict[type, type] = {}


def _checkpointable_class(cls: type) -> type:
    if cls not in _classes:

        def _gather_saveables_for_checkpoint(self: Any) -> Any:
            return self.value._gather_saveables_for_checkpoint()

        # Defining _gather_saveables_for_checkpoint on the subclass (and not _serialize_to_tensors)
        # makes TF's saver take the legacy saveable path for these variables only.
        _classes[cls] = type(
            f"Sharded{cls.__name__}",
            (cls,),
            {
                "_gather_saveables_for_checkpoint": _gather_saveables_for_checkpoint,
            },
        )
    return _classes[cls]


def make_checkpointable(variables: Iterable[Any]) -> int:
    """Let ``tf.train.Checkpoint`` save/restore Keras variables backed by a ShardedVariable; return how many."""
    n = 0
    for v in variables:
        if isinstance(v, keras.Variable) and is_sharded(v):
            v.__class__ = _checkpointable_class(type(v))
            n += 1
    return n


def placement(variables: Iterable[Any]) -> dict[str, list[str]]:
    """Variable path -> devices of its shards (one entry for unsharded variables)."""
    out: dict[str, list[str]] = {}
    for v in variables:
        tv = backing(v)
        name = getattr(v, "path", None) or v.name
        out[name] = [s.device for s in tv.variables] if isinstance(tv, ShardedVariable) else [tv.device]
    return out


def partitioner(settings: PartitionerSettings | None) -> Any:
    """The ``tf.distribute.experimental.partitioners`` object the job's settings name; None for none."""
    if settings is None:
        return None
    name, kwargs = partitioning.constructor(settings)
    return getattr(tf.distribute.experimental.partitioners, name)(**kwargs)


def describe(variables: Iterable[Any]) -> list[str]:
    """One line per variable split into shards (:func:`.partitioning.split_line`), for the chief's log."""
    lines = []
    for v in variables:
        tv = backing(v)
        if isinstance(tv, ShardedVariable) and len(tv.variables) > 1:
            name = getattr(v, "path", None) or v.name
            dtype = tf.as_dtype(tv.dtype)
            lines.append(
                partitioning.split_line(
                    name,
                    [int(d) for d in tv.shape],
                    dtype.name,
                    dtype.size,
                    [int(s.shape[0]) for s in tv.variables],
                    [s.device for s in tv.variables],
                )
            )
    return lines


__all__ = [
    "backing",
    "describe",
    "is_sharded",
    "make_checkpointable",
    "optimizer_variables",
    "partitioner",
    "placement",
]
