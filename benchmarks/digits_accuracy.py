"""Export quality on a real classifier: test accuracy of every exported artifact of examples/digits.yaml.

    hack/netns-run .venv/bin/python benchmarks/digits_accuracy.py [--workdir DIR] [--json FILE]

1. ``tfps run examples/digits.yaml`` (PS training: 1 chief, 1 PS, 2 workers, then the verified export);
2. the same model trained by a single-process Keras ``fit`` on the same training split, for the same
   number of examples (``steps × batch`` ÷ training images, i.e. epochs) and the same batch size, three
   times with different seeds (one fit's accuracy moves by a point between seeds on 359 test images);
3. the accuracy on the held-out test split of the PS-trained TensorFlow model (restored from the final
   checkpoint), of the Keras-fit model, and of every published artifact in its own runtime (SavedModel
   reloaded, ``.keras`` loaded, ``.weights.h5`` loaded into a fresh model, TFLite and int8 TFLite in
   LiteRT, ONNX in ONNX Runtime).

Goals: PS training within 1 point of the Keras fit; int8 TFLite within 1 point of the float model.
Prints a table; writes benchmarks/results/digits.json (or ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "examples" / "digits.yaml"
RESULTS = Path(__file__).parent / "results" / "digits.json"


def _accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(probs, axis=-1) == labels))


def _keras_fit(args: dict, steps: int, batch: int, seed: int | None) -> tuple[float, float]:
    import keras

    from tfps_trainer.examples import digits

    if seed is not None:
        keras.utils.set_random_seed(seed)
    x, y = digits.train_split(args)
    tx, ty = digits.test_split(args)
    epochs = max(1, round(steps * batch / len(x)))
    model = digits.build_model(args)
    model.compile(optimizer=digits.optimizer(args), loss=digits.loss)
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=True, verbose=0)
    return _accuracy(model.predict(tx, verbose=0), ty), time.perf_counter() - t0


def _artifact_accuracies(root: Path, args: dict) -> tuple[dict[str, float], float, dict]:
    import keras
    import tensorflow as tf

    from tfps_trainer.examples import digits

    tx, ty = digits.test_split(args)
    manifest_path = root / "exports" / "latest" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    export_dir = manifest_path.parent
    model = digits.build_model(args)
    tf.train.Checkpoint(model=model).restore(str(root / manifest["checkpoint"]["path"])).expect_partial()
    tf_accuracy = _accuracy(np.asarray(model(tx, training=False)), ty)
    out: dict[str, float] = {}
    for a in manifest["artifacts"]:
        path = export_dir / a["path"]
        label = a["format"] if a["quantization"] in (None, "none") else f"{a['format']} ({a['quantization']})"
        if a["format"] == "savedmodel":
            fn = tf.saved_model.load(str(path)).signatures["serving_default"]
            probs = fn(image=tf.constant(tx))["probs"].numpy()
        elif a["format"] == "keras":
            probs = np.asarray(keras.models.load_model(str(path))(tx))
        elif a["format"] == "weights":
            fresh = digits.build_model(args)
            fresh.load_weights(str(path))
            probs = np.asarray(fresh(tx))
        elif a["format"] == "tflite":
            from ai_edge_litert.interpreter import Interpreter

            probs = Interpreter(model_path=str(path)).get_signature_runner("serving_default")(image=tx)["probs"]
        else:
            import onnxruntime as ort

            probs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["probs"], {"image": tx})[0]
        out[label] = _accuracy(np.asarray(probs), ty)
    return out, tf_accuracy, manifest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default=None, help="where tfps run writes (default: a temporary directory)")
    p.add_argument("--json", default=str(RESULTS), help="result file")
    p.add_argument("--fits", type=int, default=3, help="Keras fits (seeds seed..seed+N-1); their mean is compared")
    opts = p.parse_args()

    spec = yaml.safe_load(JOB.read_text())["spec"]
    args, steps = spec["model"]["args"], spec["training"]["steps"]
    batch, seed = spec["training"]["batchSize"], spec["training"].get("seed")
    with tempfile.TemporaryDirectory(prefix="tfps-digits-") as tmp:
        work = Path(opts.workdir or tmp)
        t0 = time.perf_counter()
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tfps_operator.tools.cli import main; sys.exit(main())",
                "run",
                str(JOB),
                "--workdir",
                str(work),
            ],
            capture_output=True,
            text=True,
        )
        ps_seconds = time.perf_counter() - t0
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
            return 1
        artifacts, ps_accuracy, manifest = _artifact_accuracies(work / "default" / "digits", args)
    fits = [_keras_fit(args, steps, batch, None if seed is None else seed + i) for i in range(opts.fits)]
    fit_accuracy, fit_seconds = float(np.mean([a for a, _ in fits])), float(np.mean([t for _, t in fits]))
    float_tflite = artifacts.get("tflite")
    int8 = artifacts.get("tflite (int8)")
    from tfps_trainer.examples import digits

    n_test = len(digits.test_split(args)[1])
    result = {
        "job": str(JOB.relative_to(REPO)),
        "steps": steps,
        "batchSize": batch,
        "testImages": n_test,
        "psTrainingAccuracy": ps_accuracy,
        "kerasFitAccuracy": fit_accuracy,
        "kerasFitAccuracies": [a for a, _ in fits],
        "psVsFitPoints": round(100 * (ps_accuracy - fit_accuracy), 2),
        "artifactAccuracy": artifacts,
        "int8VsFloatPoints": round(100 * (int8 - float_tflite), 2)
        if int8 is not None and float_tflite is not None
        else None,
        "failed": manifest.get("failed", []),
        "tfpsRunSeconds": round(ps_seconds, 1),
        "kerasFitSeconds": round(fit_seconds, 1),
        "goals": {
            "psWithin1PointOfFit": abs(ps_accuracy - fit_accuracy) <= 0.01,
            "int8Within1PointOfFloat": int8 is not None
            and float_tflite is not None
            and abs(int8 - float_tflite) <= 0.01,
        },
        "versions": manifest["versions"],
    }
    Path(opts.json).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.json).write_text(json.dumps(result, indent=2) + "\n")

    print(f"\ndigits: {n_test} held-out test images; {steps} steps x batch {batch}")
    print(f"{'model':34}{'test accuracy':>14}")
    print(f"{'Keras fit, one process (mean)':34}{fit_accuracy:>14.2%}  " + ", ".join(f"{a:.2%}" for a, _ in fits))
    print(f"{'PS training (TensorFlow, ckpt)':34}{ps_accuracy:>14.2%}")
    for label, acc in artifacts.items():
        print(f"{'  artifact: ' + label:34}{acc:>14.2%}")
    for f in manifest.get("failed", []):
        print(f"{'  not exported: ' + f['format']:34}{'-':>14}  {f['message'][:80]}")
    goals = result["goals"]
    print(
        f"\nPS vs fit: {result['psVsFitPoints']:+.2f} points (goal within 1: "
        f"{'OK' if goals['psWithin1PointOfFit'] else 'MISSED'}); int8 vs float TFLite: "
        f"{result['int8VsFloatPoints']:+.2f} points (goal within 1: "
        f"{'OK' if goals['int8Within1PointOfFloat'] else 'MISSED'})"
    )
    print(f"wrote {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
