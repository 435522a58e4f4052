"""Client-side validation of PSTrainingJobs with the API server's rules, and ``tfps validate``.

Two layers, each with one source:

1. **Fields** (types, required, enums, ranges, patterns, unknown fields): the pydantic models, which
   the CRD schema is generated from. Parsing is strict JSON-mode, like the API server: ``"3"`` is not
   an integer, ``0.5`` is not a quantity.
2. **Cross-field rules**: the CEL expressions declared on the models. They are evaluated here with
   ``celpy`` on the defaulted wire form, at the place the generated CRD schema declares them,
   so the message (``messageExpression`` included) and field path are those the API server reports.
   The API server's CEL has the Kubernetes quantity library (``quantity('1Gi').compareTo(...)``);
   celpy gets a port of it from :mod:`.quantity`.

Transition rules (those using ``oldSelf``) run only when the previous object is given.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import celpy
import yaml
from pydantic import ValidationError

from .crd import openapi_schema
from .models import KIND, PSTrainingJob
from .quantity import CEL_FUNCTIONS


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


def validate_job(obj: dict[str, Any], old: dict[str, Any] | None = None, *, rules: bool = True) -> PSTrainingJob:
    """Parse and check a PSTrainingJob (wire form) with the API server's rules.

    ``old`` is the stored object for an update; with it the transition rules (immutable replica
    counts once started) apply too. ``rules=False`` skips the CEL rules (tens of ms in celpy) for
    objects the API server has already admitted. Raises :class:`JobValidationError`.
    """
    if not isinstance(obj, Mapping):
        raise JobValidationError([FieldError("", "a PSTrainingJob must be a mapping")])
    try:
        job = PSTrainingJob.model_validate_json(_json(obj), strict=True)
    except ValidationError as e:
        raise JobValidationError([_field_error(err) for err in e.errors()]) from None
    if not rules:
        return job
    old_wire = None
    if old is not None:
        old_wire = PSTrainingJob.model_validate_json(_json(old), strict=True).to_wire()
    errors = list(
        _cel_errors(
            _schema(), celpy.json_to_cel(job.to_wire()), None if old_wire is None else celpy.json_to_cel(old_wire), ""
        )
    )
    if errors:
        raise JobValidationError(errors)
    return job


def _json(obj: Any) -> str:
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


# --- CEL rules, evaluated where the CRD schema declares them -----------------------------------------


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return openapi_schema()


_ENV = celpy.Environment()


@functools.cache
def _program(rule: str) -> Any:
    """A celpy program of a rule, with the Kubernetes quantity library the API server has."""
    return _ENV.program(_ENV.compile(rule), functions=CEL_FUNCTIONS)


def _message(rule: dict[str, str], activation: dict[str, Any]) -> str:
    """The rule's messageExpression, evaluated as the API server does (its ``message`` when the
    expression fails or gives an empty or non-string result), else its message."""
    expr = rule.get("messageExpression")
    if expr:
        try:
            text = _program(expr).evaluate(activation)
        except celpy.CELEvalError:
            text = None
        if isinstance(text, str) and text.strip():
            return str(text)
    return rule.get("message", "")


def _is_transition(rule: str) -> bool:
    return "oldSelf" in rule


def _cel_errors(schema: dict[str, Any], value: Any, old: Any, path: str) -> Iterator[FieldError]:
    """Evaluate every rule of ``schema`` and its children on ``value`` (already CEL-typed: maps
    are dicts and lists are lists, so the walk follows the same structure)."""
    for rule in schema.get("x-kubernetes-validations", []):
        if _is_transition(rule["rule"]) and old is None:
            continue
        where = (path + rule.get("fieldPath", "")).lstrip(".")
        activation = {"self": value} if old is None else {"self": value, "oldSelf": old}
        try:
            ok = bool(_program(rule["rule"]).evaluate(activation))
        except celpy.CELEvalError as e:  # the API server reports evaluation errors as failures too
            yield FieldError(where, f"{rule['message']} (rule error: {e.args[0] if e.args else e})", rule["rule"])
            continue
        if not ok:
            yield FieldError(where, _message(rule, activation), rule["rule"])
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if props is not None else extra if isinstance(extra, dict) else None
            if sub is not None:
                old_item = old.get(key) if isinstance(old, dict) else None
                yield from _cel_errors(sub, item, old_item, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):  # atomic lists: items have no old value to compare with
            yield from _cel_errors(schema["items"], item, None, f"{path}[{i}]")


# --- tfps validate -------------------------------------------------------------------------------------


def validate_documents(text: str) -> Iterator[tuple[str | None, list[FieldError]]]:
    """(job name, errors) for every PSTrainingJob document in a YAML text; other kinds are skipped."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        yield None, [FieldError("", f"not valid YAML: {e}")]
        return
    found = False
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") not in (None, KIND):
            continue
        found = True
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc, dict) else None
        try:
            validate_job(doc)
        except JobValidationError as e:
            yield name, e.errors
        else:
            yield name, []
    if not found:
        yield None, [FieldError("", f"no {KIND} document found")]


def main(args: argparse.Namespace) -> int:
    """``tfps validate FILE...``: ``FILE: OK`` or one ``FILE: path: message`` line per error."""
    failed = False
    for file in args.files:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except OSError as e:
            print(f"{file}: cannot read: {e.strerror}", file=sys.stderr)
            failed = True
            continue
        results = list(validate_documents(text))
        for name, errors in results:
            label = f"{file} ({name})" if len(results) > 1 and name else file
            if errors:
                failed = True
                for err in errors:
                    print(f"{label}: {err}")
            else:
                print(f"{label}: OK")
    return 1 if failed else 0
