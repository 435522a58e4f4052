"""The chief's one-line success summary, the last line of its termination log.

TF-free on purpose: the operator parses it to put the final checkpoint into ``status.checkpoint``,
since the chief's progress endpoint is gone once the chief has exited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SUCCESS = re.compile(
    r"^(?:tfps-trainer \S+: )?"
    r"completed step (?P<step>\d+)/(?P<target>\d+); final checkpoint (?P<path>\S+)$"
)


@dataclass(frozen=True)
class FinalCheckpoint:
    step: int
    target: int
    path: str | None
    """None when training ended without writing a checkpoint."""


def format_success(step: int, target: int, path: str | None) -> str:
    return f"completed step {step}/{target}; final checkpoint {path or '-'}"


def termination_line(role: str, summary: str) -> str:
    """What a role writes to its termination log on success (``role``: ``chief/0``)."""
    return f"tfps-trainer {role}: {summary}"


def parse_success(message: str) -> FinalCheckpoint | None:
    """The summary in ``message`` (its last non-empty line, as :func:`termination_line` writes it,
    or bare), or None if it is not one."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    match = _SUCCESS.match(lines[-1]) if lines else None
    if match is None:
        return None
    path = match["path"]
    return FinalCheckpoint(step=int(match["step"]), target=int(match["target"]), path=None if path == "-" else path)
