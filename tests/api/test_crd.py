"""The generated CRD: current, structural, and faithful to the models (pure, no cluster)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from tfps_operator.api import models as m
from tfps_operator.api.crd import CRD_FILE, crd, crd_yaml, openapi_schema
from tfps_operator.manifests import names

REPO = Path(__file__).resolve().parents[2]


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")


def test_committed_crd_is_current() -> None:
    committed = (REPO / CRD_FILE).read_text(encoding="utf-8")
    assert committed == crd_yaml(), f"{CRD_FILE} is stale: run `make crd` (tfps crd -o {CRD_FILE})"


def test_tfps_crd_prints_the_crd(tmp_path: Path) -> None:
    from tfps_operator.tools.cli import main

    out = tmp_path / "crd.yaml"
    assert main(["crd", "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text()) == crd()


def test_names_printer_columns_and_the_status_and_scale_subresources() -> None:
    spec = crd()["spec"]
    assert spec["names"]["shortNames"] == ["psjob", "psjobs"] and spec["names"]["categories"] == ["tfps"]
    stored, deprecated = spec["versions"]
    assert (stored["name"], stored["storage"], stored.get("deprecated", False)) == ("v1beta1", True, False)
    assert (deprecated["name"], deprecated["storage"], deprecated["deprecated"]) == ("v1alpha1", False, True)
    assert "use tfps.dev/v1beta1" in deprecated["deprecationWarning"]
    assert all(v["served"] for v in spec["versions"]) and "conversion" not in spec  # strategy None: no webhook
    assert {k: v for k, v in deprecated.items() if not k.startswith(("name", "storage", "deprecat"))} == {
        k: v for k, v in stored.items() if not k.startswith(("name", "storage", "deprecat"))
    }, "every served version has the same schema, subresources and columns (nothing to convert but apiVersion)"
    version = stored
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas.worker.replicas",
            "statusReplicasPath": ".status.clusterSize.worker",
            "labelSelectorPath": ".status.workerSelector",
        },
    }
    cols = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert cols == {
        "Phase": ".status.phase",
        "Step": ".status.checkpoint.step",
        "Workers": ".status.workers",
        "Reason": ".status.reason",
        "Age": ".metadata.creationTimestamp",
        "Data": ".status.dataWorkers",
    }
    wide = [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority", 0) > 0]
    assert wide == ["Data"]  # kubectl get -o wide: the tf.data service's data workers


def test_schema_is_structural() -> None:
    """Every node typed (or int-or-string / preserve-unknown-fields), no refs, no nullable, no
    properties beside additionalProperties, no JSON-schema-only keywords."""
    allowed = {
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
        "properties",
        "additionalProperties",
        "items",
        "required",
        "anyOf",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    }
    for path, node in _nodes(openapi_schema()):
        assert set(node) <= allowed, (path, set(node) - allowed)
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node and [b["type"] for b in node["anyOf"]] == ["integer", "string"], path
            continue
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
        assert "anyOf" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node["type"] == "object" and "properties" not in node and "additionalProperties" not in node:
            assert node.get("x-kubernetes-preserve-unknown-fields") is True, path


def test_descriptions_for_kubectl_explain() -> None:
    schema = openapi_schema()
    spec = schema["properties"]["spec"]
    assert "parameter-server" in schema["description"]
    export = spec["properties"]["export"]
    assert "verified" in export["description"].lower()
    for key, sub in export["properties"].items():
        assert sub.get("description"), f"spec.export.{key} has no description"
    for key, sub in spec["properties"].items():
        assert sub.get("description"), f"spec.{key} has no description"
    assert "\n" not in spec["description"]


def test_defaults_enums_and_ranges_come_from_the_models() -> None:
    spec = openapi_schema()["properties"]["spec"]["properties"]
    assert spec["runPolicy"]["properties"]["cleanPodPolicy"]["default"] == "Running"
    assert spec["runPolicy"]["properties"]["cleanPodPolicy"]["enum"] == ["All", "Running", "None"]
    assert spec["training"]["properties"]["port"]["default"] == 2222
    assert spec["training"]["properties"]["checkpoint"]["default"] == {"everySteps": 100, "keep": 3}
    assert spec["replicas"]["properties"]["evaluator"]["default"]["replicas"] == 0
    assert spec["replicas"]["properties"]["worker"]["properties"]["replicas"]["maximum"] == 1000
    assert spec["storage"]["default"]["volumeClaimTemplate"]["size"] == "10Gi"
    # steps is required for a model module only (CEL), so a script-mode job may leave training out
    assert "required" not in spec["training"] and spec["training"]["default"]["port"] == 2222
    assert any(
        r["fieldPath"] == ".training.steps" for r in openapi_schema()["properties"]["spec"]["x-kubernetes-validations"]
    )
    # dict[Literal, X] became fixed properties; free-form dicts preserve unknown fields
    tol = spec["export"]["properties"]["verify"]["properties"]["tolerances"]
    assert set(tol["properties"]) == {"savedmodel", "tflite", "onnx", "keras", "weights"}
    assert spec["model"]["properties"]["args"]["x-kubernetes-preserve-unknown-fields"] is True


def test_every_default_is_a_valid_value_of_its_model() -> None:
    """A default written in the CRD parses as the model would default it (no drift)."""
    job = m.PSTrainingJob.model_validate(
        {"metadata": {"name": "x"}, "spec": {"model": {"module": "a"}, "training": {"steps": 1}}}
    )
    wire = job.to_wire()["spec"]
    spec = openapi_schema()["properties"]["spec"]["properties"]
    for key in ("replicas", "storage", "export", "runPolicy"):
        if "default" in spec[key]:
            assert {**spec[key]["default"]} == {k: v for k, v in wire[key].items() if k in spec[key]["default"]}, key


def test_job_name_limit_matches_the_builders() -> None:
    assert m.MAX_JOB_NAME == names.MAX_JOB_NAME
    name = "j" * m.MAX_JOB_NAME
    assert len(names.pod_name(name, "evaluator", 999)) == 63
    meta = openapi_schema()["properties"]["metadata"]
    assert meta == {"type": "object", "properties": {"name": meta["properties"]["name"]}}
    assert meta["properties"]["name"]["maxLength"] == m.MAX_JOB_NAME


def test_api_version_spelled_out_is_group_slash_version() -> None:
    assert f"{m.GROUP}/{m.VERSION}" == m.API_VERSION == m.PSTrainingJob.model_fields["api_version"].default


def _rules() -> list[tuple[str, dict[str, str]]]:
    return [(p, r) for p, node in _nodes(openapi_schema()) for r in node.get("x-kubernetes-validations", [])]


def test_cel_rules_are_in_the_crd_and_compile() -> None:
    from tfps_operator.api.quantity import CEL_FUNCTIONS

    rules = _rules()
    assert len(rules) >= 10
    env = celpy.Environment()
    for path, rule in rules:
        env.compile(rule["rule"])
        assert rule["message"], path
        if "messageExpression" in rule:
            env.compile(rule["messageExpression"])
    # Only the part of the Kubernetes quantity library (and strings extension) that api/quantity.py ports (celpy would
    # report any other function as an undeclared reference, i.e. a failed rule).
    quantity_lib = {
        "quantity",
        "isQuantity",
        "sign",
        "isGreaterThan",
        "isLessThan",
        "compareTo",
        "asApproximateFloat",
        "asInteger",
        "isInteger",
        "add",
        "sub",
        "substring",
    }
    used = {
        f
        for _, r in rules
        for e in (r["rule"], r.get("messageExpression", ""))
        for f in re.findall(r"\b([A-Za-z_]\w*)\(", e)
    }
    assert used & quantity_lib <= set(CEL_FUNCTIONS), used & quantity_lib - set(CEL_FUNCTIONS)
    assert {"quantity", "compareTo", "isInteger"} <= used
    where = {p for p, _ in rules}
    assert {"", ".spec", ".spec.replicas", ".spec.storage", ".spec.training.checkpoint", ".spec.export.tflite"} <= where
    transition = [r for p, r in rules if "oldSelf" in r["rule"]]
    assert sorted(r["fieldPath"] for r in transition) == [".spec.replicas", ".spec.strategy"]


def test_gt_is_refused_by_the_generator() -> None:
    from pydantic import BaseModel, Field

    from tfps_operator.api.crd import SchemaError, _structural

    class M(BaseModel):
        x: int = Field(gt=0)

    with pytest.raises(SchemaError, match="ge/le"):
        _structural(M.model_json_schema(), {}, "")


def test_untranslatable_constraints_are_refused_not_dropped() -> None:
    from pydantic import BaseModel, Field

    from tfps_operator.api.crd import SchemaError, _structural

    class M(BaseModel):
        x: int = Field(multiple_of=2)

    with pytest.raises(SchemaError, match="multipleOf"):
        _structural(M.model_json_schema(), {}, "")
