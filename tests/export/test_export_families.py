"""The common model families, exported to every format with real conversions and real runtimes.

Each family is trained a few steps (real checkpoint), exported by the real exporter CLI, and the
outcome of every format is asserted: what passes is published and re-checked here in LiteRT / ONNX
Runtime / Keras; what cannot reach a format is recorded with a message that says what to do, and does
not stop the other formats.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_export, settings
from tfps_wire.job_settings import Tolerance

pytestmark = pytest.mark.tf

tf = pytest.importorskip("tensorflow")
import numpy as np  # noqa: E402  (with the trainer extra, like TensorFlow)
from checkpoints import train_and_checkpoint  # noqa: E402  (imports TensorFlow)

ALL = ("savedmodel", "keras", "weights", "tflite", "onnx")


def _export(
    tmp_path: Path, module: str, args: dict, quantization: str, steps: int = 40, seed: int | None = None, **export
):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, f"tfps_export_testmodels.{module}", args, steps=steps, seed=seed)
    run = run_export(
        settings(
            root,
            f"tfps_export_testmodels.{module}",
            args,
            formats=ALL,
            tflite_quantization=quantization,
            tflite_calibration_samples=64,
            verify_samples=64,
            **export,
        )
    )
    assert run.rc == 0 and run.result.ok, run.stderr[-3000:]
    export_dir = root / "exports" / str(step)
    manifest = json.loads((export_dir / "manifest.json").read_text())
    return root, step, run, export_dir, manifest


def _labels(manifest: dict) -> list[str]:
    return [
        a["format"] if a["quantization"] in (None, "none") else f"{a['format']} ({a['quantization']})"
        for a in manifest["artifacts"]
    ]


def _reference(root: Path, step: int, module: str, args: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from tfps_trainer.contract import load

    contract = load(f"tfps_export_testmodels.{module}")
    model = contract.build_model(args)
    tf.train.Checkpoint(model=model).restore(str(root / "checkpoints" / f"ckpt-{step}")).expect_partial()
    x = {k: tf.constant(v) for k, v in inputs.items()}
    y = model(x if len(x) > 1 else next(iter(x.values())), training=False)
    return {k: np.asarray(v) for k, v in y.items()} if isinstance(y, dict) else {"_": np.asarray(y)}


def _stored_values(savedmodel: Path) -> int:
    """How many numbers the SavedModel's variables hold."""
    reader = tf.train.load_checkpoint(str(savedmodel / "variables" / "variables"))
    shapes = reader.get_variable_to_shape_map()
    return sum(int(np.prod(shape)) for name, shape in shapes.items() if name != "_CHECKPOINTABLE_OBJECT_GRAPH")


def _param_count(module: str, args: dict) -> int:
    from tfps_trainer.contract import load

    return load(f"tfps_export_testmodels.{module}").build_model(args).count_params()


def _onnx(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))


def _litert_one_by_one(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path)).get_signature_runner("serving_default")
    n = len(next(iter(inputs.values())))
    outs = [runner(**{k: v[i : i + 1] for k, v in inputs.items()}) for i in range(n)]
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}


