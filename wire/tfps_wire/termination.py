"""The termination message: what a trainer or exporter process leaves behind for whoever started it.

Kubernetes keeps the file ``/dev/termination-log`` of a container that exited in the pod's status (at
most :data:`MAX_MESSAGE_BYTES`); ``tfps run`` points ``TFPS_TERMINATION_LOG`` at a file of its own.
Every process writes it through :func:`write_termination_log`.

The trainer's message is text whose last line is ``tfps-trainer <role>/<index>: <reason or summary>``
(:func:`termination_line`); a failure from the user's code has the last lines of its traceback above
it (:func:`failure_text`). On success the chief's summary names its final checkpoint
(:class:`FinalCheckpoint`), which the operator reads into ``status.checkpoint`` because the chief's
progress endpoint is gone once it has exited. The exporter's message is one JSON line
(:mod:`tfps_wire.export_result`).

TF-free: the operator and ``tfps run`` import it.
"""

from __future__ import annotations

import os
import re

from pydantic.dataclasses import dataclass

from .job_settings import DEFAULT_TERMINATION_LOG, TERMINATION_LOG_ENV

MAX_MESSAGE_BYTES = 4096
"""Kubernetes keeps at most 4096 bytes of a termination message."""
TRACEBACK_LINES = 20
"""Lines of the user's traceback kept in the trainer's message (the log has all of it)."""


def one_line(text: str, limit: int = 1000) -> str:
    """Collapse ``text`` to a single line of at most ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def write_termination_log(text: str, path: str | None = None) -> bool:
    """Write ``text`` to ``path`` (default: env ``TFPS_TERMINATION_LOG``, else ``/dev/termination-log``);
    False, and no exception, when it cannot be written.

    ``/dev/termination-log`` is only written when it exists (Kubernetes mounts it), so a local run as
    root never creates a stray file in /dev; any other path is created.
    """
    target = path or os.environ.get(TERMINATION_LOG_ENV) or DEFAULT_TERMINATION_LOG
    if target == DEFAULT_TERMINATION_LOG and not os.path.exists(target):
        return False
    try:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return True
    except OSError:
        return False


# --- the trainer's message --------------------------------------------------------------------------


def termination_line(role: str, text: str) -> str:
    """The last line of a trainer's message (``role``: ``chief/0``; ``text``: a reason or a summary)."""
    return f"tfps-trainer {role}: {text}"


def failure_text(line: str, trace: str) -> str:
    """A failed trainer's message: the traceback's last lines (when any), then ``line``, within
    :data:`MAX_MESSAGE_BYTES`; ``line`` is always the last line."""
    if not trace:
        return line
    budget = MAX_MESSAGE_BYTES - len(line.encode()) - 64
    kept = trace.rstrip("\n").splitlines()[-TRACEBACK_LINES:]
    while kept and len("\n".join(kept).encode()) > budget:
        kept.pop(0)
    return "\n".join(kept + [line]) if kept else line


_SUCCESS = re.compile(
    r"^(?:tfps-trainer \S+: )?"
    r"completed step (?P<step>\d+)/(?P<target>\d+); final checkpoint (?P<path>\S+)$"
)


@dataclass(frozen=True)
class FinalCheckpoint:
    """The chief's success summary: the step it reached, its target, and its final checkpoint."""

    step: int
    target: int
    path: str | None
    """None when training ended without writing a checkpoint."""


def format_success(step: int, target: int, path: str | None) -> str:
    """The chief's success summary, the text of its last line (and the progress endpoint's message)."""
    return f"completed step {step}/{target}; final checkpoint {path or '-'}"


def parse_success(message: str) -> FinalCheckpoint | None:
    """The summary in ``message`` (its last non-empty line, as :func:`termination_line` writes it,
    or bare), or None if it is not one."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    match = _SUCCESS.match(lines[-1]) if lines else None
    if match is None:
        return None
    path = match["path"]
    return FinalCheckpoint(step=int(match["step"]), target=int(match["target"]), path=None if path == "-" else path)


# --- the chief stopped by SIGTERM ---------------------------------------------------------------------------

_STOPPED = re.compile(
    r"^(?:tfps-trainer \S+: )?preempted \(SIGTERM\) at step (?P<step>\d+) \(this run started at (?P<start>\d+)\): "
    r"(?:checkpoint step (?P<saved>\d+) saved \((?P<path>[^)\s]+)\)|nothing new to save)"
)


@dataclass(frozen=True)
class SavedOnStop:
    """The chief's message after SIGTERM: the step it had reached and the checkpoint it saved of it."""

    step: int
    resumed_at: int
    """The step this run of the chief had started from."""
    saved_step: int | None
    """The step of the checkpoint saved on stop; None when there was nothing new to save."""
    path: str | None


def format_stopped(step: int, resumed_at: int, saved_path: str | None, resume_hint: str) -> str:
    """The preempted chief's reason: the step it reached, and the checkpoint it saved of it (or, with
    ``saved_path`` None, that nothing new was saved and ``resume_hint`` where the job resumes)."""
    saved = f"checkpoint step {step} saved ({saved_path})" if saved_path else f"nothing new to save; {resume_hint}"
    return f"preempted (SIGTERM) at step {step} (this run started at {resumed_at}): {saved}; the job resumes from it"


def parse_stopped(message: str) -> SavedOnStop | None:
    """What :func:`format_stopped` wrote, from the last non-empty line of ``message``; None if it is not that."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    match = _STOPPED.match(lines[-1]) if lines else None
    if match is None:
        return None
    saved = match["saved"]
    return SavedOnStop(
        step=int(match["step"]),
        resumed_at=int(match["start"]),
        saved_step=int(saved) if saved is not None else None,
        path=match["path"],
    )
