"""Judge an artifact: run it in its own runtime on real inputs and compare with the TensorFlow model.

Runtimes: SavedModel reloaded with ``tf.saved_model.load`` (signature ``serving_default``), TFLite
through LiteRT (``ai_edge_litert.interpreter``, signature runner, XNNPACK on as users run it), ONNX
through ONNX Runtime (CPU provider), ``.keras`` through ``keras.models.load_model(path,
custom_objects=...)``, ``.weights.h5`` loaded into a freshly built model of the contract.

Every output is judged on its own, by what it is (:func:`output_kind`):

- **classification** (probabilities or logits over classes, or a binary score): the class the
  artifact picks must agree with the TensorFlow model's (``argmaxAgreement``), counted over the
  *decisive* inputs only, those whose top-1 margin is above :data:`TIE_MARGIN` of the output's scale
  (a near-tie may flip without harm);
- **regression** (anything else): ``max|out − ref| ≤ maxAbs + maxRel · scale``, where ``scale`` is
  ``max|ref|`` for float artifacts (``numpy.allclose`` in spirit, but relative to the output's
  magnitude, so noise near zero does not fail it) and the quantization range
  ``max(ref, 0) − min(ref, 0)`` for quantized ones.

Float artifacts apply the error bound to classification outputs too (plus the agreement when
``minArgmaxAgreement`` is set); quantized artifacts judge classification outputs by agreement only.
NaN/Inf in an artifact's output always fails. An output that does not vary over the verification
inputs, or a classifier nearly tied on all of them, passes with the warning "inconclusive".

Defaults (:data:`FLOAT_DEFAULTS`, :data:`QUANTIZED_DEFAULTS`) are overridden field by field:
``settings.export.tolerances[format]`` for float artifacts, ``settings.export.tflite_quantized_tolerance``
for the quantized TFLite variant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfps_wire.export_result import ExportError
from tfps_wire.job_settings import ExportSettings, OutputKind, Tolerance

from .artifact import SIGNATURE, Artifact
from .errors import error_line


@dataclass(frozen=True)
class Limits:
    """A tolerance with every field resolved."""

    max_abs: float
    max_rel: float
    min_argmax_agreement: float | None

    def as_json(self) -> dict[str, Any]:
        return {"maxAbs": self.max_abs, "maxRel": self.max_rel, "minArgmaxAgreement": self.min_argmax_agreement}


FLOAT_DEFAULTS: dict[str, Limits] = {
    # float32 round-off through a reloaded graph: ~2e-6 on a BatchNorm conv net whose outputs are ~1
    "savedmodel": Limits(max_abs=1e-5, max_rel=1e-5, min_argmax_agreement=None),
    "keras": Limits(max_abs=1e-5, max_rel=1e-5, min_argmax_agreement=None),
    "weights": Limits(max_abs=1e-5, max_rel=1e-5, min_argmax_agreement=None),
    # other kernels (LiteRT/XNNPACK, ONNX Runtime) reorder float sums
    "tflite": Limits(max_abs=1e-4, max_rel=1e-4, min_argmax_agreement=None),
    "onnx": Limits(max_abs=1e-4, max_rel=1e-4, min_argmax_agreement=None),
}
QUANTIZED_DEFAULTS: dict[str, Limits] = {
    "float16": Limits(max_abs=0.0, max_rel=0.01, min_argmax_agreement=0.99),
    "dynamic": Limits(max_abs=0.0, max_rel=0.05, min_argmax_agreement=0.95),
    "int8": Limits(max_abs=0.0, max_rel=0.10, min_argmax_agreement=0.90),
}
TIE_MARGIN = 1e-3
"""A classification input whose top-1 margin is at most this share of the output's scale is a near-tie."""
CONSTANT_SPREAD = 1e-6
"""An output whose spread over the inputs is at most this share of its scale is constant."""


