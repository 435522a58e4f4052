"""Pruning by a CRD's structural schema, as the API server does when it reads or writes a custom object: a
field the schema does not declare is dropped, unless ``x-kubernetes-preserve-unknown-fields`` keeps it."""

from __future__ import annotations

from typing import Any

PRESERVE = "x-kubernetes-preserve-unknown-fields"


def prune(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with the fields ``schema`` does not declare removed, at any depth (a copy)."""
    if isinstance(value, list):
        items = schema.get("items")
        return [prune(v, items) for v in value] if isinstance(items, dict) else list(value)
    if not isinstance(value, dict):
        return value
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if props is not None and key in props:
            out[key] = prune(v, props[key])
        elif isinstance(extra, dict):
            out[key] = prune(v, extra)
        elif schema.get(PRESERVE) or extra is True:
            out[key] = v
    return out
