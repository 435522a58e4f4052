"""The exit codes of the trainer and of the exporter, and what they tell whoever restarts them.

TF-free: the trainer and the exporter exit with these codes; the operator (its failure policy, its
reading of a failed export Job) and the local runner read them. Two tables, one per process, because
the same number means different things: :data:`TABLE` for ``python -m tfps_trainer`` (every trainer
pod) and :data:`EXPORT_TABLE` for ``python -m tfps_trainer.export`` (the export and pre-flight Jobs).

Every code has a *kind* (the exporter's codes use the same words to say whether another attempt can
succeed; :func:`kind` and the restart policies below are the trainer's):

* ``success``: the role finished its work.
* ``retryable``: the environment failed, not the job (a lost parameter server, a preemption, storage
  or infrastructure trouble, a kill by a signal): restarting can succeed.
* ``permanent``: the job itself is wrong (bad arguments, an invalid model module, NaN/Inf under
  ``checkNumerics``): restarting repeats the failure, so the job fails at once.
* ``unknown``: an unexpected error (a bug or an unforeseen condition). ``OnFailure`` retries it
  (bounded by ``backoffLimit``), ``ExitCode`` treats it as permanent (as Kubeflow does with 1-127).

In script mode the user's program's own exit code is reported and read through the trainer's table (a
program killed by signal N: 128 + N), so a program can ask for a retry with 5, 6 or 7.

A *preempted* exit (``PREEMPTED``, or a pod that vanished: evicted, drained, deleted) restarts the
job without counting against ``runPolicy.backoffLimit``: nothing about the job was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

Kind = Literal["success", "retryable", "permanent", "unknown"]

OK = 0
INTERNAL = 1
CONFIG = 2
CONTRACT = 3
NUMERICS = 4
LOST_CLUSTER = 5
PREEMPTED = 6
INFRASTRUCTURE = 7
INCOMPATIBLE = 8
"""Script mode: the program failed on a known, deterministic incompatibility (a Keras 2 program under
Keras 3, say), recognised from its output; the reason keeps the program's own exit code and the hint."""
CANNOT_RUN = 9
"""Script mode: the program failed as every attempt would (a module it imports is missing, its source does not
compile, it rejected its command line, a file its command line names is missing): no restart."""
PREEMPTION_SAVED = 42
"""Script mode: TensorFlow's ``PreemptionCheckpointHandler`` (off GCP) saved a checkpoint on SIGTERM and exited
with 42; a preemption like :data:`PREEMPTED`."""
PROGRAM_NOT_FOUND = 127
"""Script mode: the program could not be started (no such file, not executable), as a shell reports it."""
INTERRUPTED = 130
SIGNAL_BASE = 128
"""A process killed by signal N exits 128 + N (137: SIGKILL, the OOM killer; 143: SIGTERM unhandled)."""


@dataclass(frozen=True)
class ExitCode:
    code: int
    name: str
    kind: Kind
    meaning: str


TABLE: tuple[ExitCode, ...] = (
    ExitCode(OK, "OK", "success", "success (chief: final checkpoint written; evaluator: final checkpoint evaluated)"),
    ExitCode(INTERNAL, "Internal", "unknown", "unexpected internal error; the reason names the exception"),
    ExitCode(
        CONFIG, "BadArguments", "permanent", "TF_CONFIG or TFPS_JOB missing or malformed (the reason names the field)"
    ),
    ExitCode(
        CONTRACT,
        "InvalidModel",
        "permanent",
        "model contract error: module not importable, a function missing or raising, checkpoint does not fit the model",
    ),
    ExitCode(
        NUMERICS,
        "Numerics",
        "permanent",
        "NaN/Inf loss detected with checkNumerics; the bad state was not checkpointed",
    ),
    ExitCode(
        LOST_CLUSTER,
        "LostParameterServer",
        "retryable",
        "a parameter server (or, in an all-reduce job, another worker) became unavailable; restart the job to "
        "resume from the latest checkpoint",
    ),
    ExitCode(
        PREEMPTED,
        "Preempted",
        "retryable",
        "stopped by SIGTERM (preemption, drain, suspend, deletion) after saving a checkpoint of the last step",
    ),
    ExitCode(INFRASTRUCTURE, "Infrastructure", "retryable", "the environment failed: checkpoint storage not writable"),
    ExitCode(
        INCOMPATIBLE,
        "Incompatible",
        "permanent",
        "script mode: the program failed on a known incompatibility its output shows (e.g. a Keras 2 program "
        "under Keras 3); the reason has its own exit code and a hint naming the fix",
    ),
    ExitCode(
        CANNOT_RUN,
        "ProgramCannotRun",
        "permanent",
        "script mode: the program failed as every attempt would: a module it imports is missing, its source does not "
        "compile, it rejected its command line, or a file its command line names is missing; the reason names it "
        "and how to provide it",
    ),
    ExitCode(
        PREEMPTION_SAVED,
        "PreemptionSaved",
        "retryable",
        "script mode: TensorFlow's PreemptionCheckpointHandler saved a checkpoint on SIGTERM and exited (a preemption, "
        "as 6)",
    ),
    ExitCode(
        PROGRAM_NOT_FOUND,
        "ProgramNotFound",
        "permanent",
        "script mode: the program could not be started (no such file, not executable)",
    ),
    ExitCode(INTERRUPTED, "Interrupted", "retryable", "interrupted (SIGINT)"),
)
"""The trainer's codes (``python -m tfps_trainer``: every trainer pod; in script mode, also the program's)."""
BY_CODE: dict[int, ExitCode] = {e.code: e for e in TABLE}


