"""Converters: the restored model → SavedModel, TFLite (float32 + quantized), ONNX, .keras, .weights.h5.

Recipes (TF 2.21 / Keras 3; every other one we tried was broken or silently wrong):

- **SavedModel**: ``keras.export.ExportArchive`` tracking the model's resources (each weight saved once), one endpoint
  ``serving_default`` = ``serve(inputs: dict[name, Tensor]) -> dict[output_name, Tensor]`` with the
  contract's input signature (dynamic batch). Works for Keras 3 and ``tf_keras`` models.
- **TFLite**: ``TFLiteConverter.from_saved_model(<that SavedModel>, ["serving_default"])``.
  Built-in ops only (no Flex delegate in LiteRT). Quantized variants from the same SavedModel:
  ``dynamic`` (int8 weights, float activations), ``float16`` (float16 weights), ``int8``
  (int8 weights and activations calibrated on real samples; float32 inputs/outputs, ops without an
  int8 kernel fall back to float). Converting from concrete functions leaves Keras 3 variables
  as READ_VARIABLE ops (NaN outputs / int8 calibration crash), so we never do that.
  Recurrent layers (Keras LSTM/GRU) lower to TensorList ops that the converter can only turn into
  built-ins with static shapes: when the dynamic-batch conversion fails on them, the model is
  converted again from a SavedModel whose signature has a **fixed batch of 1** (the artifact records
  ``batch: 1``; run it one example per invoke, as on-device inference does anyway).
- **ONNX**: tf2onnx from the same SavedModel (what ``python -m tf2onnx.convert --saved-model`` does,
  which also carries initialized lookup tables over: a string↔int64 ``StringLookup`` becomes
  ONNX-ML's ``CategoryMapper``), then ``onnx.checker`` (an op tf2onnx cannot map stays a TF op and is
  rejected here).
- **keras**: ``model.save("model.keras")``; verified by ``keras.models.load_model(path,
  custom_objects=<the contract's custom_objects()>)``.
- **weights**: ``model.save_weights("model.weights.h5")``; verified by loading it into a model
  freshly built by the contract.

Serving interface (identical in all formats): inputs are the contract's ``input_signature`` keys
with its dtypes and shapes (batch ``None``); outputs are named after the model's outputs: the keys
of a dict output, else ``model.output_names`` (Keras functional: the output layers' names), else
``output_0``, ``output_1``…
"""

from __future__ import annotations

import logging
import re
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from tfps_wire.export_result import ExportError

from .artifact import SIGNATURE, Artifact, label
from .errors import error_line

_IDENT = re.compile(r"[^A-Za-z0-9_]")
DEFAULT_CALIBRATION_SAMPLES = 512
_UNSUPPORTED_TFLITE = re.compile(r"'tf\.(\w+)' op is neither a custom op nor a flex op")
_TABLE_OPS = {"HashTableV2", "MutableHashTableV2", "LookupTableFindV2", "LookupTableImportV2", "LookupTableSizeV2"}
LOOKUP_HINT = (
    "move the StringLookup/IntegerLookup/Hashing step into the dataset (a tf.data map) so the model "
    "takes the looked-up ids"
)


@dataclass
class Serving:
    """The model as a function of named inputs to named outputs."""

    fn: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]]
    signature: dict[str, tf.TensorSpec]
    output_names: list[str]


def serving(model: Any, sig: dict[str, tf.TensorSpec], sample: dict[str, np.ndarray], as_dict: bool) -> Serving:
    names = list(sig)

    def call(inputs: dict[str, Any]) -> Any:
        return model(dict(inputs) if as_dict else inputs[names[0]], training=False)

    out = call({k: tf.constant(v) for k, v in sample.items()})
    output_names = _output_names(model, out)

    def serve(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        y = call(inputs)
        flat = list(y.values()) if isinstance(y, dict) else (list(y) if isinstance(y, (list, tuple)) else [y])
        return {n: tf.identity(t, name=n) for n, t in zip(output_names, flat)}

    return Serving(fn=serve, signature=sig, output_names=output_names)


def _output_names(model: Any, out: Any) -> list[str]:
    if isinstance(out, dict):
        names = [str(k) for k in out]
    else:
        count = len(out) if isinstance(out, (list, tuple)) else 1
        try:
            candidates = list(getattr(model, "output_names", None) or [])
        except Exception:
            candidates = []
        names = [str(c) for c in candidates] if len(candidates) == count else [f"output_{i}" for i in range(count)]
    names = [_IDENT.sub("_", n) or f"output_{i}" for i, n in enumerate(names)]
    if len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(names))]
    return names