def _merge(default: Limits, given: Tolerance | None) -> Limits:
    if given is None:
        return default
    return Limits(
        max_abs=default.max_abs if given.max_abs is None else given.max_abs,
        max_rel=default.max_rel if given.max_rel is None else given.max_rel,
        min_argmax_agreement=(
            default.min_argmax_agreement if given.min_argmax_agreement is None else given.min_argmax_agreement
        ),
    )


def tolerance_for(artifact: Artifact, settings: ExportSettings) -> Limits:
    if artifact.quantized:
        return _merge(QUANTIZED_DEFAULTS[str(artifact.quantization)], settings.tflite_quantized_tolerance)
    return _merge(FLOAT_DEFAULTS[artifact.format], settings.tolerances.get(artifact.format))


# --- what an output is ----------------------------------------------------------------------------


def _integral(a: np.ndarray) -> bool:
    return a.dtype.kind in "iub" or (
        a.dtype.kind == "f" and bool(np.all(np.isfinite(a))) and bool(np.all(a == np.round(a)))
    )


def output_kind(ref: np.ndarray, labels: np.ndarray | None, declared: OutputKind | None = None) -> OutputKind:
    """Declared, else classification when the output is a probability vector, or its labels are class
    ids (or one-hot rows, or 0/1 for a single score) that fit its width; else regression."""
    if declared:
        return declared
    if ref.ndim < 2 or ref.size == 0 or ref.dtype.kind != "f":
        return "regression"
    width = ref.shape[-1]
    if width >= 2 and np.all(ref >= -1e-6) and np.all(ref <= 1 + 1e-6) and np.allclose(ref.sum(-1), 1.0, atol=1e-3):
        return "classification"
    if labels is None or len(labels) != len(ref):
        return "regression"
    lab = np.asarray(labels)
    if not _integral(lab):
        return "regression"
    if width >= 2:
        if lab.shape in (ref.shape[:-1], (*ref.shape[:-1], 1)) and lab.min() >= 0 and lab.max() < width:
            return "classification"
        if lab.shape == ref.shape and set(np.unique(lab).tolist()) <= {0, 1} and np.all(lab.sum(-1) == 1):
            return "classification"
        return "regression"
    if lab.size == ref.size and set(np.unique(lab).tolist()) <= {0, 1}:
        return "classification"
    return "regression"


