"""Where a complete export holds its model in the layout each KServe runtime reads: written by the exporter
(``tfps_trainer.export``), named in an InferenceService's storage URI by the operator.

Inside ``exports/<step>/`` (so it is published with the export, before its manifest: one commit)::

    kserve/tensorflow/<step>/saved_model.pb, variables/   TF Serving's base path (--model_base_path=/mnt/models)
    kserve/triton/model/config.pbtxt                      a Triton model repository (--model-store=/mnt/models)
    kserve/triton/model/<step>/model.onnx

Each is a model base path holding exactly one version (the export's step), so an InferenceService's storage
URI names one version, and rolling forward is a new URI: KServe's storage initializer copies (or links) the
base path once and never polls it. Real directories and files (hard links or copies), no symbolic links:
they read the same through a ``subPath`` mount and to a copier that does not follow links.
"""

from __future__ import annotations

from typing import Literal

from .uri import join

Runtime = Literal["tensorflow", "onnx"]

KSERVE_DIR = "kserve"
TENSORFLOW_DIR = "tensorflow"
TRITON_DIR = "triton"
TRITON_MODEL = "model"
"""The model's name in the Triton repository: clients call ``/v2/models/model/infer``."""
TRITON_CONFIG = "config.pbtxt"
ONNX_FILE = "model.onnx"

FORMAT: dict[Runtime, str] = {"tensorflow": "savedmodel", "onnx": "onnx"}
"""The export format each runtime serves."""


def base_path(export_dir: str, runtime: Runtime) -> str:
    """The runtime's model base path inside the export directory ``export_dir`` (a path or a URI)."""
    return join(export_dir, KSERVE_DIR, TENSORFLOW_DIR if runtime == "tensorflow" else TRITON_DIR)


def version_dir(export_dir: str, runtime: Runtime, step: int) -> str:
    """The one version directory under :func:`base_path` (Triton's under the model's own directory)."""
    base = base_path(export_dir, runtime)
    return join(base, str(step)) if runtime == "tensorflow" else join(base, TRITON_MODEL, str(step))


def triton_config() -> str:
    """``config.pbtxt`` of the ONNX model: Triton completes the inputs and outputs from the model itself
    (its auto-complete, on by default), and a batch dimension of -1 in the model stays the caller's."""
    return f'name: "{TRITON_MODEL}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
