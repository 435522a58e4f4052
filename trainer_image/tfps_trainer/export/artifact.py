"""What an export artifact is, independent of TensorFlow: its format, file name and the facts recorded
with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfps_wire.export_result import artifact_label as label
from tfps_wire.job_settings import ExportFormat

SIGNATURE = "serving_default"
FILE_NAMES = {
    "savedmodel": "savedmodel",
    "tflite": "model.tflite",
    "onnx": "model.onnx",
    "keras": "model.keras",
    "weights": "model.weights.h5",
}


def tflite_name(quantization: str) -> str:
    return FILE_NAMES["tflite"] if quantization == "none" else f"model_{quantization}.tflite"


@dataclass
class Artifact:
    format: ExportFormat
    rel: str  # path inside the export directory
    quantization: str | None = None
    opset: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Facts a user of the artifact must know (fixed batch, runtime restrictions)."""

    @property
    def quantized(self) -> bool:
        return self.quantization not in (None, "none")

    @property
    def label(self) -> str:
        return label(self.format, self.quantization)