def kind(code: int | None) -> Kind:
    """The kind of an exit code; ``None`` (the pod vanished) is retryable, as is any signal (≥ 128)."""
    if code is None:
        return "retryable"
    if code in BY_CODE:
        return BY_CODE[code].kind
    return "retryable" if code > SIGNAL_BASE else "unknown"


def preempted(code: int | None) -> bool:
    """A stop that is no fault of the job: a graceful SIGTERM exit, or a pod that vanished."""
    return code is None or code in (PREEMPTED, PREEMPTION_SAVED)


def describe(code: int | None) -> str:
    """``exit code 3 (InvalidModel, permanent)``; signals are named (``exit code 137 (signal 9, retryable)``)."""
    if code is None:
        return "vanished (no exit code, retryable)"
    if code in BY_CODE:
        return f"exit code {code} ({BY_CODE[code].name}, {BY_CODE[code].kind})"
    if code > SIGNAL_BASE:
        return f"exit code {code} (signal {code - SIGNAL_BASE}, retryable)"
    return f"exit code {code} (unknown)"


def markdown_table() -> str:
    """The table as Markdown (docs/operator.md and trainer_image/README.md carry this text; a test checks it)."""
    rows = ["| code | name | kind | meaning |", "|---|---|---|---|"]
    rows += [f"| {e.code} | {e.name} | {e.kind} | {e.meaning} |" for e in TABLE]
    rows.append(
        f"| >{SIGNAL_BASE} | Signal | retryable | killed by signal N = code - {SIGNAL_BASE} (137: SIGKILL/OOM) |"
    )
    rows.append("| other 1-127 | - | unknown | as 1 |")
    return "\n".join(rows)


# --- the exporter -----------------------------------------------------------------------------------


class ExportCode(IntEnum):
    """The exporter's exit codes: 0, or the code of its failure's reason (``ExportFailed.reason``)."""

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


EXPORT_TABLE: tuple[ExitCode, ...] = (
    ExitCode(ExportCode.OK, "OK", "success", "every required format was exported, verified and published"),
    ExitCode(ExportCode.INTERNAL_ERROR, "InternalError", "unknown", "a bug; the message has the exception"),
    ExitCode(ExportCode.SETTINGS_INVALID, "SettingsInvalid", "permanent", "TFPS_JOB or the command line is malformed"),
    ExitCode(
        ExportCode.CONTRACT_ERROR,
        "ContractError",
        "permanent",
        "the model module cannot be loaded, breaks the contract, or the model is not supported",
    ),
    ExitCode(
        ExportCode.CHECKPOINT_NOT_FOUND, "CheckpointNotFound", "permanent", "no checkpoint (or not the requested step)"
    ),
    ExitCode(
        ExportCode.CHECKPOINT_CORRUPT,
        "CheckpointCorrupt",
        "permanent",
        "the checkpoint cannot be restored into the model, or its weights or outputs hold NaN/Inf",
    ),
    ExitCode(
        ExportCode.CONVERSION_FAILED,
        "ConversionFailed",
        "permanent",
        "a format could not be produced (e.g. an op the format does not support)",
    ),
    ExitCode(
        ExportCode.VERIFICATION_FAILED,
        "VerificationFailed",
        "permanent",
        "an artifact's outputs differ from the TensorFlow model beyond tolerance",
    ),
    ExitCode(ExportCode.UNSAFE_PATH, "UnsafePath", "permanent", "a path escapes the job root or is a symlink"),
    ExitCode(ExportCode.PUBLISH_FAILED, "PublishFailed", "retryable", "I/O error while writing or renaming the export"),
    ExitCode(
        ExportCode.INTERRUPTED,
        "Interrupted",
        "retryable",
        "SIGTERM/SIGINT before publishing began: nothing was published (one during publishing lets the export finish)",
    ),
)
"""Every failing code's name is the reason the exporter reports with it, so a failed export can be named
even when its termination message is missing."""
EXPORT_CODE_BY_REASON: dict[str, int] = {e.name: int(e.code) for e in EXPORT_TABLE if e.code != ExportCode.OK}
EXPORT_REASON_BY_CODE: dict[int, str] = {int(e.code): e.name for e in EXPORT_TABLE if e.code != ExportCode.OK}


def export_markdown_table() -> str:
    """The exporter's table as Markdown (docs/operator.md and the exporter's README carry this text)."""
    rows = ["| code | reason | kind | meaning |", "|---|---|---|---|"]
    rows += [f"| {int(e.code)} | {e.name} | {e.kind} | {e.meaning} |" for e in EXPORT_TABLE]
    rows.append(f"| >{SIGNAL_BASE} | - | retryable | killed by signal N = code - {SIGNAL_BASE}, without a result |")
    return "\n".join(rows)
