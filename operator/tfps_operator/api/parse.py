"""Parsing of PSTrainingJobs with the API's field rules (types, required fields, enums, ranges,
patterns, unknown fields), and errors that name the field.

The pydantic models are the one source of these rules (the CRD schema is generated from them).
Parsing is strict JSON-mode, like the API server: ``"3"`` is not an integer, ``0.5`` is not a
quantity. The cross-field CEL rules are :mod:`.cel`'s; :mod:`.validate` applies both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .models import PSTrainingJob

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class FieldError:
    path: str
    """Wire path, e.g. ``spec.replicas.ps.replicas`` or ``spec.replicas.worker.template.spec.env[0].name``."""
    message: str
    rule: str | None = field(default=None, compare=False, repr=False)
    """The CEL rule that failed (None for a field error)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class JobValidationError(ValueError):
    """A PSTrainingJob broke one or more rules; ``errors`` name each field."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(map(str, errors)))


def parse_job(obj: Any) -> PSTrainingJob:
    """Parse a PSTrainingJob (wire form) with the field rules, not the CEL rules: enough for an
    object the API server has already admitted. Raises :class:`JobValidationError`."""
    if not isinstance(obj, Mapping):
        raise JobValidationError([FieldError("", "a PSTrainingJob must be a mapping")])
    try:
        return PSTrainingJob.model_validate_json(wire_json(obj), strict=True)
    except ValidationError as e:
        raise JobValidationError([_field_error(err) for err in e.errors()]) from None


def parse_stored_job(obj: Any) -> PSTrainingJob:
    """:func:`parse_job` for an object read from the API server, whose CRD may be newer than this
    operator (a rollback leaves the newer CRD installed, and it defaults fields this version does not
    know into every stored job): fields unknown here are left out rather than refused, as Kubernetes'
    own controllers decode objects. Every other rule applies."""
    if not isinstance(obj, Mapping):
        raise JobValidationError([FieldError("", "a PSTrainingJob must be a mapping")])
    try:
        return known_fields_only(PSTrainingJob, obj, strict=True)
    except ValidationError as e:
        raise JobValidationError([_field_error(err) for err in e.errors()]) from None


def known_fields_only(model: type[M], data: Any, strict: bool = False) -> M:
    """``model`` validated from ``data`` (wire form) without the fields the model does not know, at any
    depth. Raises :class:`ValidationError` for anything else."""
    text, cut_from = wire_json(data), None
    while True:
        try:
            return model.model_validate_json(text, strict=strict)
        except ValidationError as e:
            unknown = [err["loc"] for err in e.errors() if err["type"] == "extra_forbidden"]
            cut_from = json.loads(text) if cut_from is None else cut_from
            removed = [_cut(cut_from, loc) for loc in unknown]
            if not unknown or not all(removed):
                raise
            text = json.dumps(cut_from)


def _cut(data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the field at ``loc`` (a pydantic error location) from ``data``; False if it is not there."""
    *parents, last = loc
    for part in parents:
        found = (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        )
        if not found:
            return False
        data = data[part]
    if isinstance(data, dict) and last in data:
        del data[last]
        return True
    return False


def wire_json(obj: Any) -> str:
    """JSON of a wire object; YAML timestamps become RFC 3339 strings, other mappings (kopf.Body) dicts."""

    def default(o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat().replace("+00:00", "Z")
        if isinstance(o, date):
            return o.isoformat()
        if isinstance(o, Mapping):
            return dict(o)
        raise TypeError(f"{type(o).__name__} is not JSON")

    return json.dumps(obj, default=default)


# --- pydantic errors -> wire paths and short messages ------------------------------------------------


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":  # a dict key that is not allowed: the key itself is the field
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_MESSAGES = {
    "missing": "Required value",
    "extra_forbidden": "unknown field",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "typed_dict_type": "must be an object",
    "datetime_type": "must be an RFC 3339 date-time",
    "datetime_parsing": "must be an RFC 3339 date-time",
    "datetime_from_date_parsing": "must be an RFC 3339 date-time",
}


_CTX_MESSAGES = {
    "greater_than_equal": "must be ≥ {ge:g}",
    "less_than_equal": "must be ≤ {le:g}",
    "literal_error": "must be one of {expected}",
    "string_pattern_mismatch": "must match {pattern}",
    "string_too_long": "must be at most {max_length} characters",
    "string_too_short": "must be at least {min_length} characters",
    "too_long": "must have at most {max_length} item(s)",
    "too_short": "must have at least {min_length} item(s)",
}
"""Messages filled from pydantic's error context."""


def _field_error(err: Any) -> FieldError:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _MESSAGES:
        msg = _MESSAGES[kind]
    elif kind in _CTX_MESSAGES:
        msg = _CTX_MESSAGES[kind].format(**ctx)
    else:
        msg = err["msg"]
    return FieldError(_path(err["loc"]), msg)