def reference(serve: Serving, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The TensorFlow model's outputs: what every artifact is compared against."""
    out = serve.fn({k: tf.constant(v) for k, v in inputs.items()})
    return {k: np.asarray(v) for k, v in out.items()}


def savedmodel(model: Any, serve: Serving, path: Path, batch: int | None = None) -> Artifact:
    """The SavedModel; ``batch`` fixes the signature's batch dimension (the TFLite route for recurrent layers)."""
    import keras

    signature = serve.signature
    if batch is not None:
        signature = {k: tf.TensorSpec([batch, *s.shape[1:]], s.dtype, name=k) for k, s in signature.items()}
    try:
        archive = keras.export.ExportArchive()
        archive.track(_resources_of(model))
        archive.add_endpoint(name=SIGNATURE, fn=serve.fn, input_signature=[signature])
        archive.write_out(str(path), verbose=False)
    except Exception as exc:
        raise ExportError("ConversionFailed", f"savedmodel: export failed: {error_line(exc)}") from None
    return Artifact(format="savedmodel", rel=path.name, details={"signature": SIGNATURE})


def _resources_of(model: Any) -> tf.Module:
    """``model`` behind a plain ``tf.Module``, for ``ExportArchive.track``.

    Tracking a Keras layer adds its ``keras.Variable`` wrappers to the archive's variable collections,
    while the endpoint captures the ``tf.Variable`` inside each: two objects for one buffer, so every
    weight is written twice and a server that loads the model holds it twice (keras-team/keras#23553).
    A ``tf.Module`` is tracked for its resources only (lookup tables), so each variable is saved once,
    as the endpoint's capture.
    """
    holder = tf.Module()
    holder.model = model
    return holder


def keras_file(model: Any, path: Path) -> Artifact:
    try:
        model.save(str(path))
    except Exception as exc:
        raise ExportError("ConversionFailed", f"keras: model.save failed: {error_line(exc)}") from None
    return Artifact(format="keras", rel=path.name)


def weights_file(model: Any, path: Path) -> Artifact:
    try:
        model.save_weights(str(path))
    except Exception as exc:
        raise ExportError("ConversionFailed", f"weights: model.save_weights failed: {error_line(exc)}") from None
    return Artifact(format="weights", rel=path.name)


class TensorListError(ExportError):
    """The converter cannot lower TensorList ops (recurrent layers) with a dynamic batch."""


def tflite(
    saved_model_dir: Path, path: Path, quantization: str = "none", calibration: dict[str, np.ndarray] | None = None
) -> Artifact:
    lbl = label("tflite", quantization)
    try:
        conv = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir), signature_keys=[SIGNATURE])
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantization != "none":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantization == "float16":
            conv.target_spec.supported_types = [tf.float16]
        elif quantization == "int8":
            if not calibration:
                raise ExportError("ConversionFailed", f"{lbl}: no calibration samples")
            conv.representative_dataset = _representative(calibration)
        with warnings.catch_warnings():  # int8 calibration uses tf.lite.Interpreter internally
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
            content = conv.convert()
    except ExportError:
        raise
    except Exception as exc:
        raise converter_failure(lbl, exc) from None
    path.write_bytes(content)
    details = (
        {"calibrationSamples": len(next(iter(calibration.values())))} if quantization == "int8" and calibration else {}
    )
    return Artifact(format="tflite", rel=path.name, quantization=quantization, details=details)


