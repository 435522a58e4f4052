"""Real exports from real checkpoints, every format verified, re-checked here independently."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import Run, run_export, settings, snapshot

pytestmark = pytest.mark.tf

tf = pytest.importorskip("tensorflow")
import numpy as np  # noqa: E402  (with the trainer extra, like TensorFlow)
from checkpoints import train_and_checkpoint  # noqa: E402  (imports TensorFlow)

from support.serving import servable_version  # noqa: E402

LINEAR = "tfps_trainer.examples.linear"
LINEAR_ARGS = {"features": 256, "hidden": 512, "optimizer": "adam", "learning_rate": 0.01}
CUSTOM = "tfps_export_testmodels.custom_mlp"
LEGACY = "tfps_export_testmodels.legacy_tfkeras"
UNSUPPORTED = "tfps_export_testmodels.unsupported_op"


def _sha256_file(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _check_manifest_matches_files(export_dir: Path) -> dict:
    manifest = json.loads((export_dir / "manifest.json").read_text())
    for a in manifest["artifacts"]:
        assert not os.path.isabs(a["path"]) and ".." not in Path(a["path"]).parts
        path = export_dir / a["path"]
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            listing = "".join(f"{_sha256_file(p)}  {p.relative_to(path).as_posix()}\n" for p in files)
            assert a["bytes"] == sum(p.stat().st_size for p in files)
            assert a["sha256"] == hashlib.sha256(listing.encode()).hexdigest()
        else:
            assert a["bytes"] == path.stat().st_size
            assert a["sha256"] == _sha256_file(path)
        assert a["verification"]["passed"] is True
    return manifest


def _tf_reference(module: str, args: dict, ckpt: Path, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The model from the checkpoint, restored here without the exporter's code."""
    from tfps_trainer.contract import load

    model = load(module).build_model(args)
    tf.train.Checkpoint(model=model).restore(str(ckpt)).expect_partial()
    return np.asarray(model({k: tf.constant(v) for k, v in inputs.items()}, training=False))


def _litert(path: Path, inputs: dict[str, np.ndarray]) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    out = Interpreter(model_path=str(path)).get_signature_runner("serving_default")(**inputs)
    assert len(out) == 1
    return next(iter(out.values()))