def _classes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(picked class, top-1 margin) per input; a single score is split at 0.5 (probability) or 0 (logit)."""
    v = values.reshape(len(values), -1).astype(np.float64) if values.ndim > 2 else values.astype(np.float64)
    if v.shape[-1] == 1:
        threshold = 0.5 if np.all((values >= 0) & (values <= 1)) else 0.0
        return (v[:, 0] > threshold).astype(np.int64), np.abs(v[:, 0] - threshold)
    top2 = np.sort(v, axis=-1)[..., -2:]
    return np.argmax(v, axis=-1), top2[..., 1] - top2[..., 0]


def _accuracy(values: np.ndarray, labels: np.ndarray) -> float:
    picked, _ = _classes(values)
    lab = np.asarray(labels)
    if lab.shape == values.shape and values.shape[-1] > 1:
        lab = np.argmax(lab, axis=-1)
    return float(np.mean(picked.reshape(-1) == lab.reshape(-1).astype(np.int64)))


# --- judging --------------------------------------------------------------------------------------


@dataclass
class OutputFigures:
    name: str
    kind: OutputKind
    max_abs_error: float
    scale: float
    bound: float
    argmax_agreement: float | None = None
    decisive: int | None = None
    accuracy: dict[str, float] | None = None
    passed: bool = True
    problem: str = ""
    warning: str = ""
    error_quantiles: dict[str, float] | None = None
    """Distribution over the verification inputs of each input's largest |artifact - model| (see
    :data:`ERROR_QUANTILES`); None when an output was not finite."""

    @property
    def scaled_error(self) -> float:
        if self.scale > 0:
            return self.max_abs_error / self.scale
        return 0.0 if self.max_abs_error == 0 else float("inf")

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "maxAbsError": _finite(self.max_abs_error),
            "scale": self.scale,
            "maxRelError": _finite(self.scaled_error),
            "bound": self.bound,
            "argmaxAgreement": self.argmax_agreement,
            "decisiveSamples": self.decisive,
            "passed": self.passed,
        }
        if self.accuracy is not None:
            doc["accuracy"] = self.accuracy
        if self.error_quantiles is not None:
            doc["errorQuantiles"] = self.error_quantiles
        if self.problem:
            doc["problem"] = self.problem
        if self.warning:
            doc["warning"] = self.warning
        return doc


@dataclass
class Judgement:
    label: str
    samples: int
    limits: Limits
    outputs: list[OutputFigures] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    @property
    def finite(self) -> bool:
        """No NaN/Inf in any output."""
        return all(np.isfinite(o.max_abs_error) for o in self.outputs)

    @property
    def warnings(self) -> list[str]:
        return [f"output {o.name!r}: {o.warning}" for o in self.outputs if o.warning]

    @property
    def max_abs_error(self) -> float:
        return max((o.max_abs_error for o in self.outputs), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((o.scaled_error for o in self.outputs), default=0.0)

    @property
    def argmax_agreement(self) -> float | None:
        found = [o.argmax_agreement for o in self.outputs if o.argmax_agreement is not None]
        return min(found) if found else None

    def failure_text(self) -> str:
        bad = "; ".join(f"output {o.name!r}: {o.problem}" for o in self.outputs if not o.passed)
        return f"{self.label}: {bad}"

    def as_json(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "maxAbsError": _finite(self.max_abs_error),
            "maxRelError": _finite(self.max_rel_error),
            "argmaxAgreement": self.argmax_agreement,
            "tolerance": self.limits.as_json(),
            "passed": self.passed,
            "outputs": [o.as_json() for o in self.outputs],
            "warnings": self.warnings,
        }


def _finite(x: float) -> float | None:
    """JSON has no Infinity: a non-finite figure (an artifact that output NaN) is written as null."""
    return x if np.isfinite(x) else None


def judge(
    artifact: Artifact,
    ref: dict[str, np.ndarray],
    out: dict[str, np.ndarray],
    limits: Limits,
    kinds: dict[str, OutputKind],
    labels: dict[str, np.ndarray] | None = None,
) -> Judgement:
    """Per-output figures and verdicts of ``out`` (the artifact) against ``ref`` (the TensorFlow model)."""
    label = artifact.label
    if set(out) != set(ref):
        raise ExportError("VerificationFailed", f"{label}: outputs {sorted(out)} differ from the model's {sorted(ref)}")
    j = Judgement(label=label, samples=len(next(iter(ref.values()))), limits=limits)
    for name, r in ref.items():
        o = np.asarray(out[name])
        if o.shape != r.shape:
            raise ExportError("VerificationFailed", f"{label}: output {name!r} has shape {o.shape}, model {r.shape}")
        j.outputs.append(_judge_output(name, r, o, limits, artifact.quantized, kinds[name], (labels or {}).get(name)))
    return j


ERROR_QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}
"""Quantiles of the per-input error written to the manifest (``errorQuantiles``), drawn by report.html."""


def error_quantiles(abs_err: np.ndarray) -> dict[str, float]:
    """Quantiles over the inputs (axis 0) of each input's largest absolute error."""
    per_input = abs_err.reshape(len(abs_err), -1).max(axis=1) if abs_err.ndim > 1 else abs_err
    return {k: float(np.quantile(per_input, q)) for k, q in ERROR_QUANTILES.items()}


