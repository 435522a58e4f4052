"""The CRD's cross-field CEL rules, evaluated client-side with ``celpy`` where the generated CRD schema
declares them, so the message (``messageExpression`` included) and field path are those the API
server reports. The API server's CEL has the Kubernetes quantity library
(``quantity('1Gi').compareTo(...)``); celpy gets a port of it from :mod:`.quantity`.

Transition rules (those using ``oldSelf``) run only when the previous object is given.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import celpy

from .crd import openapi_schema
from .parse import FieldError
from .quantity import CEL_FUNCTIONS


def rule_errors(wire: dict[str, Any], old_wire: dict[str, Any] | None = None) -> list[FieldError]:
    """Every CEL rule the job (defaulted wire form) breaks; with ``old_wire`` (the stored object of an
    update) the transition rules too."""
    old = None if old_wire is None else celpy.json_to_cel(old_wire)
    return list(_cel_errors(_schema(), celpy.json_to_cel(wire), old, ""))


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