def _onnxruntime(path: Path, inputs: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert sorted(i.name for i in sess.get_inputs()) == sorted(inputs)
    return sess.run(None, inputs)[0]


@pytest.fixture(scope="module")
def linear_job(tmp_path_factory, testmodels_on_path):
    root = tmp_path_factory.mktemp("linear") / "job"
    step = train_and_checkpoint(root, LINEAR, LINEAR_ARGS, steps=40)
    job = settings(root, LINEAR, LINEAR_ARGS, tflite_quantization="int8", tflite_calibration_samples=512)
    return root, step, job, run_export(job)


def test_linear_example_exports_every_format_verified(linear_job):
    root, step, _job, run = linear_job
    assert run.rc == 0, run.stderr[-3000:]
    assert run.result.ok and run.result.step == step and run.result.path == f"exports/{step}"
    export_dir = root / "exports" / str(step)
    manifest = _check_manifest_matches_files(export_dir)
    assert manifest["checkpoint"] == {"step": step, "path": f"checkpoints/ckpt-{step}"}
    assert manifest["job"] == "exp" and manifest["namespace"] == "tests"
    assert [(a["format"], a["quantization"]) for a in manifest["artifacts"]] == [
        ("savedmodel", None),
        ("tflite", "none"),
        ("tflite", "int8"),
        ("onnx", None),
    ]
    assert manifest["artifacts"][-1]["opset"] == 17
    assert manifest["signature"]["inputs"] == [{"name": "features", "shape": [None, 256], "dtype": "float32"}]
    assert manifest["signature"]["outputs"] == [
        {"name": "output", "shape": [None, 1], "dtype": "float32", "kind": "regression"}
    ]
    assert manifest["complete"] is True and manifest["failed"] == [] and manifest["required"] == ["savedmodel"]
    for key in ("tensorflow", "keras", "tf2onnx", "onnxruntime", "ai-edge-litert"):
        assert manifest["versions"][key]
    # run by hand, without TFPS_LINEAGE: the manifest says nobody told the exporter what produced the model
    assert manifest["lineage"] == {"producer": None, "spec": None, "image": None, "code": None, "training": None}
    # the termination message agrees with the manifest
    by_path = {f"exports/{step}/{a['path']}": a for a in manifest["artifacts"]}
    for a in run.result.artifacts:
        assert by_path[a.path]["sha256"] == a.sha256 and by_path[a.path]["bytes"] == a.bytes
    assert os.readlink(root / "exports" / "latest") == str(step)
    assert not [p for p in (root / "exports").iterdir() if p.name.startswith(".tmp-")]


def test_report_of_the_export_holds_its_figures_and_renders_in_chromium(linear_job, tmp_path):
    from test_report import check_figures

    from support.chromium import dump_dom, png_ink, screenshot

    root, step, _job, run = linear_job
    export_dir = root / "exports" / str(step)
    manifest = json.loads((export_dir / "manifest.json").read_text())
    for a in manifest["artifacts"]:
        for o in a["verification"]["outputs"]:
            q = o["errorQuantiles"]
            assert q["p50"] <= q["p90"] <= q["p99"] <= q["max"] == o["maxAbsError"]
    page = export_dir / "report.html"
    check_figures(page.read_text(), manifest)
    check_figures(dump_dom(page), manifest)
    assert png_ink(screenshot(page, tmp_path / "report.png"))[2] > 0.02


def test_linear_artifacts_rechecked_independently_against_tensorflow(linear_job):
    root, step, _job, run = linear_job
    assert run.rc == 0
    export_dir = root / "exports" / str(step)
    rng = np.random.default_rng(99)  # fresh inputs, not the exporter's verification samples
    inputs = {"features": rng.normal(size=(50, 256)).astype(np.float32)}
    ref = _tf_reference(LINEAR, LINEAR_ARGS, root / "checkpoints" / f"ckpt-{step}", inputs)
    scale = float(np.max(np.abs(ref)))
    assert scale > 0.1  # a trained model, not zeros
    np.testing.assert_allclose(_onnxruntime(export_dir / "model.onnx", inputs), ref, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(_litert(export_dir / "model.tflite", inputs), ref, atol=1e-4, rtol=1e-5)
    loaded = tf.saved_model.load(str(export_dir / "savedmodel")).signatures["serving_default"]
    np.testing.assert_allclose(loaded(features=tf.constant(inputs["features"]))["output"].numpy(), ref, atol=1e-6)
    # TF Serving's model base path: the version it would load is this step, a SavedModel of its own
    version, path = servable_version(str(root / "exports" / "serving"))
    assert version == step and not os.path.islink(path)
    served = tf.saved_model.load(path).signatures["serving_default"]
    np.testing.assert_allclose(served(features=tf.constant(inputs["features"]))["output"].numpy(), ref, atol=1e-6)
    int8 = _litert(export_dir / "model_int8.tflite", inputs)
    assert np.max(np.abs(int8 - ref)) / scale <= 0.10


def test_int8_tflite_is_at_most_0_3x_the_float_model(linear_job):
    root, step, _job, run = linear_job
    assert run.rc == 0
    manifest = json.loads((root / "exports" / str(step) / "manifest.json").read_text())
    sizes = {a["quantization"]: a["bytes"] for a in manifest["artifacts"] if a["format"] == "tflite"}
    assert sizes["int8"] <= 0.3 * sizes["none"], sizes
    int8 = next(a for a in manifest["artifacts"] if a["quantization"] == "int8")
    assert int8["calibrationSamples"] == 512
    assert int8["verification"]["tolerance"]["maxRel"] == 0.10
    assert int8["verification"]["maxRelError"] <= 0.10


def test_custom_layer_model_with_two_inputs_exports(tmp_path, testmodels_on_path):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, CUSTOM, {}, steps=40)
    run = run_export(settings(root, CUSTOM, tflite_quantization="float16", verify_samples=128))
    assert run.rc == 0, run.stderr[-3000:]
    export_dir = root / "exports" / str(step)
    manifest = _check_manifest_matches_files(export_dir)
    assert {i["name"]: i["dtype"] for i in manifest["signature"]["inputs"]} == {"feats": "float32", "category": "int64"}
    f16 = next(a for a in manifest["artifacts"] if a["quantization"] == "float16")
    assert f16["verification"]["argmaxAgreement"] >= 0.95
    rng = np.random.default_rng(5)
    inputs = {"feats": rng.normal(size=(40, 16)).astype(np.float32), "category": rng.integers(0, 10, (40, 1))}
    ref = _tf_reference(CUSTOM, {}, root / "checkpoints" / f"ckpt-{step}", inputs)
    np.testing.assert_allclose(_onnxruntime(export_dir / "model.onnx", inputs), ref, atol=1e-5)
    np.testing.assert_allclose(_litert(export_dir / "model.tflite", inputs), ref, atol=1e-5)


def test_tf_keras_legacy_model_exports(tmp_path, testmodels_on_path):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, LEGACY, {}, steps=20)
    run = run_export(settings(root, LEGACY, verify_samples=32))
    assert run.rc == 0, run.stderr[-3000:]
    manifest = _check_manifest_matches_files(root / "exports" / str(step))
    assert manifest["versions"]["tf_keras"]
    assert [i["name"] for i in manifest["signature"]["inputs"]] == ["x"]


