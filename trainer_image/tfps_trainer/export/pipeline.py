"""One export: checkpoint → model → every requested artifact, each converted and judged on its own →
manifest → atomic publish of those that passed.

Each artifact (a format, or a TFLite variant) has its own outcome: it passed verification and is
published, or it failed and is recorded with its reason in the manifest and the result. The export
as a whole fails only when a *required* format failed (``settings.export.required``), and publishes
nothing only when nothing passed. ``--preflight`` runs the same conversions and verification on a
model with fresh weights, in a scratch directory, and publishes nothing.

Before each artifact the pipeline writes a line to the journal (:mod:`.journal`): if a converter
or runtime crashes the process (a segfault in TFLite calibration, say), the supervising process
(:mod:`.__main__`) reads which artifact it was and runs the export again without it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfps_wire import export_manifest as manifest
from tfps_wire import lineage as lineage_of
from tfps_wire.export_result import (
    ArtifactResult,
    ExportError,
    ExportFailed,
    ExportSucceeded,
    FormatFailure,
    PreflightArtifact,
    PreflightReport,
)
from tfps_wire.job_settings import ExportFormat, ExportSettings, JobSettings, OutputKind
from tfps_wire.lineage import Lineage
from tfps_wire.uri import is_uri

from . import formats, report_html, size_limits, source, verify
from .artifact import FILE_NAMES, Artifact, label, tflite_name
from .errors import CANCELLED, COMMITTING
from .journal import Journal
from .publish import MANIFEST, Publisher, lay_out_for_kserve

log = logging.getLogger("tfps_trainer.export")

RECURRENT_BATCH = 1
"""The fixed batch of the TFLite route for recurrent layers."""


def _check_cancelled() -> None:
    if CANCELLED.is_set():
        raise ExportError("Interrupted", "received a termination signal; nothing was published")


@dataclass
class Timings:
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[key] = self.seconds.get(key, 0.0) + now - since
        return now


@dataclass(frozen=True)
class Target:
    """One artifact to produce."""

    format: str
    quantization: str | None = None

    @property
    def label(self) -> str:
        return label(self.format, self.quantization)


def targets(ex: ExportSettings) -> list[Target]:
    """The artifacts ``ex`` asks for, in the order they are produced (SavedModel first: TFLite and ONNX
    are converted from it)."""
    order = ("savedmodel", "keras", "weights", "tflite", "onnx")
    out: list[Target] = []
    for fmt in sorted(set(ex.formats), key=order.index):
        if fmt == "tflite":
            out.append(Target("tflite", "none"))
            if ex.tflite_quantization != "none":
                out.append(Target("tflite", ex.tflite_quantization))
        else:
            out.append(Target(fmt))
    return out


def required_formats(ex: ExportSettings) -> set[ExportFormat]:
    return set(ex.required) & set(ex.formats)


@dataclass
class Prepared:
    """The model and what every artifact is judged against."""

    contract: Any
    args: dict[str, Any]
    signature: dict[str, Any]
    as_dict: bool
    samples: source.Samples
    model: Any
    serve: formats.Serving
    ref: dict[str, np.ndarray]
    kinds: dict[str, OutputKind]
    labels: dict[str, np.ndarray]
    calibration: dict[str, np.ndarray] | None
    checkpoint: source.CheckpointRef | None


def prepare(
    settings: JobSettings, checkpoint: str | None, step: int | None, t: Timings, fresh: bool = False
) -> Prepared:
    """Load the contract, restore the checkpoint (or build fresh weights), draw the samples, and compute
    the TensorFlow model's reference outputs."""
    t0 = time.perf_counter()
    ex = settings.export
    args = dict(settings.model_args)
    if not ex.formats:
        raise ExportError("SettingsInvalid", "TFPS_JOB.export.formats: must name at least one format")
    contract = source.load_contract(settings)
    program = source.program_mode(settings)  # the model the program saved: trained weights, no restore
    ckpt = None if fresh or program else source.find_checkpoint(settings, checkpoint, step)
    sig = source.input_signature(contract, args)
    as_dict = source.call_with_dict(contract, args, sig)
    drawn = source.samples(contract, args, sig, ex.verify_samples)
    if ckpt is None:
        model = source.build_model(contract, args, drawn.inputs, as_dict)
    else:
        model = source.build_and_restore(contract, args, ckpt, drawn.inputs, as_dict)
    serve = formats.serving(model, sig, drawn.inputs, as_dict)
    ref = formats.reference(serve, drawn.inputs)
    where = contract.module_name if program else "fresh weights" if ckpt is None else f"checkpoint {ckpt.rel}"
    for name, value in ref.items():
        if not np.all(np.isfinite(value)):
            raise ExportError(
                "ContractError" if ckpt is None and not program else "CheckpointCorrupt",
                f"{where}: the restored model outputs NaN/Inf on real inputs (output {name!r})",
            )
    labels = source.labels_by_output(drawn.labels, serve.output_names)
    kinds = {name: verify.output_kind(r, labels.get(name), ex.output_kinds.get(name)) for name, r in ref.items()}
    unknown = sorted(set(ex.output_kinds) - set(ref))
    if unknown:
        raise ExportError(
            "SettingsInvalid",
            f"export.verify.outputKinds: {', '.join(unknown)} not among the model's outputs {sorted(ref)}",
        )
    t0 = t.add("restore", t0)
    calibration = None
    if any(tg.quantization == "int8" for tg in targets(ex)):
        n_cal = ex.tflite_calibration_samples or formats.DEFAULT_CALIBRATION_SAMPLES
        skip = 0 if contract.fn("sample_inputs") else ex.verify_samples
        calibration = source.samples(contract, args, sig, n_cal, skip=skip, prefer_sample_fn=False).inputs
        t.add("calibration_data", t0)
    log.info(
        "%s %s from %s; %d verification inputs (%s); outputs %s",
        "built" if ckpt is None else "restored",
        contract.module_name,
        where,
        ex.verify_samples,
        drawn.origin,
        ", ".join(f"{k} ({v})" for k, v in kinds.items()),
    )
    return Prepared(contract, args, sig, as_dict, drawn, model, serve, ref, kinds, labels, calibration, ckpt)


