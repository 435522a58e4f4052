"""TFLite and ONNX hold at most 2 GiB: a model past it is refused with the reason (TF-free)."""

from __future__ import annotations

from tfps_trainer.export.size_limits import LIMIT_BYTES, refusal, weight_bytes

TABLE_20M_X_32 = (20_000_000 * 32, 4)  # 2.38 GiB of float32


def test_a_table_past_2_gib_is_refused_for_tflite_and_onnx_and_not_for_the_saved_model() -> None:
    size = weight_bytes([TABLE_20M_X_32, (1000, 4)], None)
    assert size == 20_000_000 * 32 * 4 + 4000
    why = refusal("tflite", "none", size)
    assert why and "2.38 GiB of weights" in why and "TFLite's FlatBuffer" in why and "not attempted" in why
    assert "ONNX's protobuf" in (refusal("onnx", None, size) or "")
    assert refusal("savedmodel", None, size) is None


def test_quantization_sets_the_bytes_per_weight() -> None:
    assert weight_bytes([TABLE_20M_X_32], "float16") == 20_000_000 * 32 * 2
    assert refusal("tflite", "float16", weight_bytes([TABLE_20M_X_32], "float16")) is None  # 1.19 GiB fits
    assert weight_bytes([TABLE_20M_X_32, (10, 8)], "dynamic") == 20_000_000 * 32 + 80  # int64 stays 8 bytes
    why = refusal("tflite", "float16", 3 * 2**30)
    assert why and "(float16)" in why


def test_the_limit_keeps_headroom_for_the_graph() -> None:
    assert refusal("onnx", None, LIMIT_BYTES - (64 << 20)) is None
    assert refusal("onnx", None, LIMIT_BYTES - (64 << 20) + 1) is not None