@pytest.mark.parametrize(
    "module, args, quantization, fmts",
    [
        (
            "tfps_trainer.examples.wide_deep",
            {"vocab_size": 5000, "embed_dim": 8, "hidden": 16},
            "dynamic",
            ("savedmodel", "tflite", "onnx"),
        ),
        ("tfps_trainer.examples.linear_tf_keras", {"hidden": 16}, "float16", ("tflite", "onnx")),
    ],
)
def test_other_examples_export_every_format(tmp_path, module, args, quantization, fmts):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, module, args, steps=30)
    run = run_export(settings(root, module, args, formats=fmts, tflite_quantization=quantization, verify_samples=64))
    assert run.rc == 0, run.stderr[-3000:]
    export_dir = root / "exports" / str(step)
    manifest = _check_manifest_matches_files(export_dir)
    expected = {"savedmodel": [None], "tflite": ["none", quantization], "onnx": [None]}
    assert [a["quantization"] for a in manifest["artifacts"]] == [q for f in fmts for q in expected[f]]
    # only the requested artifacts are published (no intermediate SavedModel when it was not asked for)
    names = {
        "savedmodel": ["savedmodel"],
        "tflite": ["model.tflite", f"model_{quantization}.tflite"],
        "onnx": ["model.onnx"],
    }
    assert sorted(p.name for p in export_dir.iterdir()) == sorted(
        ["kserve", "manifest.json", "report.html", *(n for f in fmts for n in names[f])]
    )
    from tfps_trainer.contract import load

    inputs = load(module).module.sample_inputs(40, args)
    ref = _tf_reference(module, args, root / "checkpoints" / f"ckpt-{step}", inputs)
    np.testing.assert_allclose(_onnxruntime(export_dir / "model.onnx", inputs), ref, atol=1e-5)
    np.testing.assert_allclose(_litert(export_dir / "model.tflite", inputs), ref, atol=1e-5)
    # KServe's layout: the Triton repository's one version is the verified model.onnx, byte for byte
    from tfps_wire import serving_layout

    served_onnx = Path(serving_layout.version_dir(str(export_dir), "onnx", step)) / "model.onnx"
    assert served_onnx.read_bytes() == (export_dir / "model.onnx").read_bytes()
    np.testing.assert_allclose(_onnxruntime(served_onnx, inputs), ref, atol=1e-5)


# ---- failure paths: an earlier good export must survive every one of them untouched ----