def test_mobilenet_v2_with_batchnorm_and_depthwise_convs_exports_every_format(tmp_path):
    # After 40 steps many of the net's class scores are still close: dynamic-range int8 weights flip the
    # top class of 2 of the 64 verification inputs here and of at least 4 on another machine, by the
    # draw of the initial weights: around the default bound of 0.95. The initial weights are fixed
    # here, and the bound for this barely trained net is 0.9: a conversion that breaks the model still
    # fails it.
    root, step, run, export_dir, manifest = _export(
        tmp_path,
        "mobilenet",
        {},
        "dynamic",
        steps=40,
        seed=11,
        tflite_quantized_tolerance=Tolerance(min_argmax_agreement=0.9),
    )
    assert _labels(manifest) == ["savedmodel", "keras", "weights", "tflite", "tflite (dynamic)", "onnx"]
    assert _stored_values(export_dir / "savedmodel") == _param_count("mobilenet", {})  # each weight once
    assert run.result.failed == []
    (out,) = manifest["signature"]["outputs"]
    assert out["kind"] == "classification"
    sm = manifest["artifacts"][0]["verification"]["outputs"][0]
    # a reloaded SavedModel of a BatchNorm conv net differs from eager Keras by float noise, and passes
    assert 0 < sm["maxAbsError"] <= sm["bound"] and sm["passed"] and "warning" not in sm
    for a in manifest["artifacts"]:
        floor = 0.9 if a["quantization"] == "dynamic" else 0.95
        assert a["verification"]["passed"] and a["verification"]["outputs"][0]["argmaxAgreement"] >= floor
    rng = np.random.default_rng(3)
    inputs = {"image": rng.uniform(-0.3, 1.0, size=(16, 32, 32, 3)).astype(np.float32)}
    (ref,) = _reference(root, step, "mobilenet", {}, inputs).values()
    np.testing.assert_allclose(_onnx(export_dir / "model.onnx", inputs)["predictions"], ref, atol=1e-4)
    np.testing.assert_allclose(_litert_one_by_one(export_dir / "model.tflite", inputs)["predictions"], ref, atol=1e-4)


def test_lstm_reaches_tflite_with_a_fixed_batch_and_a_crashing_int8_converter_costs_only_int8(tmp_path):
    args = {"cell": "lstm"}
    root, step, run, export_dir, manifest = _export(tmp_path, "sequence", args, "int8", steps=30)
    assert _labels(manifest) == ["savedmodel", "keras", "weights", "tflite", "onnx"]
    tfl = next(a for a in manifest["artifacts"] if a["format"] == "tflite")
    assert tfl["batch"] == 1 and "fixed batch of 1" in tfl["notes"][0]
    assert tfl["inputs"] == [{"name": "seq", "shape": [1, 12, 5], "dtype": "float32"}]
    # TF 2.21's int8 calibration of this model segfaults: the supervisor records it and carries on
    (failure,) = run.result.failed
    assert (failure.format, failure.quantization, failure.reason) == ("tflite", "int8", "ConversionFailed")
    assert "crashed (SIGSEGV)" in failure.message
    assert not (export_dir / "model_int8.tflite").exists()
    rng = np.random.default_rng(4)
    inputs = {"seq": rng.normal(size=(8, 12, 5)).astype(np.float32)}
    (ref,) = _reference(root, step, "sequence", args, inputs).values()
    np.testing.assert_allclose(_litert_one_by_one(export_dir / "model.tflite", inputs)["probs"], ref, atol=1e-5)
    np.testing.assert_allclose(_onnx(export_dir / "model.onnx", inputs)["probs"], ref, atol=1e-5)


def test_gru_exports_every_format_including_dynamic_tflite(tmp_path):
    root, step, run, export_dir, manifest = _export(tmp_path, "sequence", {"cell": "gru"}, "dynamic", steps=30)
    assert _labels(manifest) == ["savedmodel", "keras", "weights", "tflite", "tflite (dynamic)", "onnx"]
    assert all(a.get("batch") == 1 for a in manifest["artifacts"] if a["format"] == "tflite")


def test_string_lookup_inside_the_model_reaches_onnx_as_a_category_mapper(tmp_path):
    args = {"kind": "string"}
    root, step, run, export_dir, manifest = _export(tmp_path, "lookup", args, "dynamic")
    assert _labels(manifest) == ["savedmodel", "keras", "weights", "tflite", "tflite (dynamic)", "onnx"]
    # each weight stored once, and the lookup table restored with it
    assert _stored_values(export_dir / "savedmodel") == _param_count("lookup", args)
    import onnx

    ops = {(n.domain, n.op_type) for n in onnx.load(str(export_dir / "model.onnx")).graph.node}
    assert ("ai.onnx.ml", "CategoryMapper") in ops
    words = np.array([["red"], ["blue"], ["not-in-vocabulary"], ["yellow"]], dtype=object)
    (ref,) = _reference(root, step, "lookup", args, {"token": words.astype(str)}).values()
    np.testing.assert_allclose(_onnx(export_dir / "model.onnx", {"token": words})["score"], ref, atol=1e-5)
    served = tf.saved_model.load(str(export_dir / "savedmodel")).signatures["serving_default"]
    np.testing.assert_allclose(served(token=tf.constant(words.astype(str)))["score"].numpy(), ref, atol=1e-6)


