"""The optimizer's state in a checkpoint, in a layout that does not depend on how variables are sharded.

The trainer optimizes a partitioned variable per shard (:mod:`.sharding`), so a Keras 3 optimizer
holds one slot variable per shard and tracks them by position: saved as they are, a checkpoint written
with 2 shards cannot be restored with 3 (and every slot after the first sharded one moves). When the
model has sharded variables the checkpoint therefore saves :func:`state`: the step counter and learning
rate, and for each slot kind (``_accumulators``, ``_momentums``, ...) one entry per *model* variable, a
sharded slot being one ``ShardedVariable`` over its shards, written as slices of one full tensor (like
the model's tables), which restore into any number of shards.

A model without sharded variables keeps saving the optimizer itself (the layout of earlier versions);
so does a wrapper such as a loss-scale optimizer, whose inner optimizer holds the slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from . import sharding

# The step counter's key in the sharding-independent layout (a Keras optimizer saved as it is tracks
# it as ``_iterations``): present whatever slots the optimizer has (plain SGD has none).
MARKER = "optimizer/iterations/"


def _slot_lists(optimizer: Any, n: int) -> dict[str, list[Any]]:
    """Attributes of ``optimizer`` holding one variable per optimized variable (its slots), by name."""
    out = {}
    for name, value in sorted(vars(optimizer).items()):
        if name in ("_trainable_variables", "_variables") or isinstance(value, (str, bytes)):
            continue
        if isinstance(value, Sequence) and len(value) == n and all(isinstance(v, keras.Variable) for v in value):
            out[name.lstrip("_")] = list(value)
    return out


def state(optimizer: Any, model_variables: Sequence[Any]) -> tf.Module | None:
    """The optimizer's state keyed by model variable (see the module doc); None when it is saved as it is."""
    if not isinstance(optimizer, keras.optimizers.Optimizer) or getattr(optimizer, "inner_optimizer", None):
        return None
    if not any(sharding.is_sharded(v) for v in model_variables):
        return None
    shards = [len(sharding.optimizer_variables([v])) for v in model_variables]
    slots: dict[str, list[Any]] = {}
    for kind, held in _slot_lists(optimizer, sum(shards)).items():
        per_model_var, at = [], 0
        for v, n in zip(model_variables, shards):
            parts = [sharding.backing(s) for s in held[at : at + n]]
            at += n
            name = f"{getattr(v, 'path', v.name)}/{kind}"
            per_model_var.append(
                tf.__internal__.distribute.ShardedVariable(parts, name=name) if sharding.is_sharded(v) else parts[0]
            )
        slots[kind] = per_model_var
    module = tf.Module(name="optimizer_state")
    module.iterations = optimizer.iterations
    if isinstance(getattr(optimizer, "_learning_rate", None), keras.Variable):
        module.learning_rate = optimizer._learning_rate
    module.slots = slots
    return module


def saved_layout(path: str) -> str:
    """``"by_model_variable"`` when the checkpoint at ``path`` holds :func:`state`, else ``"optimizer"``."""
    return "by_model_variable" if any(n.startswith(MARKER) for n, _ in tf.train.list_variables(path)) else "optimizer"


__all__ = ["saved_layout", "state"]
