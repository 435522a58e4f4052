"""Run each artifact in its own runtime on real inputs and compare with the TensorFlow model.

Runtimes: SavedModel reloaded with ``tf.saved_model.load`` (signature ``serving_default``),
TFLite through LiteRT (``ai_edge_litert.interpreter``, signature runner), ONNX through ONNX Runtime
(CPU provider). All samples go through in one batch (the batch dimension is dynamic everywhere).

Metrics, per artifact over all outputs and samples (``ref`` = TensorFlow model, ``out`` = artifact):

- ``maxAbsError`` = max |out − ref|
- ``maxRelError`` = max over outputs of max|out − ref| / max|ref| (error relative to the output's
  scale; element-wise relative error is meaningless near zero)
- ``argmaxAgreement`` = share of samples whose argmax over the last axis agrees (outputs whose last
  dimension is > 1 only; otherwise null)

Pass rule: ``maxAbsError <= tolerance.maxAbs`` OR ``maxRelError <= tolerance.maxRel`` (like
``numpy.allclose``: an absolute floor or a scale-relative bound), AND ``argmaxAgreement >=
tolerance.minArgmaxAgreement`` when both are set. Any NaN/Inf in an artifact's output fails.

Tolerances: ``settings.export.tolerances[format]`` for the float artifacts, else
:data:`DEFAULT_TOLERANCES`. Quantized TFLite is checked with the looser
:data:`QUANTIZED_TOLERANCES` of its mode (scale-relative error; ``maxAbs`` 0 = not used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ExportSettings, Tolerance
from .errors import ExportError, one_line
from .formats import SIGNATURE, Artifact

DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "savedmodel": Tolerance(max_abs=1e-6, max_rel=1e-6),
    "tflite": Tolerance(max_abs=1e-4, max_rel=1e-5),
    "onnx": Tolerance(max_abs=1e-4, max_rel=1e-5),
}
QUANTIZED_TOLERANCES: dict[str, Tolerance] = {
    "float16": Tolerance(max_abs=0.0, max_rel=0.01),
    "dynamic": Tolerance(max_abs=0.0, max_rel=0.05),
    "int8": Tolerance(max_abs=0.0, max_rel=0.10),
}


def tolerance_for(artifact: Artifact, settings: ExportSettings) -> Tolerance:
    if artifact.quantization not in (None, "none"):
        return QUANTIZED_TOLERANCES[artifact.quantization]
    return settings.tolerances.get(artifact.format) or DEFAULT_TOLERANCES[artifact.format]


@dataclass
class Measured:
    samples: int
    max_abs_error: float
    max_rel_error: float
    argmax_agreement: float | None
    passed: bool
    worst_output: str

    def as_json(self, tol: Tolerance) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "maxAbsError": self.max_abs_error,
            "maxRelError": self.max_rel_error,
            "argmaxAgreement": self.argmax_agreement,
            "tolerance": {"maxAbs": tol.max_abs, "maxRel": tol.max_rel, "minArgmaxAgreement": tol.min_argmax_agreement},
            "passed": self.passed,
        }


Interface = dict[str, list[dict[str, Any]]]  # {"inputs": [{name, shape, dtype}], "outputs": [...]}


def run_artifact(artifact: Artifact, path: Path, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Interface]:
    """The artifact's outputs on ``inputs`` and its interface, both read from its own runtime."""
    try:
        if artifact.format == "savedmodel":
            return run_savedmodel(path, inputs)
        if artifact.format == "tflite":
            return run_tflite(path, inputs)
        return run_onnx(path, inputs)
    except ExportError:
        raise
    except Exception as exc:  # noqa: BLE001 - a runtime refusing the artifact is a verification failure
        raise ExportError("VerificationFailed", f"{artifact.label}: cannot run in its runtime: {one_line(exc)}") from None


def _spec(name: str, shape: Any, dtype: Any) -> dict[str, Any]:
    dims = [int(d) if isinstance(d, (int, np.integer)) and int(d) >= 0 else None for d in shape]
    return {"name": name, "shape": dims, "dtype": str(np.dtype(dtype))}


