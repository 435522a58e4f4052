"""The PSTrainingJob CustomResourceDefinition, generated from the pydantic models.

pydantic's JSON schema is turned into a Kubernetes *structural* OpenAPI v3 schema: ``$ref``s are
inlined, ``Optional[X]`` becomes plain ``X`` (absent rather than null), free-form ``dict[str, Any]``
becomes ``x-kubernetes-preserve-unknown-fields``, dicts keyed by an enum become fixed properties,
defaults produced by ``default_factory`` are written out, and the CEL rules declared on the models
(``x-kubernetes-validations``) stay where they were declared. ``crds/pstrainingjobs.tfps.dev.yaml``
is this module's output; a test fails when it is stale (regenerate with ``make crd``).
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from . import models as m

CRD_NAME = f"{m.PLURAL}.{m.GROUP}"
CRD_FILE = f"crds/{CRD_NAME}.yaml"

_KEEP = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "maxProperties",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
)
_HANDLED = {
    "title",
    "$defs",
    "additionalProperties",
    "properties",
    "items",
    "required",
    "anyOf",
    "propertyNames",
    "$ref",
    "const",
    "allOf",
}
"""Keywords translated below; any other keyword is an error, so no constraint of the models is
silently lost from the CRD (which would let the client and the API server disagree)."""

PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "description": "Job phase."},
    {
        "name": "Step",
        "type": "integer",
        "jsonPath": ".status.checkpoint.step",
        "description": "Step of the latest checkpoint.",
    },
    {
        "name": "Workers",
        "type": "string",
        "jsonPath": ".status.workers",
        "description": "Workers running/in the cluster, and the size asked for when it differs.",
    },
    {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "description": "Why the job waits or failed."},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "Data",
        "type": "string",
        "jsonPath": ".status.dataWorkers",
        "description": "tf.data service: data workers running/asked, and 'no dispatcher' while it is not running.",
        "priority": 1,
    },
]


SCALE = {
    "specReplicasPath": ".spec.replicas.worker.replicas",
    "statusReplicasPath": ".status.clusterSize.worker",
    "labelSelectorPath": ".status.workerSelector",
}
"""The scale subresource: ``kubectl scale psjob NAME --replicas N`` and an HPA resize the workers."""


class _Generator(GenerateJsonSchema):
    """Also writes defaults that come from ``default_factory``, and model defaults in wire form."""

    def get_default_value(self, schema: Any) -> Any:
        if "default_factory" in schema and not schema.get("default_factory_takes_data"):
            return schema["default_factory"]()
        return super().get_default_value(schema)

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, BaseModel):
            return dft.model_dump(mode="json", by_alias=True, exclude_none=True)
        return super().encode_default(dft)


class SchemaError(ValueError):
    """The models use a construct that has no structural-schema equivalent."""


def _structural(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    """One pydantic JSON-schema node as a Kubernetes structural schema node."""
    node = dict(node)
    # Inline a $ref; keys on the referring node (field description, default) win over the model's.
    ref = node.pop("$ref", None)
    if ref is None and len(node.get("allOf", [])) == 1 and "$ref" in node["allOf"][0]:
        ref = node.pop("allOf")[0]["$ref"]
    if ref is not None:
        model = defs[ref.rsplit("/", 1)[-1]]
        merged = {**model, **node}
        # kubectl explain shows one description: the field's, then the model's docstring.
        if node.get("description") and model.get("description") and node["description"] != model["description"]:
            merged["description"] = f"{node['description']}\n\n{model['description']}"
        node = merged
    # Optional[X] -> X.
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise SchemaError(f"{path}: unions other than Optional[X] are not structural")
        outer = {k: v for k, v in node.items() if k in ("description", "default") and v is not None}
        return _structural({**branches[0], **outer}, defs, path)
    if "exclusiveMinimum" in node or "exclusiveMaximum" in node:
        raise SchemaError(f"{path}: use ge/le, not gt/lt (OpenAPI v3.0 exclusive bounds are booleans)")
    unknown = set(node) - set(_KEEP) - _HANDLED
    if unknown:
        raise SchemaError(f"{path}: no CRD translation for {sorted(unknown)}")

    out: dict[str, Any] = {
        k: copy.deepcopy(node[k]) for k in _KEEP if k in node and not (k == "default" and node[k] is None)
    }
    if "description" in out:  # docstrings: unwrap lines, keep paragraphs
        out["description"] = "\n\n".join(" ".join(p.split()) for p in out["description"].split("\n\n"))
    if "const" in node:
        out.setdefault("type", "string")
        out.pop("default", None)
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [dict(b) for b in node["anyOf"]]
        return out

    kind = node.get("type")
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        names = node.get("propertyNames", {})
        if props is not None:
            out["properties"] = {k: _structural(v, defs, f"{path}.{k}") for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, dict) and extra and "enum" in names:
            # dict[Literal[...], X]: the keys are known, so they become properties.
            item = _structural(extra, defs, f"{path}.*")
            out["properties"] = {k: copy.deepcopy(item) for k in names["enum"]}
        elif isinstance(extra, dict) and extra:
            out["additionalProperties"] = _structural(extra, defs, f"{path}.*")
        else:  # dict[str, Any] / free-form object
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["items"] = _structural(node["items"], defs, f"{path}[]")
    elif kind is None and not node.get("x-kubernetes-preserve-unknown-fields"):
        raise SchemaError(f"{path}: untyped field {node!r}")
    return out


def openapi_schema() -> dict[str, Any]:
    """The structural OpenAPI v3 schema of the whole PSTrainingJob object."""
    raw = m.PSTrainingJob.model_json_schema(by_alias=True, mode="validation", schema_generator=_Generator)
    defs = raw.get("$defs", {})
    root = _structural(raw, defs, "")
    props = root["properties"]
    props["apiVersion"] = {"type": "string", "description": f"{m.API_VERSION} (or a deprecated one: the same fields)"}
    props["kind"] = {"type": "string", "description": "PSTrainingJob"}
    # Only metadata.name (and generateName) may be constrained in a CRD schema.
    props["metadata"] = {"type": "object", "properties": {"name": props["metadata"]["properties"]["name"]}}
    root["required"] = ["spec"]
    return root


SERVED_VERSIONS: tuple[str, ...] = (m.VERSION, *m.DEPRECATED_VERSIONS)


def served_version(name: str, storage: str) -> dict[str, Any]:
    """One entry of ``spec.versions``: every served version has the same schema (no conversion webhook: the
    API server converts by rewriting ``apiVersion``); ``storage`` is stored; all but :data:`~.models.VERSION`
    are deprecated with a warning that names it."""
    version: dict[str, Any] = {"name": name, "served": True, "storage": name == storage}
    if name != m.VERSION:
        version["deprecated"] = True
        version["deprecationWarning"] = (
            f"{m.GROUP}/{name} {m.KIND} is deprecated; use {m.GROUP}/{m.VERSION} (the same fields)"
        )
    return {
        **version,
        "subresources": {"status": {}, "scale": SCALE},
        "additionalPrinterColumns": PRINTER_COLUMNS,
        "schema": {"openAPIV3Schema": openapi_schema()},
    }


@functools.lru_cache(maxsize=2)
def crd(storage: str = m.VERSION) -> dict[str, Any]:
    """The CustomResourceDefinition object (cached: one shared dict, not to be modified). ``storage``: the
    version etcd stores, :data:`~.models.VERSION` but for a rollback to an operator that knows no other
    (docs/install.md, "API versions")."""
    if storage not in SERVED_VERSIONS:
        raise ValueError(f"{storage!r} is not a served version ({', '.join(SERVED_VERSIONS)})")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/name": "tfps-operator"}},
        "spec": {
            "group": m.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": m.KIND,
                "listKind": f"{m.KIND}List",
                "plural": m.PLURAL,
                "singular": m.SINGULAR,
                "shortNames": list(m.SHORT_NAMES),
                "categories": list(m.CATEGORIES),
            },
            "versions": [served_version(v, storage) for v in SERVED_VERSIONS],
        },
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def crd_yaml(storage: str = m.VERSION) -> str:
    header = "# GENERATED by `tfps crd` from operator/tfps_operator/api/models.py. Do not edit; run `make crd`.\n"
    return header + yaml.dump(crd(storage), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def main(args: argparse.Namespace) -> int:
    try:
        text = crd_yaml(getattr(args, "storage_version", None) or m.VERSION)
    except ValueError as exc:
        print(f"tfps crd: --storage-version: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "output", "-") in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0
