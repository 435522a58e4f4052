"""The verification rules on their own: what an output is, and how each kind of artifact is judged.

Pure numpy (no TensorFlow): the figures here are the ones the exporter computes from real runtimes."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from tfps_trainer.export.artifact import Artifact  # noqa: E402
from tfps_trainer.export.verify import (  # noqa: E402
    FLOAT_DEFAULTS,
    QUANTIZED_DEFAULTS,
    judge,
    output_kind,
    tolerance_for,
)
from tfps_wire.job_settings import ExportSettings, Tolerance  # noqa: E402

RNG = np.random.default_rng(0)
FLOAT_TFLITE = Artifact("tflite", "model.tflite", quantization="none")
INT8 = Artifact("tflite", "model_int8.tflite", quantization="int8")
SAVEDMODEL = Artifact("savedmodel", "savedmodel")


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


DEFAULT_SETTINGS = ExportSettings()


def _one(artifact, ref, out, kind, labels=None, settings=DEFAULT_SETTINGS):
    j = judge(
        artifact,
        {"y": ref},
        {"y": out},
        tolerance_for(artifact, settings),
        {"y": kind},
        {"y": labels} if labels is not None else None,
    )
    return j, j.outputs[0]


# --- what an output is ---------------------------------------------------------------------------


def test_probability_rows_are_classification_without_labels():
    assert output_kind(_softmax(RNG.normal(size=(20, 5))), None) == "classification"


def test_logits_are_classification_when_the_labels_are_class_ids_that_fit():
    logits = RNG.normal(size=(20, 5))
    assert output_kind(logits, RNG.integers(0, 5, 20)) == "classification"
    assert output_kind(logits, RNG.integers(0, 5, (20, 1))) == "classification"
    assert output_kind(logits, np.eye(5)[RNG.integers(0, 5, 20)]) == "classification"  # one-hot
    assert output_kind(logits, RNG.integers(0, 9, 20) + 5) == "regression"  # ids beyond the width


def test_a_single_score_with_binary_labels_is_classification_else_regression():
    assert output_kind(RNG.normal(size=(20, 1)), RNG.integers(0, 2, (20, 1))) == "classification"
    assert output_kind(RNG.normal(size=(20, 1)), RNG.normal(size=(20, 1))) == "regression"
    assert output_kind(RNG.normal(size=(20, 3)), None) == "regression"


def test_a_declared_kind_wins():
    assert output_kind(_softmax(RNG.normal(size=(8, 3))), None, "regression") == "regression"


# --- float artifacts ------------------------------------------------------------------------------


def test_batchnorm_float_noise_passes_the_savedmodel_default_and_real_corruption_fails():
    ref = _softmax(RNG.normal(size=(64, 10)))
    noisy = ref + RNG.uniform(-1.85e-6, 1.85e-6, ref.shape)
    _, f = _one(SAVEDMODEL, ref, noisy, "classification")
    assert f.passed and 0 < f.max_abs_error <= f.bound
    _, bad = _one(FLOAT_TFLITE, ref, ref + 7e10, "classification")
    assert not bad.passed and "max abs error 7e+10" in bad.problem


def test_the_float_bound_scales_with_the_outputs_magnitude():
    ref = RNG.normal(size=(32, 1)) * 1e4
    out = ref * (1 + 5e-5)  # float32 round-off at this magnitude: 0.5 absolute, far above maxAbs
    _, f = _one(FLOAT_TFLITE, ref, out, "regression")
    assert f.passed and f.max_abs_error > FLOAT_DEFAULTS["tflite"].max_abs
    assert f.bound == pytest.approx(1e-4 + 1e-4 * np.max(np.abs(ref)))


def test_nan_in_an_artifact_always_fails_and_names_the_count():
    ref = RNG.normal(size=(10, 2))
    out = ref.copy()
    out[3, 1] = np.nan
    j, f = _one(FLOAT_TFLITE, ref, out, "regression")
    assert not j.passed and f.problem == "1 NaN/Inf value(s)"
    assert j.as_json()["maxAbsError"] is None  # valid JSON, no Infinity


# --- quantized artifacts --------------------------------------------------------------------------


def test_int8_classifier_is_judged_by_argmax_agreement_not_by_error():
    logits = RNG.normal(size=(200, 10)) * 3
    ref = _softmax(logits)
    wrong = _softmax(np.roll(logits, 1, axis=-1))  # small errors relative to 1, but every class is moved
    _, f = _one(INT8, ref, wrong, "classification")
    assert not f.passed and f.argmax_agreement < 0.2 and "argmax agreement" in f.problem
    noisy = _softmax(logits + RNG.normal(size=logits.shape) * 0.05)
    _, ok = _one(INT8, ref, noisy, "classification")
    assert ok.passed and ok.argmax_agreement >= QUANTIZED_DEFAULTS["int8"].min_argmax_agreement


def test_near_ties_are_not_counted_against_a_quantized_classifier():
    ref = np.full((50, 4), 0.25)
    ref[:10] = [[0.7, 0.1, 0.1, 0.1]] * 10  # 10 decisive inputs, 40 exact ties
    out = ref.copy()
    out[10:] = [[0.2, 0.3, 0.25, 0.25]] * 40  # the ties flip
    _, f = _one(INT8, ref, out, "classification")
    assert f.passed and f.decisive == 10 and f.argmax_agreement == 1.0


def test_int8_regression_is_judged_against_the_outputs_range():
    ref = RNG.uniform(2.0, 12.0, size=(64, 2))
    _, ok = _one(INT8, ref, ref + 0.5, "regression")  # range 12 (it includes 0): bound 1.2
    assert ok.passed and ok.scale == pytest.approx(ref.max())
    _, bad = _one(INT8, ref, ref + 2.0, "regression")
    assert not bad.passed and "maxRel 0.1" in bad.problem


def test_the_quantized_tolerance_is_honoured_field_by_field():
    settings = ExportSettings(
        tflite_quantization="int8", tflite_quantized_tolerance=Tolerance(min_argmax_agreement=0.5)
    )
    limits = tolerance_for(INT8, settings)
    assert limits.min_argmax_agreement == 0.5 and limits.max_rel == QUANTIZED_DEFAULTS["int8"].max_rel
    float_limits = tolerance_for(FLOAT_TFLITE, ExportSettings(tolerances={"tflite": Tolerance(max_abs=0.1)}))
    assert float_limits.max_abs == 0.1 and float_limits.max_rel == FLOAT_DEFAULTS["tflite"].max_rel


# --- warnings and several outputs -----------------------------------------------------------------


def test_constant_outputs_pass_with_an_inconclusive_warning():
    ref = np.tile([[0.1] * 10], (64, 1))
    j, f = _one(FLOAT_TFLITE, ref, ref, "classification")
    assert f.passed and f.warning.startswith("inconclusive: outputs constant over the 64")
    assert j.warnings == ["output 'y': " + f.warning]


def test_each_output_has_its_own_figures_and_the_failure_names_the_bad_one():
    probs = _softmax(RNG.normal(size=(30, 3)))
    size = RNG.normal(size=(30, 2))
    j = judge(
        INT8,
        {"probs": probs, "size": size},
        {"probs": probs, "size": size + 5.0},
        tolerance_for(INT8, ExportSettings()),
        {"probs": "classification", "size": "regression"},
    )
    assert [o.name for o in j.outputs] == ["probs", "size"] and [o.passed for o in j.outputs] == [True, False]
    assert j.failure_text().startswith("tflite (int8): output 'size': max abs error 5")
    doc = j.as_json()
    assert [o["name"] for o in doc["outputs"]] == ["probs", "size"] and doc["passed"] is False


def test_accuracy_on_the_labels_is_reported_for_classification_outputs():
    logits = RNG.normal(size=(100, 3))
    labels = np.argmax(logits, axis=-1)
    labels[:20] = (labels[:20] + 1) % 3  # the model is right on 80 of 100
    _, f = _one(FLOAT_TFLITE, logits, logits, "classification", labels=labels)
    assert f.accuracy == {"model": 0.8, "artifact": 0.8}
