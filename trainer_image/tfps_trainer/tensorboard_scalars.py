"""TensorBoard scalars without the ``tensorboard`` package (the trainer's own loop does not need it;
script-mode programs get it in the image for their ``tf.summary`` / TensorBoard callback).

``tf.summary.scalar`` needs the tensorboard package; the raw ``tf.summary.write`` op with the
``scalars`` plugin metadata produces the same event records that TensorBoard reads.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def scalar(name: str, value: float, step: int) -> None:
    """Write one scalar with the current default writer."""
    tf.summary.write(name, tf.constant(float(value), tf.float32), step=step, metadata=_SCALAR_METADATA)