@pytest.fixture(scope="module")
def earlier_export(tmp_path_factory, testmodels_on_path):
    """A job with one published export (step 10) and a newer checkpoint (step 20) to fail on."""
    root = tmp_path_factory.mktemp("fail") / "job"
    args = {"hidden": 32}
    train_and_checkpoint(root, LINEAR, args, steps=10)
    first = run_export(settings(root, LINEAR, args, formats=("savedmodel", "onnx"), verify_samples=16))
    assert first.rc == 0, first.stderr[-3000:]
    assert train_and_checkpoint(root, LINEAR, args, steps=10) == 20
    return root, args


def _assert_untouched(root: Path, before: dict, run: Run) -> None:
    assert snapshot(root / "exports") == before, "a failed export changed exports/"
    assert not [p for p in (root / "exports").iterdir() if p.name.startswith(".tmp-")]
    assert os.readlink(root / "exports" / "latest") == "10"


def test_impossible_tolerance_fails_naming_format_error_and_tolerance(earlier_export):
    root, args = earlier_export
    before = snapshot(root / "exports")
    tight = {"max_abs": 0.0, "max_rel": 0.0}
    run = run_export(
        settings(
            root,
            LINEAR,
            args,
            formats=("tflite", "onnx"),
            verify_samples=16,
            tolerances={"tflite": tight, "onnx": tight},
        )
    )
    assert run.rc == 7 and not run.result.ok and run.result.reason == "VerificationFailed"
    assert "maxAbs 0 + maxRel 0" in run.result.message and "nothing was published" in run.result.message
    assert run.result.message.startswith(("tflite:", "onnx:"))
    _assert_untouched(root, before, run)
    assert not (root / "exports" / "20").exists()


def test_nan_corrupted_checkpoint_is_refused(earlier_export, tmp_path):
    root, args = earlier_export
    from tfps_trainer.contract import load

    model = load(LINEAR).build_model(args)
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(model=model, step=step)
    ckpt.restore(tf.train.latest_checkpoint(str(root / "checkpoints"))).expect_partial()
    kernel = model.get_layer("hidden").kernel
    kernel.assign(np.where(np.arange(kernel.shape[1]) % 2 == 0, np.nan, kernel.numpy()).astype(np.float32))
    step.assign(25)
    corrupt = tmp_path / "job"
    shutil.copytree(root, corrupt, symlinks=True)
    before = snapshot(corrupt / "exports")
    ckpt.write(str(corrupt / "checkpoints" / "ckpt-25"))
    run = run_export(settings(corrupt, LINEAR, args, verify_samples=16), "--step", "25")
    assert run.rc == 5 and run.result.reason == "CheckpointCorrupt"
    assert "NaN" in run.result.message and "hidden" in run.result.message
    _assert_untouched(corrupt, before, run)


@pytest.mark.parametrize("fmt, op", [("tflite", "Igamma"), ("onnx", "Igamma")])
def test_unsupported_op_fails_only_that_format_and_the_savedmodel_is_published(tmp_path, testmodels_on_path, fmt, op):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, UNSUPPORTED, {}, steps=5)
    run = run_export(settings(root, UNSUPPORTED, formats=("savedmodel", fmt), verify_samples=8))
    assert run.rc == 0 and run.result.ok, run.stderr[-3000:]
    assert [a.format for a in run.result.artifacts] == ["savedmodel"]
    (failure,) = run.result.failed
    assert failure.format == fmt and failure.reason == "ConversionFailed"
    assert failure.message.startswith(fmt) and op in failure.message
    export_dir = root / "exports" / str(step)
    manifest = _check_manifest_matches_files(export_dir)
    assert manifest["complete"] is True and [f["format"] for f in manifest["failed"]] == [fmt]
    assert sorted(p.name for p in export_dir.iterdir()) == ["kserve", "manifest.json", "report.html", "savedmodel"]
    assert [p.name for p in (export_dir / "kserve").iterdir()] == ["tensorflow"]  # no onnx: no Triton repository
    assert os.readlink(root / "exports" / "latest") == str(step)
    assert servable_version(str(root / "exports" / "serving")) == (step, str(root / "exports" / "serving" / str(step)))
    assert (root / "exports" / "serving" / str(step) / "saved_model.pb").is_file()


