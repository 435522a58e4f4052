"""One export: checkpoint → model → artifacts → verification → manifest → atomic publish."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import JobSettings
from . import formats, manifest, source, verify
from .errors import CANCELLED, ExportError
from .publish import MANIFEST, Publisher
from .result import ArtifactResult, ExportSucceeded

log = logging.getLogger("tfps_trainer.export")

def _check_cancelled() -> None:
    if CANCELLED.is_set():
        raise ExportError("Interrupted", "received a termination signal; nothing was published")


FILE_NAMES = {"savedmodel": "savedmodel", "tflite": "model.tflite", "onnx": "model.onnx"}


@dataclass
class Timings:
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[key] = self.seconds.get(key, 0.0) + now - since
        return now


def export(settings: JobSettings, checkpoint: str | None = None, step: int | None = None,
           timings: Timings | None = None) -> ExportSucceeded:
    """Run the whole export; raise :class:`ExportError` on any failure (nothing published then)."""
    t = timings or Timings()
    t0 = time.perf_counter()
    ex = settings.export
    args = dict(settings.model_args)
    root = Path(settings.paths.root)
    if not ex.formats:
        raise ExportError("SettingsInvalid", f"TFPS_JOB.export.formats: must name at least one format")

    contract = source.load_contract(settings)
    ckpt = source.find_checkpoint(settings, checkpoint, step)
    sig = source.input_signature(contract, args)
    as_dict = source.call_with_dict(contract, args, sig)
    inputs = source.samples(contract, args, sig, ex.verify_samples)
    model = source.build_and_restore(contract, args, ckpt, inputs, as_dict)
    serve = formats.serving(model, sig, inputs, as_dict)
    ref = formats.reference(serve, inputs)
    for name, value in ref.items():
        if not np.all(np.isfinite(value)):
            raise ExportError("CheckpointCorrupt", f"checkpoint {ckpt.rel}: the restored model outputs NaN/Inf on real inputs (output {name!r})")
    log.info("restored %s step %d from %s; %d verification samples", contract.module_name, ckpt.step, ckpt.rel, ex.verify_samples)
    t0 = t.add("restore", t0)

    calibration = None
    if "tflite" in ex.formats and ex.tflite_quantization == "int8":
        n_cal = ex.tflite_calibration_samples or formats.DEFAULT_CALIBRATION_SAMPLES
        skip = 0 if contract.fn("sample_inputs") else ex.verify_samples
        calibration = source.samples(contract, args, sig, n_cal, skip=skip, prefer_sample_fn=False)
        t0 = t.add("calibration_data", t0)

    entries: list[dict[str, Any]] = []
    failures: list[str] = []
    with Publisher(root) as pub, pub.staging(ckpt.step) as stage:
        if pub.stale_removed:
            log.info("removed stale %s", ", ".join(pub.stale_removed))

        def check(artifact: formats.Artifact) -> None:
            nonlocal t0
            _check_cancelled()
            t0 = t.add(f"convert_{artifact.format}", t0)
            path = stage / artifact.rel
            out, iface = verify.run_artifact(artifact, path, inputs)
            tol = verify.tolerance_for(artifact, ex)
            measured = verify.compare(artifact.label, ref, out, tol)
            size, sha, files = manifest.digest(path)
            log.info("%s: %d bytes, max abs error %.3g, max rel error %.3g -> %s", artifact.label, size,
                     measured.max_abs_error, measured.max_rel_error, "ok" if measured.passed else "FAILED")
            if not measured.passed:
                failures.append(verify.failure_text(artifact.label, measured, tol))
            entry: dict[str, Any] = {"format": artifact.format, "path": artifact.rel, "bytes": size, "sha256": sha,
                                     "quantization": artifact.quantization, "opset": artifact.opset, **iface,
                                     **artifact.details, "verification": measured.as_json(tol)}
            if files is not None:
                entry["files"] = files
            entries.append(entry)
            t0 = t.add(f"verify_{artifact.format}", t0)

        work = stage / ".work-savedmodel"
        sm_dir = stage / FILE_NAMES["savedmodel"] if "savedmodel" in ex.formats else work
        if "savedmodel" in ex.formats or "tflite" in ex.formats:
            sm = formats.savedmodel(model, serve, sm_dir)
            if "savedmodel" in ex.formats:
                check(sm)
            else:
                t0 = t.add("convert_savedmodel", t0)
        if "tflite" in ex.formats:
            check(formats.tflite(sm_dir, stage / FILE_NAMES["tflite"]))
            q = ex.tflite_quantization
            if q != "none":
                check(formats.tflite(sm_dir, stage / f"model_{q}.tflite", q, calibration))
        if "onnx" in ex.formats:
            check(formats.onnx(serve, stage / FILE_NAMES["onnx"], ex.onnx_opset))
        formats.remove_tree(work)
        if failures:
            raise ExportError("VerificationFailed", "; ".join(failures) + "; nothing was published")

        doc = manifest.build(
            job=settings.job_name, namespace=settings.namespace, model=contract.module_name,
            checkpoint_step=ckpt.step, checkpoint_path=ckpt.rel,
            inputs=[{"name": k, "shape": s.shape.as_list(), "dtype": s.dtype.name} for k, s in sig.items()],
            outputs=[{"name": k, "shape": [None, *v.shape[1:]], "dtype": str(v.dtype)} for k, v in ref.items()],
            artifacts=entries,
        )
        manifest.write(stage / MANIFEST, doc)
        _check_cancelled()
        final = pub.commit(stage, ckpt.step)
        t.add("publish", t0)

    rel_dir = final.relative_to(pub.root).as_posix()
    return ExportSucceeded(
        step=ckpt.step,
        path=rel_dir,
        manifest=f"{rel_dir}/{MANIFEST}",
        artifacts=[
            ArtifactResult(format=e["format"], path=f"{rel_dir}/{e['path']}", bytes=e["bytes"], sha256=e["sha256"],
                           max_error=e["verification"]["maxAbsError"], quantization=e["quantization"])
            for e in entries
        ],
    )
