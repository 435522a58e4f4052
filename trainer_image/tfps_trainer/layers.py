"""Layers for models whose parameters are partitioned over the parameter servers.

:class:`ShardedEmbedding` is ``keras.layers.Embedding`` with a lookup that stays sharded. With a job
``variablePartitioner``, ParameterServerStrategy creates a large table as a ``ShardedVariable`` (one
shard per PS, or as the partitioner says). Keras 3's ``Embedding`` looks rows up with ``ops.take``,
which first converts the whole table to one tensor: every step pulls every shard from every PS.
``tf.nn.embedding_lookup`` on the ShardedVariable gathers from each shard on its own PS, so a step moves
only the rows it uses and the gradient reaches each shard as ``IndexedSlices``, which the optimizers
of :mod:`tfps_trainer.optimizers` apply to those rows only.

A ShardedVariable holds contiguous row ranges (shard 0 the first rows, and so on). Vocabularies are
usually sorted by frequency (``StringLookup``/``IntegerLookup`` give the most frequent tokens the
lowest ids), so the hot rows all sit on the first PS, which then limits the job. ``spread_rows=True``
stores row ``r`` at position ``(r * a) mod input_dim`` (:mod:`tfps_trainer.row_spread`), which puts
any range of consecutive ids about evenly on every shard, for any number of shards.

Outside a partitioned job (one process, the evaluator, the exporter) the table is one variable and
the layer is a plain embedding: SavedModel, TFLite and ONNX export it as a gather (after an int64
multiply and modulo with ``spread_rows``). It keeps ``Embedding``'s arguments; without
``spread_rows`` it keeps its weights too (a model saved with either loads into the other). LoRA and
quantized modes are refused, since their lookups would read the whole table.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tfps_trainer import row_spread


@keras.saving.register_keras_serializable(package="tfps")
class ShardedEmbedding(keras.layers.Embedding):
    """``keras.layers.Embedding`` whose lookup stays sharded when the table is a ShardedVariable.

    ``spread_rows`` (default False): store row ``r`` at position ``(r * a) mod input_dim``, ``a``
    coprime to ``input_dim`` and fixed by it (:func:`tfps_trainer.row_spread.multiplier`), so that hot
    low ids are spread over all the shards instead of all landing on the first PS. The lookup maps
    ids to positions in int64 inside ``call``; an id outside ``[0, input_dim)`` maps outside the table
    (not onto another id's row), so TensorFlow's lookup fails on it as on ``Embedding``'s. ``input_dim``
    is at most :data:`tfps_trainer.row_spread.MAX_VOCAB`.

    Weight layout with ``spread_rows``: ``embeddings[p]`` is the vector of id ``r`` where ``p(r) = p``,
    so the weights are the plain table's rows in permuted order. They are not interchangeable with a
    plain ``Embedding``'s (or a ``ShardedEmbedding(spread_rows=False)``'s): loading one into the other
    gives a model that runs and answers wrongly. Convert with :func:`spread_table` and
    :func:`unspread_table`. Checkpoints of a spread layer restore into any number of shards: the
    stored table is just a table.
    """

    def __init__(self, *args: Any, spread_rows: bool = False, **kwargs: Any) -> None:
        if kwargs.get("lora_rank"):
            raise ValueError("ShardedEmbedding: lora_rank is not supported (its lookup reads the whole table)")
        super().__init__(*args, **kwargs)
        if not isinstance(spread_rows, bool):
            raise TypeError(f"ShardedEmbedding: spread_rows must be True or False (got {spread_rows!r})")
        self.spread_rows = spread_rows
        self._multiplier = row_spread.multiplier(self.input_dim) if spread_rows else 1

    def quantize(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("ShardedEmbedding cannot be quantized: quantize the exported model instead")

    def positions(self, ids: Any) -> tf.Tensor:
        """Where the rows of ``ids`` are stored (int64; the ids themselves without ``spread_rows``)."""
        ids = tf.cast(ids, tf.int64)
        if not self.spread_rows:
            return ids
        vocab = tf.constant(self.input_dim, tf.int64)
        in_range = tf.math.floormod(ids, vocab)
        # ids - in_range is 0 for a valid id and a non-zero multiple of input_dim otherwise, so an
        # out-of-range id stays out of range rather than aliasing a real row.
        return tf.math.floormod(in_range * tf.constant(self._multiplier, tf.int64), vocab) + (ids - in_range)

    def call(self, inputs: Any) -> Any:
        table = self.embeddings.value if hasattr(self.embeddings, "value") else self.embeddings
        if self.spread_rows:
            ids = self.positions(inputs)
        else:
            ids = tf.cast(inputs, tf.int32) if inputs.dtype != tf.int64 else inputs
        return tf.nn.embedding_lookup(table, ids)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "spread_rows": self.spread_rows}


def _positions(vocab_size: int) -> np.ndarray:
    return np.arange(vocab_size, dtype=np.int64) * row_spread.multiplier(vocab_size) % vocab_size


def spread_table(table: np.ndarray) -> np.ndarray:
    """A plain embedding table (row ``r`` = id ``r``) in the layout of ``spread_rows=True``."""
    table = np.asarray(table)
    stored = np.empty_like(table)
    stored[_positions(len(table))] = table
    return stored


def unspread_table(stored: np.ndarray) -> np.ndarray:
    """The plain table (row ``r`` = id ``r``) of a ``spread_rows=True`` layer's weights."""
    stored = np.asarray(stored)
    return stored[_positions(len(stored))]


__all__ = ["ShardedEmbedding", "spread_table", "unspread_table"]
