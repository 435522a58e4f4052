"""How TensorFlow Serving picks what to load from a model base path, walked with TensorFlow's own file
system (a directory or ``gs://``), for tests that have no ``tensorflow_model_server`` binary.

TF Serving's file-system source reads the children of ``--model_base_path`` whose names are whole numbers
as the model's versions, and its default version policy (``latest``, one version) loads the highest one:
``<base>/<version>`` as a SavedModel (``saved_model.pb`` beside ``variables/``). A test then loads that
directory with ``tf.saved_model.load``, the loader TF Serving's SavedModel bundle is built on.
"""

from __future__ import annotations


def servable_version(base: str) -> tuple[int, str]:
    """The version TF Serving would load from ``base`` and its path; AssertionError when there is none."""
    import tensorflow as tf

    assert tf.io.gfile.isdir(base), f"{base}: no model base path"
    versions = [int(n.rstrip("/")) for n in tf.io.gfile.listdir(base) if n.rstrip("/").isdigit()]
    assert versions, f"{base}: no numbered version directory in {tf.io.gfile.listdir(base)}"
    version = max(versions)
    return version, f"{base.rstrip('/')}/{version}"
