"""The exporter's result, as the operator reads it from the container's termination message.

TF-free and Kubernetes-free: the operator imports this module to parse what the export Job wrote.

Transport
    On exit, ``python -m tfps_trainer.export`` writes ONE compact JSON object (no newline inside,
    always < :data:`~tfps_wire.termination.MAX_MESSAGE_BYTES` bytes, Kubernetes truncates
    termination messages at 4096) to its termination log
    (:func:`tfps_wire.termination.write_termination_log`), and the same line to stdout as its last
    line.

Every requested format has an outcome: it passed (an ``artifacts`` entry, published) or it failed
(a ``failed`` entry with its reason, not published). The formats in ``required`` decide the exit code.

Success (exit code 0: every required format passed; optional ones may be in ``failed``)::

    {"ok": true, "step": 120, "path": "exports/120", "manifest": "exports/120/manifest.json",
     "artifacts": [{"format": "savedmodel", "path": "exports/120/savedmodel", "bytes": 51234,
                    "sha256": "…", "maxError": 0.0, "quantization": null}, …],
     "failed": [{"format": "tflite", "quantization": "int8", "reason": "VerificationFailed",
                 "message": "tflite (int8): output 'probs': argmax agreement 0.70 < 0.90 …"}]}

    ``path``/``manifest``/``artifacts[].path`` are relative to the job root (``<mount>/<ns>/<job>``).
    ``maxError`` is the largest absolute difference from the TensorFlow model measured in
    verification. ``artifacts`` is dropped (``truncated: true``) only if the message would not fit
    in 4096 bytes; ``manifest.json`` always has everything.

Failure (exit code from :class:`tfps_wire.exitcodes.ExportCode`, never 0)::

    {"ok": false, "reason": "VerificationFailed", "message": "onnx: max abs error 3e-05 > ...",
     "step": 120, "path": "exports/120", "artifacts": [...], "failed": [...]}

    ``reason`` is one of :data:`Reason`; each reason has its own exit code
    (:data:`tfps_wire.exitcodes.EXPORT_TABLE`, which says what each means), so the operator can
    still name the failure when the termination message is missing. Exit codes not in the table
    (e.g. 137 when killed) mean the exporter died without reporting. When a required format
    failed but others passed, those were still published: ``path`` and ``artifacts`` say where
    (``exports/latest`` does not move to such an export).

Pre-flight (``--preflight``: fresh weights, nothing published; exit code 0 unless a required format
fails) writes a :class:`PreflightReport`::

    {"preflight": true, "ok": true, "artifacts": [{"format": "savedmodel", "bytes": 51234, "maxError": 0.0, ...}],
     "failed": [...], "requiredFailed": [], "warnings": [...]}

Readers: the operator (:mod:`tfps_operator.reconcile.messages`) and ``tfps run``::

    from .export_result import parse_message
    result = parse_message(container.state.terminated.message)   # ExportSucceeded | ExportFailed
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from .exitcodes import EXPORT_CODE_BY_REASON, ExportCode
from .termination import MAX_MESSAGE_BYTES

ArtifactFormat = Literal["savedmodel", "tflite", "onnx", "keras", "weights"]

Reason = Literal[
    "SettingsInvalid",
    "ContractError",
    "CheckpointNotFound",
    "CheckpointCorrupt",
    "ConversionFailed",
    "VerificationFailed",
    "UnsafePath",
    "PublishFailed",
    "Interrupted",
    "InternalError",
]
"""Why an export failed: the names of the failing codes of :data:`tfps_wire.exitcodes.EXPORT_TABLE`
(which says what each means)."""


class _Msg(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class ArtifactResult(_Msg):
    format: ArtifactFormat
    path: str
    bytes: int
    sha256: str
    max_error: float | None = None
    quantization: str | None = None


def artifact_label(fmt: str, quantization: str | None = None) -> str:
    """``tflite (int8)``, ``onnx``: how an artifact is named in messages, tables and ``required`` checks."""
    return f"{fmt} ({quantization})" if quantization not in (None, "none") else fmt


def human_size(n: int | None) -> str:
    """``19.9 KiB``, ``706 B``, ``-`` when unknown: an artifact's size in tables and the report."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class FormatFailure(_Msg):
    """A requested format (or TFLite variant) that was not published, and why."""

    format: ArtifactFormat
    quantization: str | None = None
    reason: Reason
    message: str

    @property
    def label(self) -> str:
        return artifact_label(self.format, self.quantization)


class ExportSucceeded(_Msg):
    ok: Literal[True] = True
    step: int
    path: str
    manifest: str
    artifacts: list[ArtifactResult] = Field(default_factory=list)
    failed: list[FormatFailure] = Field(default_factory=list)
    truncated: bool = False


class ExportFailed(_Msg):
    ok: Literal[False] = False
    reason: Reason
    message: str
    step: int | None = None
    path: str | None = None
    """Set when formats that passed were published although a required one failed."""
    manifest: str | None = None
    artifacts: list[ArtifactResult] = Field(default_factory=list)
    failed: list[FormatFailure] = Field(default_factory=list)
    truncated: bool = False