def run_savedmodel(path: Path, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Interface]:
    import tensorflow as tf

    fn = tf.saved_model.load(str(path)).signatures[SIGNATURE]
    iface = {
        "inputs": [_spec(k, [d for d in s.shape.as_list()], s.dtype.as_numpy_dtype) for k, s in fn.structured_input_signature[1].items()],
        "outputs": [_spec(k, s.shape.as_list(), s.dtype.as_numpy_dtype) for k, s in fn.structured_outputs.items()],
    }
    out = fn(**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}, iface


def run_tflite(path: Path, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Interface]:
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path)).get_signature_runner(SIGNATURE)
    iface = {
        "inputs": [_spec(k, d["shape_signature"], d["dtype"]) for k, d in runner.get_input_details().items()],
        "outputs": [_spec(k, d["shape_signature"], d["dtype"]) for k, d in runner.get_output_details().items()],
    }
    return {k: np.asarray(v) for k, v in runner(**inputs).items()}, iface


_ORT_TYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(int64)": "int64",
              "tensor(int32)": "int32", "tensor(float16)": "float16", "tensor(bool)": "bool",
              "tensor(int8)": "int8", "tensor(uint8)": "uint8"}


def run_onnx(path: Path, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Interface]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])

    def spec(arg: Any) -> dict[str, Any]:
        dims = [d if isinstance(d, int) else None for d in arg.shape]
        return {"name": arg.name, "shape": dims, "dtype": _ORT_TYPES.get(arg.type, arg.type)}

    iface = {"inputs": [spec(i) for i in session.get_inputs()], "outputs": [spec(o) for o in session.get_outputs()]}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs))), iface


def compare(label: str, ref: dict[str, np.ndarray], out: dict[str, np.ndarray], tol: Tolerance) -> Measured:
    if set(out) != set(ref):
        raise ExportError("VerificationFailed", f"{label}: outputs {sorted(out)} differ from the model's {sorted(ref)}")
    abs_err, rel_err, agreements, worst = 0.0, 0.0, [], next(iter(ref))
    samples = 0
    for name, r in ref.items():
        o = np.asarray(out[name])
        if o.shape != r.shape:
            raise ExportError("VerificationFailed", f"{label}: output {name!r} has shape {o.shape}, model {r.shape}")
        samples = len(r)
        if not np.all(np.isfinite(o)):
            raise ExportError("VerificationFailed", f"{label}: output {name!r} contains NaN/Inf")
        diff = float(np.max(np.abs(o.astype(np.float64) - r.astype(np.float64)))) if r.size else 0.0
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
        if diff > abs_err:
            worst = name
        abs_err, rel_err = max(abs_err, diff), max(rel_err, rel)
        if r.ndim >= 2 and r.shape[-1] > 1:
            agreements.append(float(np.mean(np.argmax(o, axis=-1) == np.argmax(r, axis=-1))))
    agreement = min(agreements) if agreements else None
    close = abs_err <= tol.max_abs or (tol.max_rel is not None and rel_err <= tol.max_rel)
    argmax_ok = tol.min_argmax_agreement is None or agreement is None or agreement >= tol.min_argmax_agreement
    return Measured(samples, abs_err, rel_err, agreement, close and argmax_ok, worst)


def failure_text(label: str, m: Measured, tol: Tolerance) -> str:
    parts = [f"max abs error {m.max_abs_error:.3g} (tolerance maxAbs {tol.max_abs:g})"]
    if tol.max_rel is not None:
        parts.append(f"max rel error {m.max_rel_error:.3g} (tolerance maxRel {tol.max_rel:g})")
    if tol.min_argmax_agreement is not None and m.argmax_agreement is not None:
        parts.append(f"argmax agreement {m.argmax_agreement:.3f} (tolerance minArgmaxAgreement {tol.min_argmax_agreement:g})")
    return f"{label}: " + ", ".join(parts) + f" on output {m.worst_output!r} over {m.samples} samples"