def converter_failure(lbl: str, exc: BaseException) -> ExportError:
    """A one-line, whole-word reason from a TFLite ``ConverterError`` (its structured errors, not the MLIR dump)."""
    text = str(exc)
    ops = sorted(set(_UNSUPPORTED_TFLITE.findall(text)))
    if ops and set(ops) & _TABLE_OPS:
        return ExportError(
            "ConversionFailed",
            f"{lbl}: the model has a lookup table LiteRT's built-in ops cannot run "
            f"({', '.join(ops)}; built-in hash tables map string<->int64 only): {LOOKUP_HINT}",
        )
    if ops:
        return ExportError(
            "ConversionFailed",
            f"{lbl}: unsupported op(s) {', '.join(ops)}: not TFLite built-ins (LiteRT runs built-in ops only); "
            "drop 'tflite' from export.formats or avoid these ops",
        )
    messages: list[str] = []
    for err in getattr(exc, "errors", None) or []:
        msg = " ".join(str(getattr(err, "error_message", "")).replace("\\n", " ").split())
        if msg and msg not in messages:
            messages.append(msg)
    if not messages:
        messages = [m.strip() for m in re.findall(r"error: (?:loc\(.*?\)\)*:? ?)?([^\n]+)", text)] or [error_line(exc)]
    reason = "; ".join(messages)
    if "tensor list" in reason.lower() or "TensorList" in reason:
        return TensorListError("ConversionFailed", f"{lbl}: {reason}")
    return ExportError("ConversionFailed", f"{lbl}: conversion failed: {reason}")


def _representative(calibration: dict[str, np.ndarray]) -> Callable[[], Any]:
    n = len(next(iter(calibration.values())))

    def gen() -> Any:
        for i in range(n):
            yield {k: v[i : i + 1] for k, v in calibration.items()}

    return gen


def onnx(saved_model_dir: Path, path: Path, opset: int, serve: Serving) -> Artifact:
    """ONNX from the verified SavedModel's ``serving_default`` (tf2onnx's ``--saved-model`` route)."""
    import onnx as onnx_lib
    from tf2onnx import convert, tf_loader

    lbl = f"onnx (opset {opset})"
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)
    try:
        graph_def, inputs, outputs, tables, renames = tf_loader.from_saved_model(
            str(saved_model_dir),
            None,
            None,
            None,
            [SIGNATURE],
            None,
            False,
            return_initialized_tables=True,
            return_tensors_to_rename=True,
        )
        with tf.device("/cpu:0"):
            proto, _ = convert._convert_common(
                graph_def,
                name=SIGNATURE,
                opset=opset,
                input_names=inputs,
                output_names=outputs,
                tensors_to_rename=renames,
                initialized_tables=tables,
                continue_on_error=True,
            )
    except Exception as exc:
        raise ExportError("ConversionFailed", f"{lbl}: conversion failed: {error_line(exc)}") from None
    unknown = sorted({n.op_type for n in proto.graph.node if not _known_onnx_op(n, opset)})
    if set(unknown) & _TABLE_OPS:
        raise ExportError(
            "ConversionFailed",
            f"{lbl}: the model has a lookup table tf2onnx cannot map ({', '.join(unknown)}; "
            f"only constant string<->int64 tables become ONNX-ML CategoryMapper): {LOOKUP_HINT}",
        )
    try:
        onnx_lib.checker.check_model(proto)
    except Exception as exc:
        hint = f" (ops tf2onnx could not convert: {', '.join(unknown)})" if unknown else ""
        raise ExportError("ConversionFailed", f"{lbl}: invalid model{hint}: {error_line(exc)}") from None
    if unknown:
        raise ExportError("ConversionFailed", f"{lbl}: ops tf2onnx could not convert: {', '.join(unknown)}")
    names = list(serve.signature)
    got_in = [i.name for i in proto.graph.input]
    got_out = [o.name for o in proto.graph.output]
    if sorted(got_in) != sorted(names) or sorted(got_out) != sorted(serve.output_names):
        raise ExportError(
            "ConversionFailed",
            f"{lbl}: names changed in conversion: inputs {got_in} outputs {got_out}, "
            f"expected {names} {serve.output_names}",
        )
    path.write_bytes(proto.SerializeToString())
    return Artifact(format="onnx", rel=path.name, opset=opset)


def _known_onnx_op(node: Any, opset: int) -> bool:
    from onnx import defs

    if node.domain not in ("", "ai.onnx"):
        return True  # contrib domains are checked by the runtime
    try:
        defs.get_schema(node.op_type, opset, node.domain)
        return True
    except Exception:
        return False


def remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