def test_a_required_format_that_fails_fails_the_export_but_publishes_the_rest(tmp_path, testmodels_on_path):
    root = tmp_path / "job"
    step = train_and_checkpoint(root, UNSUPPORTED, {}, steps=5)
    run = run_export(
        settings(root, UNSUPPORTED, formats=("savedmodel", "onnx"), required=("savedmodel", "onnx"), verify_samples=8)
    )
    assert run.rc == 6 and not run.result.ok and run.result.reason == "ConversionFailed"
    assert "required format(s) onnx failed" in run.result.message and "Igamma" in run.result.message
    assert run.result.path == f"exports/{step}" and [a.format for a in run.result.artifacts] == ["savedmodel"]
    manifest = _check_manifest_matches_files(root / "exports" / str(step))
    assert manifest["complete"] is False
    # a consumer following `latest`, or TF Serving, never lands on an export that lacks a required format
    assert not (root / "exports" / "latest").exists() and not (root / "exports" / "LATEST").exists()
    assert not (root / "exports" / "serving").exists()


def test_missing_step_and_escaping_checkpoint_path(earlier_export):
    root, args = earlier_export
    before = snapshot(root / "exports")
    job = settings(root, LINEAR, args, verify_samples=16)
    missing = run_export(job, "--step", "999")
    assert missing.rc == 4 and missing.result.reason == "CheckpointNotFound" and "ckpt-999" in missing.result.message
    escape = run_export(job, "--checkpoint", "../../etc/passwd")
    assert escape.rc == 8 and escape.result.reason == "UnsafePath" and "'..'" in escape.result.message
    _assert_untouched(root, before, escape)


def test_symlinked_checkpoint_directory_is_refused(tmp_path, earlier_export):
    root, args = earlier_export
    other = tmp_path / "job"
    other.mkdir()
    os.symlink(root / "checkpoints", other / "checkpoints")
    run = run_export(settings(other, LINEAR, args, verify_samples=16))
    assert run.rc == 8 and run.result.reason == "UnsafePath" and "symlink" in run.result.message
    assert not (other / "exports").exists()
    # a checkpoint whose data file is a symlink (e.g. planted to read another job's weights)
    (other / "checkpoints").unlink()
    shutil.copytree(root / "checkpoints", other / "checkpoints")
    data = next((other / "checkpoints").glob("ckpt-20.data-*"))
    data.unlink()
    os.symlink(next((root / "checkpoints").glob("ckpt-20.data-*")), data)
    run = run_export(settings(other, LINEAR, args, verify_samples=16), "--step", "20")
    assert run.rc == 8 and run.result.reason == "UnsafePath" and data.name in run.result.message


def test_sigterm_mid_export_publishes_nothing_and_leaves_no_staging(tmp_path, testmodels_on_path):
    import signal
    import subprocess
    import sys

    # not `from conftest import HERE`: when the whole suite runs, `conftest` is whichever directory's
    # conftest pytest imported last (tests/trainer's), not this one
    HERE = Path(__file__).parent
    from tfps_wire.export_result import parse_message

    root = tmp_path / "job"
    step = train_and_checkpoint(root, CUSTOM, {}, steps=5)
    log = tmp_path / "termination-log"
    env = dict(
        os.environ,
        TFPS_JOB=settings(root, CUSTOM, verify_samples=16).to_env(),
        TFPS_TERMINATION_LOG=str(log),
        PYTHONPATH=str(HERE),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfps_trainer.export"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    staged = False
    for line in proc.stderr:  # wait until artifacts are being written into the staging directory
        if "savedmodel:" in line:
            staged = any(p.name.startswith(".tmp-") for p in (root / "exports").iterdir())
            proc.send_signal(signal.SIGTERM)
            break
    proc.stderr.read()
    rc = proc.wait(timeout=300)
    assert staged
    assert rc == 10 and parse_message(log.read_text()).reason == "Interrupted"
    assert sorted(p.name for p in (root / "exports").iterdir()) == [".lock"]
    assert not (root / "exports" / str(step)).exists()