def test_integer_lookup_gets_a_clear_message_and_the_other_formats_are_published(tmp_path):
    root, step, run, export_dir, manifest = _export(tmp_path, "lookup", {"kind": "integer"}, "dynamic")
    assert _labels(manifest) == ["savedmodel", "keras", "weights"]
    assert sorted(f.label for f in run.result.failed) == ["onnx", "tflite", "tflite (dynamic)"]
    for f in run.result.failed:
        assert f.reason == "ConversionFailed" and "lookup table" in f.message
        assert "move the StringLookup/IntegerLookup/Hashing step into the dataset" in f.message
    assert [f["format"] for f in manifest["failed"]] == ["tflite", "tflite", "onnx"]
    assert sorted(p.name for p in export_dir.iterdir()) == [
        "kserve",  # the complete export's SavedModel as KServe's TensorFlow runtime reads it
        "manifest.json",
        "model.keras",
        "model.weights.h5",
        "report.html",
        "savedmodel",
    ]


def test_two_inputs_two_outputs_are_judged_output_by_output(tmp_path):
    root, step, run, export_dir, manifest = _export(tmp_path, "two_heads", {}, "int8", steps=60)
    assert {o["name"]: o["kind"] for o in manifest["signature"]["outputs"]} == {
        "kind": "classification",
        "size": "regression",
    }
    float_tflite = next(a for a in manifest["artifacts"] if a["quantization"] == "none")
    assert [o["name"] for o in float_tflite["verification"]["outputs"]] == ["kind", "size"]
    # int8: the classifier head by agreement with the float model, the regression head by its error against
    # its range; whichever verdict the numbers give, it is the head's own and is named
    int8 = next((a for a in manifest["artifacts"] if a["quantization"] == "int8"), None)
    if int8 is not None:
        figures = {o["name"]: o for o in int8["verification"]["outputs"]}
        assert figures["kind"]["argmaxAgreement"] >= 0.9 and 0 <= figures["kind"]["accuracy"]["artifact"] <= 1
        assert figures["size"]["argmaxAgreement"] is None
        assert figures["size"]["maxAbsError"] <= figures["size"]["bound"]
    else:
        (failure,) = run.result.failed
        assert failure.label == "tflite (int8)" and failure.reason == "VerificationFailed"
        assert "output 'size': max abs error" in failure.message or "output 'kind': argmax agreement" in failure.message
    rng = np.random.default_rng(6)
    inputs = {"a": rng.normal(size=(10, 6)).astype(np.float32), "b": rng.normal(size=(10, 3)).astype(np.float32)}
    ref = _reference(root, step, "two_heads", {}, inputs)
    got = _onnx(export_dir / "model.onnx", inputs)
    for name in ("kind", "size"):
        np.testing.assert_allclose(got[name], ref[name], atol=1e-5)


def test_custom_layer_keras_file_is_loaded_with_the_contracts_custom_objects(tmp_path):
    root, step, run, export_dir, manifest = _export(tmp_path, "custom_scale", {}, "none")
    assert _labels(manifest) == ["savedmodel", "keras", "weights", "tflite", "onnx"]
    import keras
    from tfps_export_testmodels.custom_scale import custom_objects

    with pytest.raises(Exception, match="LearnedScale"):  # unregistered: only custom_objects() can load it
        keras.models.load_model(str(export_dir / "model.keras"))
    model = keras.models.load_model(str(export_dir / "model.keras"), custom_objects=custom_objects())
    x = np.random.default_rng(7).normal(size=(5, 8)).astype(np.float32)
    (ref,) = _reference(root, step, "custom_scale", {}, {"x": x}).values()
    np.testing.assert_allclose(np.asarray(model(x)), ref, atol=1e-6)