def _judge_output(
    name: str,
    r: np.ndarray,
    o: np.ndarray,
    limits: Limits,
    quantized: bool,
    kind: OutputKind,
    labels: np.ndarray | None,
) -> OutputFigures:
    r64, o64 = r.astype(np.float64), o.astype(np.float64)
    if not r.size:
        return OutputFigures(name, kind, 0.0, 0.0, 0.0, warning="inconclusive: the output is empty")
    if quantized:
        scale = float(max(r64.max(), 0.0) - min(r64.min(), 0.0))
    else:
        scale = float(np.max(np.abs(r64)))
    bound = limits.max_abs + limits.max_rel * scale
    finite = bool(np.all(np.isfinite(o64)))
    err = float(np.max(np.abs(o64 - r64))) if finite else float("inf")
    f = OutputFigures(name, kind, err, scale, bound)
    if finite:
        f.error_quantiles = error_quantiles(np.abs(o64 - r64))
    if not finite:
        f.passed, f.problem = False, f"{int(o.size - np.count_nonzero(np.isfinite(o64)))} NaN/Inf value(s)"
        return f
    spread = float(np.max(r64.max(axis=0) - r64.min(axis=0))) if len(r64) > 1 else 0.0
    if spread <= CONSTANT_SPREAD * scale:
        f.warning = f"inconclusive: outputs constant over the {len(r)} verification inputs"
    if kind == "classification":
        ref_cls, margin = _classes(r64)
        out_cls, _ = _classes(o64)
        decisive = margin > TIE_MARGIN * max(scale, 1e-12)
        f.decisive = int(decisive.sum())
        if f.decisive:
            f.argmax_agreement = float(np.mean(ref_cls[decisive] == out_cls[decisive]))
        elif not f.warning:
            f.warning = f"inconclusive: classes nearly tied on all {len(r)} verification inputs"
        if labels is not None and len(labels) == len(r):
            f.accuracy = {"model": _accuracy(r64, labels), "artifact": _accuracy(o64, labels)}
    problems = []
    if not (quantized and kind == "classification") and err > bound:
        problems.append(
            f"max abs error {err:.3g} > {bound:.3g} (maxAbs {limits.max_abs:g} + maxRel {limits.max_rel:g}"
            f" × scale {scale:.3g}) over {len(r)} verification inputs"
        )
    wanted = limits.min_argmax_agreement
    if (
        kind == "classification"
        and wanted is not None
        and f.argmax_agreement is not None
        and f.argmax_agreement < wanted
    ):
        problems.append(
            f"argmax agreement {f.argmax_agreement:.3f} < minArgmaxAgreement {wanted:g}"
            f" (over {f.decisive} decisive inputs)"
        )
    if problems:
        f.passed, f.problem = False, ", ".join(problems)
    return f


# --- runtimes -------------------------------------------------------------------------------------

Interface = dict[str, list[dict[str, Any]]]  # {"inputs": [{name, shape, dtype}], "outputs": [...]}
Outputs = dict[str, np.ndarray]


@dataclass
class Runtime:
    """What running an artifact needs besides its file: for the Keras formats, the contract's model code."""

    load_keras: Callable[[Path], Any] | None = None
    """Load a ``.keras`` file with the contract's custom objects."""
    fresh_model: Callable[[], Any] | None = None
    """A newly built model of the contract, variables created (for ``.weights.h5``)."""
    call: Callable[[Any, dict[str, np.ndarray]], Outputs] | None = None
    """Run a Keras model on the inputs and name its outputs as the serving signature does."""


def run_artifact(
    artifact: Artifact, path: Path, inputs: dict[str, np.ndarray], runtime: Runtime | None = None
) -> tuple[Outputs, Interface]:
    """The artifact's outputs on ``inputs`` and its interface, both read from its own runtime."""
    try:
        if artifact.format == "savedmodel":
            return run_savedmodel(path, inputs)
        if artifact.format == "tflite":
            return run_tflite(path, inputs, artifact)
        if artifact.format == "onnx":
            return run_onnx(path, inputs)
        if runtime is None or runtime.call is None:
            raise ExportError("InternalError", f"{artifact.label}: no Keras runtime given")
        if artifact.format == "keras":
            assert runtime.load_keras is not None
            model = runtime.load_keras(path)
        else:
            assert runtime.fresh_model is not None
            model = runtime.fresh_model()
            model.load_weights(str(path))
        return runtime.call(model, inputs), {}
    except ExportError:
        raise
    except Exception as exc:
        raise ExportError(
            "VerificationFailed", f"{artifact.label}: cannot run in its runtime: {error_line(exc)}"
        ) from None