class PreflightArtifact(_Msg):
    """An artifact that converted and verified in the pre-flight (it was not kept)."""

    format: ArtifactFormat
    quantization: str | None = None
    bytes: int
    max_error: float | None = None
    argmax_agreement: float | None = None

    @property
    def label(self) -> str:
        return artifact_label(self.format, self.quantization)


class PreflightReport(_Msg):
    """What ``--preflight`` found: every requested format converted and verified on fresh weights."""

    preflight: Literal[True] = True
    ok: bool
    artifacts: list[PreflightArtifact] = Field(default_factory=list)
    failed: list[FormatFailure] = Field(default_factory=list)
    required_failed: list[str] = Field(default_factory=list)
    """Labels of the failed artifacts whose format is required."""
    warnings: list[str] = Field(default_factory=list)
    """E.g. ``tflite: output 'probs': inconclusive: outputs constant over the 64 verification inputs``."""

    @property
    def passed(self) -> list[str]:
        return [a.label for a in self.artifacts]


ExportResult = Annotated[ExportSucceeded | ExportFailed, Field(discriminator="ok")]
_ADAPTER: TypeAdapter[ExportSucceeded | ExportFailed] = TypeAdapter(ExportResult)


def parse_message(text: str) -> ExportSucceeded | ExportFailed:
    """Parse a termination message; raises ``ValueError`` (pydantic ``ValidationError``) if malformed."""
    return _ADAPTER.validate_json(text.strip())


def parse_preflight(text: str) -> PreflightReport:
    """Parse a pre-flight termination message; raises ``ValueError`` if malformed."""
    return PreflightReport.model_validate_json(text.strip())


def parse_any(text: str) -> ExportSucceeded | ExportFailed | PreflightReport:
    """A pre-flight report or an export result (a failed pre-flight that could not build the model is an
    :class:`ExportFailed`)."""
    if '"preflight":true' in text.replace(" ", ""):
        return parse_preflight(text)
    return parse_message(text)


FAILURE_MESSAGE_BYTES = 400
"""Each ``failed[].message`` in the termination message is cut to this; the manifest has it whole."""


def _shorten(text: str, limit: int) -> str:
    raw = text.encode()
    if len(raw) <= limit:
        return text
    cut = raw[: limit - 3].decode(errors="ignore")
    return (cut.rsplit(" ", 1)[0] if " " in cut[-40:] else cut) + "…"


def encode(result: ExportSucceeded | ExportFailed | PreflightReport) -> str:
    """One compact JSON line that fits in :data:`MAX_MESSAGE_BYTES`: failure messages are shortened first,
    then the artifact list is dropped (``truncated``), then the message itself is shortened."""
    failed = [f.model_copy(update={"message": _shorten(f.message, FAILURE_MESSAGE_BYTES)}) for f in result.failed]
    result = result.model_copy(update={"failed": failed})
    line = result.model_dump_json(by_alias=True)
    if len(line.encode()) < MAX_MESSAGE_BYTES:
        return line
    if not isinstance(result, PreflightReport):
        result = result.model_copy(update={"artifacts": [], "truncated": True})
        line = result.model_dump_json(by_alias=True)
        if len(line.encode()) < MAX_MESSAGE_BYTES:
            return line
    short_failed = [f.model_copy(update={"message": _shorten(f.message, 120)}) for f in result.failed]
    result = result.model_copy(update={"failed": short_failed})
    if isinstance(result, ExportFailed):
        budget = max(
            200, MAX_MESSAGE_BYTES - 200 - len(result.model_copy(update={"message": ""}).model_dump_json().encode())
        )
        result = result.model_copy(update={"message": _shorten(result.message, budget)})
    line = result.model_dump_json(by_alias=True)
    if len(line.encode()) >= MAX_MESSAGE_BYTES:  # pathological: many failed formats
        result = result.model_copy(update={"failed": result.failed[:2]})
        line = result.model_dump_json(by_alias=True)
    return line


def exit_code(result: ExportSucceeded | ExportFailed | PreflightReport) -> int:
    if isinstance(result, PreflightReport):
        if result.ok:
            return int(ExportCode.OK)
        first = next((f for f in result.failed if f.label in result.required_failed), None)
        return EXPORT_CODE_BY_REASON[first.reason] if first else int(ExportCode.VERIFICATION_FAILED)
    return int(ExportCode.OK) if result.ok else EXPORT_CODE_BY_REASON[result.reason]


class ExportError(Exception):
    """Export failed for ``reason``; ``message`` names the component, the value and the limit."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message

    @property
    def exit_code(self) -> int:
        return EXPORT_CODE_BY_REASON[self.reason]

    def to_result(self) -> ExportFailed:
        return ExportFailed(reason=self.reason, message=self.message)