# --- producing and judging each artifact ------------------------------------------------------------


@dataclass
class Outcomes:
    passed: list[dict[str, Any]] = field(default_factory=list)
    """Manifest entries of the artifacts that passed."""
    failed: list[FormatFailure] = field(default_factory=list)
    judgements: dict[str, verify.Judgement] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def fail(self, target: Target, exc: ExportError) -> None:
        log.warning("%s: %s", target.label, exc.message)
        self.failed.append(
            FormatFailure(
                format=target.format,
                quantization=target.quantization,
                reason=exc.reason,
                message=exc.message,
            )
        )


class _Producer:
    """Converts and judges every target into ``stage`` (files of failed targets are removed)."""

    def __init__(
        self,
        prep: Prepared,
        ex: ExportSettings,
        stage: Path,
        journal: Journal,
        t: Timings,
        skip: dict[str, FormatFailure],
        preflight: bool = False,
    ) -> None:
        self.prep, self.ex, self.stage, self.journal, self.t, self.skip = prep, ex, stage, journal, t, skip
        self.preflight = preflight
        self.work = stage / ".work"
        self.work.mkdir(exist_ok=True)
        self.out = Outcomes()
        self.saved_model: Path | None = None
        self.saved_model_error: ExportError | None = None
        self.fixed_batch_model: Path | None = None
        self.runtime = self._keras_runtime()

    def run(self) -> Outcomes:
        for target in targets(self.ex):
            _check_cancelled()
            if target.label in self.skip:
                self.out.failed.append(self.skip[target.label])
                continue
            t0 = time.perf_counter()
            try:
                artifact = self._convert(target)
                t0 = self.t.add(f"convert_{target.format}", t0)
                self._judge(target, artifact)
            except ExportError as exc:
                if exc.reason == "Interrupted":
                    raise
                self.out.fail(target, exc)
                self._remove(target)
            self.t.add(f"verify_{target.format}", t0)
        if self.saved_model is not None and any(e["format"] == "savedmodel" for e in self.out.passed):
            os.rename(self.saved_model, self.stage / FILE_NAMES["savedmodel"])
        shutil.rmtree(self.work, ignore_errors=True)
        return self.out

    def _convert(self, target: Target) -> Artifact:
        self.journal.begin(target.format, target.quantization, "convert")
        fmt, prep = target.format, self.prep
        if fmt == "savedmodel":
            return self._saved_model()
        if fmt == "keras":
            return formats.keras_file(prep.model, self.stage / FILE_NAMES["keras"])
        if fmt == "weights":
            return formats.weights_file(prep.model, self.stage / FILE_NAMES["weights"])
        too_large = size_limits.refusal(fmt, target.quantization, self._weight_bytes(target.quantization))
        if too_large:
            raise ExportError("ConversionFailed", too_large)
        sm = self._saved_model_dir(target)
        if fmt == "onnx":
            return formats.onnx(sm, self.stage / FILE_NAMES["onnx"], self.ex.onnx_opset, prep.serve)
        return self._tflite(target, sm)

    def _weight_bytes(self, quantization: str | None) -> int:
        weights = self.prep.model.weights
        return size_limits.weight_bytes(
            ((int(np.prod(w.shape)), np.dtype(getattr(w.dtype, "as_numpy_dtype", w.dtype)).itemsize) for w in weights),
            quantization,
        )

    def _saved_model(self) -> Artifact:
        path = self.work / FILE_NAMES["savedmodel"]
        try:
            artifact = formats.savedmodel(self.prep.model, self.prep.serve, path)
        except ExportError as exc:
            self.saved_model_error = exc
            raise
        self.saved_model = path
        return artifact

    def _saved_model_dir(self, target: Target) -> Path:
        """The SavedModel that TFLite and ONNX are converted from (written now if not requested)."""
        if self.saved_model is None and self.saved_model_error is None:
            try:
                self._saved_model()
            except ExportError:
                pass
        if self.saved_model is None:
            why = self.saved_model_error.message if self.saved_model_error else "not written"
            raise ExportError(
                "ConversionFailed",
                f"{target.label}: not attempted: the SavedModel it is converted from could not be written ({why})",
            )
        return self.saved_model

    def _tflite(self, target: Target, sm: Path) -> Artifact:
        q = str(target.quantization)
        path = self.stage / tflite_name(q)
        source_dir = self.fixed_batch_model or sm
        try:
            artifact = formats.tflite(source_dir, path, q, self.prep.calibration)
        except formats.TensorListError as exc:
            if self.fixed_batch_model is not None:
                raise
            log.info(
                "%s: dynamic batch failed on TensorList ops (%s); converting with a fixed batch of %d",
                target.label,
                exc.message,
                RECURRENT_BATCH,
            )
            self.fixed_batch_model = self.work / "savedmodel-batch1"
            formats.savedmodel(self.prep.model, self.prep.serve, self.fixed_batch_model, batch=RECURRENT_BATCH)
            artifact = formats.tflite(self.fixed_batch_model, path, q, self.prep.calibration)
        if self.fixed_batch_model is not None:
            artifact.details["batch"] = RECURRENT_BATCH
            artifact.notes.append(
                f"fixed batch of {RECURRENT_BATCH}: TFLite lowers recurrent layers (TensorList ops) "
                "to built-ins only with static shapes; feed one example per invoke"
            )
        return artifact

    def _judge(self, target: Target, artifact: Artifact) -> None:
        prep = self.prep
        self.journal.begin(target.format, target.quantization, "verify")
        path = self.saved_model if target.format == "savedmodel" else self.stage / artifact.rel
        assert path is not None
        out, iface = verify.run_artifact(artifact, path, prep.samples.inputs, self.runtime)
        limits = verify.tolerance_for(artifact, self.ex)
        judged = verify.judge(artifact, prep.ref, out, limits, prep.kinds, prep.labels)
        self.out.judgements[target.label] = judged
        size, sha, files = manifest.digest(path)
        log.info(
            "%s: %d bytes, %s -> %s",
            artifact.label,
            size,
            ", ".join(
                f"{o.name}: err {o.max_abs_error:.3g}/{o.bound:.3g}"
                + (f" agree {o.argmax_agreement:.3f}" if o.argmax_agreement is not None else "")
                for o in judged.outputs
            ),
            "ok" if judged.passed else "FAILED",
        )
        self.out.warnings += [f"{artifact.label}: {w}" for w in judged.warnings]
        if not judged.passed:
            if not (self.preflight and artifact.quantized and judged.finite):
                raise ExportError("VerificationFailed", judged.failure_text())
            # Untrained weights give near-tied classes and small ranges: a quantized artifact's figures
            # predict little about the trained model's, which the export judges again.
            self.out.warnings.append(f"{judged.failure_text()} on fresh weights (judged again on the trained model)")
        entry: dict[str, Any] = {
            "format": artifact.format,
            "path": artifact.rel,
            "bytes": size,
            "sha256": sha,
            "quantization": artifact.quantization,
            "opset": artifact.opset,
            **iface,
            **artifact.details,
            "notes": artifact.notes,
            "verification": judged.as_json(),
        }
        if files is not None:
            entry["files"] = files
        self.out.passed.append(entry)

    def _remove(self, target: Target) -> None:
        if target.format == "savedmodel":
            return  # it stays in .work (TFLite and ONNX may still be converted from it)
        name = tflite_name(str(target.quantization)) if target.format == "tflite" else FILE_NAMES[target.format]
        path = self.stage / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    def _keras_runtime(self) -> verify.Runtime:
        prep = self.prep
        names = list(prep.signature)

        def call(model: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            import tensorflow as tf

            x = {k: tf.constant(v) for k, v in inputs.items()}
            y = model(x if prep.as_dict else x[names[0]], training=False)
            flat = list(y.values()) if isinstance(y, dict) else (list(y) if isinstance(y, (list, tuple)) else [y])
            return {n: np.asarray(v) for n, v in zip(prep.serve.output_names, flat)}

        def load_keras(path: Path) -> Any:
            return _keras_module(prep.model).models.load_model(str(path), custom_objects=prep.contract.custom_objects())

        def fresh_model() -> Any:
            return source.build_model(prep.contract, prep.args, prep.samples.inputs, prep.as_dict)

        return verify.Runtime(load_keras=load_keras, fresh_model=fresh_model, call=call)


def _keras_module(model: Any) -> Any:
    """``tf_keras`` for a model built with it, else Keras 3."""
    if type(model).__module__.startswith("tf_keras") or any(
        c.__module__.startswith("tf_keras") for c in type(model).__mro__
    ):
        import tf_keras

        return tf_keras
    import keras

    return keras


def _write_report(stage: Path, doc: dict[str, Any]) -> None:
    """``report.html`` beside the manifest (published with it). A convenience: if it cannot be rendered
    the export still publishes, with a warning in the log."""
    try:
        report_html.write(stage / report_html.REPORT, doc)
    except Exception:
        log.warning("report.html could not be written", exc_info=True)


# --- the two entry points ---------------------------------------------------------------------------


def _no_artifact(out: Outcomes) -> ExportError:
    first = out.failed[0]
    return ExportError(first.reason, "; ".join(f.message for f in out.failed) + "; nothing was published")


def export(
    settings: JobSettings,
    checkpoint: str | None = None,
    step: int | None = None,
    timings: Timings | None = None,
    skip: dict[str, FormatFailure] | None = None,
    lineage: Lineage | None = None,
) -> ExportSucceeded | ExportFailed:
    """Export the checkpoint; publish every artifact that passed. Raises :class:`ExportError` when nothing
    can be published (then nothing is); returns :class:`ExportFailed` when a required format failed but
    others were published. ``lineage``: what produced the model, as the operator or ``tfps run`` told it
    (``TFPS_LINEAGE``), written into the manifest with the code the export was given."""
    t = timings or Timings()
    ex = settings.export
    prep = prepare(settings, checkpoint, step, t)
    ckpt = _exported_checkpoint(settings, prep)
    objects = None
    if is_uri(settings.paths.root):
        from .objects import ObjectPublisher  # TensorFlow's filesystem; imported only for object storage

        objects = ObjectPublisher(settings.paths.root)
    with contextlib.ExitStack() as stack:
        if objects is not None:
            # object storage: build and verify in a local scratch directory, then upload (objects.py)
            local_root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tfps-export-")))
            stale = objects.clean_incomplete()
        else:
            local_root = Path(settings.paths.root)
        pub = stack.enter_context(Publisher(local_root))
        stage = stack.enter_context(pub.staging(ckpt.step))
        if objects is None:
            stale = pub.stale_removed
        if stale:
            log.info("removed stale %s", ", ".join(stale))
        out = _Producer(prep, ex, stage, Journal(), t, skip or {}).run()
        if not out.passed:
            raise _no_artifact(out)
        t0 = time.perf_counter()
        missing_required = sorted({f.format for f in out.failed} & required_formats(ex))
        doc = _manifest(settings, prep, ckpt, out, complete=not missing_required, lineage=lineage)
        manifest.write(stage / MANIFEST, doc)
        _write_report(stage, doc)
        _check_cancelled()
        COMMITTING.set()
        # TF Serving's layout (serving/<step>/) holds the SavedModel of complete exports only
        serves = not missing_required and any(e["format"] == "savedmodel" for e in out.passed)
        if not missing_required:  # KServe's runtimes read a complete export only (published with it)
            lay_out_for_kserve(stage, ckpt.step)
        if objects is not None:
            final_uri = objects.publish(stage, ckpt.step, serving=serves)
            rel = final_uri[len(settings.paths.root.rstrip("/")) + 1 :]
        else:
            final = pub.commit(stage, ckpt.step)
            rel = final.relative_to(pub.root).as_posix()
        t.add("publish", t0)
    return _result(rel, ckpt.step, out, missing_required)


@dataclass(frozen=True)
class ExportedCheckpoint:
    """What an export is of: the checkpoint's step and path (relative to the job root; None when unknown),
    and for a script-mode program the source of its saved model (else None)."""

    step: int
    path: str | None
    source: dict[str, Any] | None


def _exported_checkpoint(settings: JobSettings, prep: Prepared) -> ExportedCheckpoint:
    if prep.checkpoint is not None:
        return ExportedCheckpoint(prep.checkpoint.step, prep.checkpoint.rel or None, None)
    # script mode: the program's saved model, at the step of its latest checkpoint
    from . import program

    step, rel = program.exported_step(settings)
    return ExportedCheckpoint(step, rel or None, dict(prep.contract.module.SOURCE))


def _manifest(
    settings: JobSettings,
    prep: Prepared,
    ckpt: ExportedCheckpoint,
    out: Outcomes,
    complete: bool,
    lineage: Lineage | None = None,
) -> dict[str, Any]:
    """The export's manifest: the model's interface, the artifacts that passed and those that failed, and
    what produced the model."""
    ex = settings.export
    code = lineage_of.code_digest(settings.code_dir) if settings.code_dir and os.path.isdir(settings.code_dir) else None
    return manifest.build(
        job=settings.job_name,
        namespace=settings.namespace,
        model=prep.contract.module_name,
        checkpoint_step=ckpt.step,
        checkpoint_path=ckpt.path,
        source=ckpt.source,
        inputs=[{"name": k, "shape": s.shape.as_list(), "dtype": s.dtype.name} for k, s in prep.signature.items()],
        outputs=[
            {"name": k, "shape": [None, *v.shape[1:]], "dtype": str(v.dtype), "kind": prep.kinds[k]}
            for k, v in prep.ref.items()
        ],
        artifacts=out.passed,
        failed=[f.model_dump(by_alias=True) for f in out.failed],
        required=sorted(required_formats(ex)),
        complete=complete,
        samples={"count": ex.verify_samples, "origin": prep.samples.origin, "labels": bool(prep.labels)},
        lineage=lineage_of.manifest_section(lineage, code),
    )


def _result(rel_dir: str, step: int, out: Outcomes, missing_required: Sequence[str]) -> ExportSucceeded | ExportFailed:
    """The exporter's result for an export published to ``rel_dir`` (relative to the job root): failed when
    a required format is missing from it."""
    artifacts = [
        ArtifactResult(
            format=e["format"],
            path=f"{rel_dir}/{e['path']}",
            bytes=e["bytes"],
            sha256=e["sha256"],
            max_error=e["verification"]["maxAbsError"],
            quantization=e["quantization"],
        )
        for e in out.passed
    ]
    where = {
        "step": step,
        "path": rel_dir,
        "manifest": f"{rel_dir}/{MANIFEST}",
        "artifacts": artifacts,
        "failed": out.failed,
    }
    if missing_required:
        first = next(f for f in out.failed if f.format in missing_required)
        return ExportFailed(
            reason=first.reason,
            message=(
                f"required format(s) {', '.join(missing_required)} failed: {first.message}; the formats that passed "
                f"were published to {rel_dir} (exports/latest not moved)"
            ),
            **where,
        )
    return ExportSucceeded(**where)


def preflight(
    settings: JobSettings, timings: Timings | None = None, skip: dict[str, FormatFailure] | None = None
) -> PreflightReport:
    """Every requested conversion and verification on fresh weights, in a scratch directory; nothing is
    published. Raises :class:`ExportError` when the model itself cannot be built or run."""
    t = timings or Timings()
    ex = settings.export
    prep = prepare(settings, None, None, t, fresh=True)
    scratch = Path(tempfile.mkdtemp(prefix="tfps-preflight-"))
    try:
        out = _Producer(prep, ex, scratch, Journal(), t, skip or {}, preflight=True).run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    required = required_formats(ex)
    required_failed = [f.label for f in out.failed if f.format in required]
    checked = [
        PreflightArtifact(
            format=e["format"],
            quantization=e["quantization"],
            bytes=e["bytes"],
            max_error=e["verification"]["maxAbsError"],
            argmax_agreement=e["verification"]["argmaxAgreement"],
        )
        for e in out.passed
    ]
    return PreflightReport(
        ok=not required_failed,
        artifacts=checked,
        failed=out.failed,
        required_failed=required_failed,
        warnings=out.warnings,
    )