def _spec(name: str, shape: Any, dtype: Any) -> dict[str, Any]:
    dims = [int(d) if isinstance(d, (int, np.integer)) and int(d) >= 0 else None for d in shape]
    return {"name": name, "shape": dims, "dtype": str(np.dtype(dtype))}


def run_savedmodel(path: Path, inputs: dict[str, np.ndarray]) -> tuple[Outputs, Interface]:
    import tensorflow as tf

    fn = tf.saved_model.load(str(path)).signatures[SIGNATURE]
    iface = {
        "inputs": [
            _spec(k, s.shape.as_list(), s.dtype.as_numpy_dtype) for k, s in fn.structured_input_signature[1].items()
        ],
        "outputs": [_spec(k, s.shape.as_list(), s.dtype.as_numpy_dtype) for k, s in fn.structured_outputs.items()],
    }
    out = fn(**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}, iface


def run_tflite(
    path: Path, inputs: dict[str, np.ndarray], artifact: Artifact | None = None
) -> tuple[Outputs, Interface]:
    """LiteRT with its default delegates (XNNPACK). A model that fails there but runs on the built-in
    kernels alone is run that way, and the artifact records it (``details.xnnpack``)."""
    try:
        return _tflite_outputs(path, inputs, delegates=True)
    except Exception as exc:
        first = error_line(exc, 300)
        try:
            result = _tflite_outputs(path, inputs, delegates=False)
        except Exception:
            raise exc from None
        if artifact is not None:
            artifact.details["xnnpack"] = False
            artifact.notes.append(
                f"runs only without the XNNPACK delegate (with it: {first}); create the "
                "interpreter with experimental_op_resolver_type=BUILTIN_WITHOUT_DEFAULT_DELEGATES"
            )
        return result


def _tflite_outputs(path: Path, inputs: dict[str, np.ndarray], delegates: bool) -> tuple[Outputs, Interface]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kwargs = {} if delegates else {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
    runner = Interpreter(model_path=str(path), **kwargs).get_signature_runner(SIGNATURE)
    details = runner.get_input_details()
    iface = {
        "inputs": [_spec(k, d["shape_signature"], d["dtype"]) for k, d in details.items()],
        "outputs": [_spec(k, d["shape_signature"], d["dtype"]) for k, d in runner.get_output_details().items()],
    }
    fixed_batch = {int(d["shape_signature"][0]) for d in details.values() if len(d["shape_signature"])} - {-1}
    n = len(next(iter(inputs.values())))
    if not fixed_batch:
        return {k: np.asarray(v) for k, v in runner(**inputs).items()}, iface
    (b,) = fixed_batch
    chunks = [runner(**{k: v[i : i + b] for k, v in inputs.items()}) for i in range(0, n - n % b, b)]
    if n % b:
        raise ExportError("VerificationFailed", f"{path.name}: fixed batch {b} does not divide {n} verification inputs")
    return {k: np.concatenate([np.asarray(c[k]) for c in chunks]) for k in chunks[0]}, iface


_ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(float16)": "float16",
    "tensor(bool)": "bool",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(string)": "object",
}


def run_onnx(path: Path, inputs: dict[str, np.ndarray]) -> tuple[Outputs, Interface]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])

    def spec(arg: Any) -> dict[str, Any]:
        dims = [d if isinstance(d, int) else None for d in arg.shape]
        return {"name": arg.name, "shape": dims, "dtype": _ORT_TYPES.get(arg.type, arg.type)}

    iface = {"inputs": [spec(i) for i in session.get_inputs()], "outputs": [spec(o) for o in session.get_outputs()]}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {k: _ort_input(v) for k, v in inputs.items()}))), iface


def _ort_input(v: np.ndarray) -> np.ndarray:
    """ONNX Runtime takes strings as ``str`` objects (TensorFlow gives ``bytes``, which it silently misreads)."""
    if v.dtype.kind not in "OSU":
        return v
    return np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s), otypes=[object])(v)
