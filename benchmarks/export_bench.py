"""Export benchmark: full verified export vs bare conversions of the same model, in one run.

    .venv/bin/python benchmarks/export_bench.py [--models linear,mobilenet] [--repeats 5]

Models: ``tfps_trainer.examples.linear`` (an MLP: 256 features, 512 hidden) and MobileNetV2 (alpha
0.35, 32x32x3, 10 classes, ``weights=None``: BatchNorm and depthwise convolutions; the test model
``tests/export/tfps_export_testmodels/mobilenet.py``), each trained a few steps and checkpointed
exactly like the trainer does. Per repeat, in one process (warm TensorFlow, alternating order):

- bare: what an unverified exporter must do: restore the checkpoint into the model, draw the int8
  calibration samples, ExportArchive SavedModel + TFLite float32 + TFLite int8 + ONNX, written to a
  scratch directory; no reference outputs, no verification, no hashes/manifest/fsync/rename;
- full: ``tfps_trainer.export.pipeline.export`` (checkpoint lookup and restore, samples, the same
  conversions, verification of every artifact in LiteRT / ONNX Runtime / reloaded SavedModel,
  hashes, manifest, fsync, atomic publish).

Goal: full <= 1.5x bare (median over repeats; the ratio of best runs is printed too, as shared CPUs
make single runs noisy). Prints a table per model; writes benchmarks/results/export.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

from tfps_trainer.contract import load
from tfps_trainer.export import formats, source
from tfps_trainer.export.pipeline import Timings, export
from tfps_wire.job_settings import ExportSettings, JobSettings, Paths

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "export"))  # the MobileNetV2 test model
MODELS = {
    "linear": (
        "tfps_trainer.examples.linear",
        {"features": 256, "hidden": 512, "optimizer": "adam", "learning_rate": 0.01},
    ),
    "mobilenet": ("tfps_export_testmodels.mobilenet", {}),
}
RESULTS = Path(__file__).parent / "results" / "export.json"


def train(root: Path, module: str, args: dict, steps: int) -> int:
    contract = load(module)
    model, opt = contract.build_model(args), contract.optimizer(args)
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=opt, step=step),
        str(root / "checkpoints"),
        max_to_keep=3,
        checkpoint_name="ckpt",
    )
    it = iter(contract.dataset(None, 64, args))
    for _ in range(steps):
        x, y = next(it)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(contract.loss(y, model(x, training=True)))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        step.assign_add(1)
    manager.save(checkpoint_number=int(step))
    return int(step)


def bare(job: JobSettings, scratch: Path) -> float:
    """Restore + the same conversions the exporter does, nothing else."""
    ex, args = job.export, dict(job.model_args)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    t0 = time.perf_counter()
    contract = source.load_contract(job)
    ckpt = source.find_checkpoint(job, None, None)
    sig = source.input_signature(contract, args)
    as_dict = source.call_with_dict(contract, args, sig)
    inputs = source.samples(contract, args, sig, 1).inputs
    calibration = source.samples(contract, args, sig, ex.tflite_calibration_samples, prefer_sample_fn=False).inputs
    model = source.build_and_restore(contract, args, ckpt, inputs, as_dict)
    serve = formats.serving(model, sig, inputs, as_dict)
    formats.savedmodel(model, serve, scratch / "savedmodel")
    formats.tflite(scratch / "savedmodel", scratch / "model.tflite")
    formats.tflite(scratch / "savedmodel", scratch / "model_int8.tflite", "int8", calibration)
    formats.onnx(scratch / "savedmodel", scratch / "model.onnx", ex.onnx_opset, serve)
    return time.perf_counter() - t0


def bench(name: str, opts: argparse.Namespace) -> dict:
    module, args = MODELS[name]
    work = Path(tempfile.mkdtemp(prefix="tfps-export-bench-"))
    try:
        root = work / "job"
        step = train(root, module, args, opts.steps)
        job = JobSettings(
            job_name="bench",
            model_module=module,
            model_args=args,
            steps=opts.steps,
            batch_size=64,
            paths=Paths(root=str(root)),
            export=ExportSettings(
                tflite_quantization="int8",
                tflite_calibration_samples=opts.calibration,
                verify_samples=opts.verify_samples,
            ),
        )
        bare_s, full_s, breakdown = [], [], []
        bare(job, work / "warmup")  # first traces/compiles pay one-off costs in whichever runs first
        for i in range(opts.repeats):
            order = ("bare", "full") if i % 2 == 0 else ("full", "bare")
            for kind in order:
                if kind == "bare":
                    bare_s.append(bare(job, work / "bare"))
                else:
                    t = Timings()
                    t0 = time.perf_counter()
                    result = export(job, timings=t)
                    full_s.append(time.perf_counter() - t0)
                    breakdown.append(t.seconds)
        manifest = json.loads((root / result.manifest).read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)

    b, f = statistics.median(bare_s), statistics.median(full_s)

    def key(a: dict) -> str:
        return a["format"] + ("" if a["quantization"] in (None, "none") else f"-{a['quantization']}")

    sizes = {key(a): a["bytes"] for a in manifest["artifacts"]}
    errors = {key(a): a["verification"]["maxAbsError"] for a in manifest["artifacts"]}
    phases = {k: round(statistics.median(d.get(k, 0.0) for d in breakdown), 3) for k in breakdown[-1]}
    out = {
        "name": name,
        "model": module,
        "args": args,
        "checkpointStep": step,
        "repeats": opts.repeats,
        "calibrationSamples": opts.calibration,
        "verifySamples": opts.verify_samples,
        "bareSeconds": bare_s,
        "fullSeconds": full_s,
        "bareMedian": round(b, 3),
        "fullMedian": round(f, 3),
        "ratio": round(f / b, 3),
        "ratioOfMinimums": round(min(full_s) / min(bare_s), 3),
        "goalRatio": 1.5,
        "meetsGoal": f / b <= 1.5,
        "fullPhasesMedian": phases,
        "verifyAndPublishSeconds": round(
            sum(v for k, v in phases.items() if k.startswith("verify_")) + phases.get("publish", 0.0), 3
        ),
        "bytes": sizes,
        "maxAbsError": errors,
        "failed": manifest.get("failed", []),
        "versions": manifest["versions"],
        "cpus": os.cpu_count(),
    }
    print(f"\nexport benchmark: {module} {args}, step {step}, {opts.repeats} repeats, {os.cpu_count()} CPUs")
    print(f"{'':28}{'median s':>10}{'runs':>30}")
    print(f"{'bare conversions':28}{b:>10.2f}{'  ' + ', '.join(f'{x:.2f}' for x in bare_s):>30}")
    print(f"{'full export (verified)':28}{f:>10.2f}{'  ' + ', '.join(f'{x:.2f}' for x in full_s):>30}")
    print(f"{'ratio (goal <= 1.5)':28}{f / b:>10.2f}{'  ' + ('OK' if f / b <= 1.5 else 'MISSED'):>30}")
    print(f"{'ratio of best runs':28}{min(full_s) / min(bare_s):>10.2f}{'  (less sensitive to CPU contention)':>30}")
    print(f"{'verify + publish (median)':28}{out['verifyAndPublishSeconds']:>10.2f}")
    print("\nfull export phases (median s): " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    print(f"\n{'artifact':20}{'bytes':>12}{'vs float tflite':>18}{'max abs error':>16}")
    base = sizes.get("tflite")
    for art, size in sizes.items():
        rel = f"{size / base:.2f}x" if base else "-"
        print(f"{art:20}{size:>12,}{rel:>18}{errors[art]:>16.3g}")
    for failure in out["failed"]:
        print(f"not exported: {failure['format']} ({failure.get('quantization')}): {failure['message'][:100]}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="linear,mobilenet", help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--calibration", type=int, default=512)
    p.add_argument("--verify-samples", type=int, default=64)
    opts = p.parse_args()
    results = [bench(name, opts) for name in opts.models.split(",")]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": results}, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
