"""What a trainer role's progress endpoint answers on ``GET /status``: one model, TF-free.

Written by :mod:`tfps_trainer.status_server` (the chief and the evaluator), read by the operator's progress
monitor and by ``tfps run``. On the wire::

    {"role": "chief", "job": "mnist", "state": "running" | "succeeded" | "failed", "message": str,
     "step": int, "target_steps": int, "loss": float | null, "steps_per_second": float | null,
     "checkpoint": {"step": int, "path": str, "time": "2026-01-01T00:00:00+00:00"} | null,
     "metrics": {name: float | null}, "updated": ISO8601}

Every field is read on its own: a value of the wrong type, a negative count, a NaN or infinite number
or a time that is not ISO 8601 reads as absent (``None``; ``metrics``: empty) and the rest of the report
still counts. Only an answer that is not a JSON object, or whose ``role`` is not a string, is no report
at all. Which fields a reader needs, and whose report it accepts, is the reader's rule.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, ValidationError, WrapValidator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

State = Literal["running", "succeeded", "failed"]
STATES: tuple[str, ...] = get_args(State)


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``Z`` allowed); one without a zone is UTC. Raises ``ValueError``."""
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _iso(text: str) -> str:
    parse_time(text)
    return text


def _or_none(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError:
        return None


def _or_empty(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError:
        return {}


T = TypeVar("T")
Lenient = Annotated[T | None, WrapValidator(_or_none)]
"""A field read on its own: a bad value reads as ``None``."""

Count = Annotated[int, Strict(), Field(ge=0)]
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A finite number (an int counts; a bool does not)."""
Text = Annotated[str, Strict(), Field(min_length=1)]
Time = Annotated[str, Strict(), AfterValidator(_iso)]
"""An ISO 8601 time, kept as written; :func:`parse_time` reads it."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class CheckpointReport(_Wire):
    """The role's latest checkpoint."""

    step: Lenient[Count] = None
    path: Lenient[Text] = None
    time: Lenient[Time] = None

    @property
    def at(self) -> datetime | None:
        return None if self.time is None else parse_time(self.time)


class ProgressReport(_Wire):
    """One role's progress (the evaluator: the step and metrics of the last checkpoint it evaluated)."""

    role: str | None = None
    job: Lenient[str] = None
    state: Lenient[State] = None
    message: Lenient[str] = None
    step: Lenient[Count] = None
    target_steps: Lenient[Count] = None
    loss: Lenient[Number] = None
    steps_per_second: Lenient[Number] = None
    checkpoint: Lenient[CheckpointReport] = None
    metrics: Annotated[dict[str, Lenient[Number]], WrapValidator(_or_empty)] = Field(default_factory=dict)
    updated: Lenient[Time] = None

    @property
    def updated_at(self) -> datetime | None:
        return None if self.updated is None else parse_time(self.updated)


def read_report(raw: bytes | str) -> ProgressReport | None:
    """The body of a ``/status`` answer as a report; None when it is no report (see the module)."""
    try:
        return ProgressReport.model_validate(json.loads(raw))
    except ValueError:  # also bad UTF-8, and pydantic's ValidationError
        return None
