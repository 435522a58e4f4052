"""The exporter's result, as the operator reads it from the container's termination message.

TF-free and Kubernetes-free: the operator imports this module to parse what the export Job wrote.

Transport
    On exit, ``python -m tfps_trainer.export`` writes ONE compact JSON object (no newline inside,
    always < :data:`MAX_MESSAGE_BYTES` bytes, Kubernetes truncates termination messages at 4096)
    to the file named by env ``TFPS_TERMINATION_LOG`` (default ``/dev/termination-log``, written only
    if it exists; skipped when unwritable), and the same line to stdout as its last line.

Success (exit code 0)::

    {"ok": true, "step": 120, "path": "exports/120", "manifest": "exports/120/manifest.json",
     "artifacts": [{"format": "savedmodel", "path": "exports/120/savedmodel", "bytes": 51234,
                    "sha256": "…", "maxError": 0.0, "quantization": null}, …]}

    ``path``/``manifest``/``artifacts[].path`` are relative to the job root (``<mount>/<ns>/<job>``).
    ``maxError`` is the largest absolute difference from the TensorFlow model measured in
    verification. ``artifacts`` is dropped (``truncated: true``) only if the message would not fit
    in 4096 bytes; ``manifest.json`` always has everything.

Failure (exit code from :class:`ExitCode`, never 0)::

    {"ok": false, "reason": "VerificationFailed", "message": "onnx: max abs error 3e-05 > ..."}

``reason`` is one of :data:`Reason`; each reason has its own exit code (:data:`EXIT_CODES`), so
the operator can still name the failure when the termination message is missing. Exit codes not in
the table (e.g. 137 when killed) mean the exporter died without reporting.

Operator usage::

    from tfps_trainer.export.result import parse_message
    result = parse_message(container.state.terminated.message)   # ExportSucceeded | ExportFailed
"""

from __future__ import annotations

import os
from enum import IntEnum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

MAX_MESSAGE_BYTES = 4096
DEFAULT_TERMINATION_LOG = "/dev/termination-log"

ArtifactFormat = Literal["savedmodel", "tflite", "onnx"]

Reason = Literal[
    "SettingsInvalid",  # TFPS_JOB or the command line is malformed
    "ContractError",  # the model module cannot be loaded / breaks the contract / unsupported model
    "CheckpointNotFound",  # no checkpoint (or not the requested step)
    "CheckpointCorrupt",  # the checkpoint cannot be restored into the model, or holds NaN/Inf
    "ConversionFailed",  # a format could not be produced (e.g. an op the format does not support)
    "VerificationFailed",  # an artifact's outputs differ from the TensorFlow model beyond tolerance
    "UnsafePath",  # a path escapes the job root or is a symlink
    "PublishFailed",  # I/O error while writing or renaming the export
    "Interrupted",  # SIGTERM/SIGINT: nothing was published
    "InternalError",  # a bug; the message has the exception
]


class ExitCode(IntEnum):
    OK = 0
    INTERNAL_ERROR = 1
    SETTINGS_INVALID = 2
    CONTRACT_ERROR = 3
    CHECKPOINT_NOT_FOUND = 4
    CHECKPOINT_CORRUPT = 5
    CONVERSION_FAILED = 6
    VERIFICATION_FAILED = 7
    UNSAFE_PATH = 8
    PUBLISH_FAILED = 9
    INTERRUPTED = 10


EXIT_CODES: dict[str, ExitCode] = {
    "SettingsInvalid": ExitCode.SETTINGS_INVALID,
    "ContractError": ExitCode.CONTRACT_ERROR,
    "CheckpointNotFound": ExitCode.CHECKPOINT_NOT_FOUND,
    "CheckpointCorrupt": ExitCode.CHECKPOINT_CORRUPT,
    "ConversionFailed": ExitCode.CONVERSION_FAILED,
    "VerificationFailed": ExitCode.VERIFICATION_FAILED,
    "UnsafePath": ExitCode.UNSAFE_PATH,
    "PublishFailed": ExitCode.PUBLISH_FAILED,
    "Interrupted": ExitCode.INTERRUPTED,
    "InternalError": ExitCode.INTERNAL_ERROR,
}
REASONS_BY_EXIT_CODE: dict[int, str] = {int(code): reason for reason, code in EXIT_CODES.items()}


class _Msg(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class ArtifactResult(_Msg):
    format: ArtifactFormat
    path: str
    bytes: int
    sha256: str
    max_error: float | None = None
    quantization: str | None = None


class ExportSucceeded(_Msg):
    ok: Literal[True] = True
    step: int
    path: str
    manifest: str
    artifacts: list[ArtifactResult] = Field(default_factory=list)
    truncated: bool = False


class ExportFailed(_Msg):
    ok: Literal[False] = False
    reason: Reason
    message: str


ExportResult = Annotated[Union[ExportSucceeded, ExportFailed], Field(discriminator="ok")]
_ADAPTER: TypeAdapter[ExportSucceeded | ExportFailed] = TypeAdapter(ExportResult)


def parse_message(text: str) -> ExportSucceeded | ExportFailed:
    """Parse a termination message; raises ``ValueError`` (pydantic ``ValidationError``) if malformed."""
    return _ADAPTER.validate_json(text.strip())


def encode(result: ExportSucceeded | ExportFailed) -> str:
    """One compact JSON line that fits in :data:`MAX_MESSAGE_BYTES` (artifacts/message shortened if needed)."""
    line = result.model_dump_json(by_alias=True)
    if len(line.encode()) < MAX_MESSAGE_BYTES:
        return line
    if isinstance(result, ExportSucceeded):
        return result.model_copy(update={"artifacts": [], "truncated": True}).model_dump_json(by_alias=True)
    budget = MAX_MESSAGE_BYTES - 200
    short = result.message.encode()[:budget].decode(errors="ignore") + "…"
    return result.model_copy(update={"message": short}).model_dump_json(by_alias=True)


def exit_code(result: ExportSucceeded | ExportFailed) -> int:
    return int(ExitCode.OK) if result.ok else int(EXIT_CODES[result.reason])


def write_termination_log(line: str, path: str | None = None) -> bool:
    """Write ``line`` to the termination log; False (and no exception) when it cannot be written.

    The default ``/dev/termination-log`` is only written when it exists (Kubernetes mounts it), so a
    local run as root never creates a stray file in /dev; an explicit path is created.
    """
    target = path or os.environ.get("TFPS_TERMINATION_LOG") or DEFAULT_TERMINATION_LOG
    if target == DEFAULT_TERMINATION_LOG and not os.path.exists(target):
        return False
    try:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(line)
        return True
    except OSError:
        return False

