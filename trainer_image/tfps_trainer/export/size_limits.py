"""Formats with a file-size limit: a model too large for one is reported as failed, not attempted.

A TFLite model is one FlatBuffer, addressed with 32-bit offsets; tf2onnx writes an ONNX model as one
protobuf, which cannot exceed 2 GiB. A model whose weights alone pass that size fails to convert after
minutes of work and gigabytes of memory (or, in some converter versions, crashes the process), so the
exporter compares the artifact's estimated weight bytes with the limit first. The SavedModel (a
directory of variable shards) has no such limit.
"""

from __future__ import annotations

from collections.abc import Iterable

LIMIT_BYTES = 2**31
"""The 2 GiB of a FlatBuffer or protobuf."""
HEADROOM_BYTES = 64 << 20
"""Room for the graph, its constants and the container's own tables."""

# Bytes per float weight in the artifact: float16 halves, dynamic-range and int8 quantize to one byte.
_WEIGHT_BYTES = {None: 4, "none": 4, "float16": 2, "dynamic": 1, "int8": 1}
_LIMITED = {"tflite": "TFLite's FlatBuffer", "onnx": "ONNX's protobuf"}


def weight_bytes(shapes_and_sizes: Iterable[tuple[int, int]], quantization: str | None) -> int:
    """Estimated weight bytes of an artifact: ``(element count, bytes per element)`` per variable; float
    weights (4 bytes) stored at the quantization's width."""
    per_float = _WEIGHT_BYTES.get(quantization, 4)
    return sum(n * (per_float if size == 4 else size) for n, size in shapes_and_sizes)


def refusal(fmt: str, quantization: str | None, estimated_bytes: int) -> str | None:
    """Why ``fmt`` cannot hold the model (None: it fits)."""
    container = _LIMITED.get(fmt)
    if container is None or estimated_bytes <= LIMIT_BYTES - HEADROOM_BYTES:
        return None
    what = f"{estimated_bytes / 2**30:.2f} GiB of weights"
    if quantization not in (None, "none"):
        what += f" ({quantization})"
    return f"{what} exceed the 2 GiB limit of {container}; not attempted (the SavedModel has no such limit)"


__all__ = ["LIMIT_BYTES", "refusal", "weight_bytes"]
