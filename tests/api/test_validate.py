"""Client-side validation (validate_job, tfps validate) with the table of invalid manifests (pure)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tfps_operator.api.models import PSTrainingJob, replica_counts
from tfps_operator.api.validate import JobValidationError, validate_job
from tfps_operator.tools.cli import main as tfps

from .cases import INVALID, Case, base_job

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def test_there_are_at_least_30_distinct_invalid_cases() -> None:
    assert len(INVALID) >= 30
    manifests = [yaml.safe_dump(c.manifest(), sort_keys=True) for c in INVALID]
    assert len(set(manifests)) == len(manifests)


def test_base_job_is_valid() -> None:
    job = validate_job(base_job())
    assert job.spec.replicas.worker.replicas == 2


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_invalid_manifest_is_rejected_naming_the_field(case: Case) -> None:
    with pytest.raises(JobValidationError) as info:
        validate_job(case.manifest())
    paths = [e.path for e in info.value.errors]
    assert case.path in paths, f"{case.id}: expected an error at {case.path}, got {info.value}"


@pytest.mark.parametrize("lead", ["chief", "worker"])
def test_program_directories_under_a_mount_of_the_lead_are_accepted(lead: str) -> None:
    doc = base_job()
    mount = {
        "volumes": [{"name": "train", "persistentVolumeClaim": {"claimName": "train"}}],
        "volumeMounts": [{"name": "train", "mountPath": "/train"}],
    }
    dirs = {"checkpoints": "/train/checkpoint", "savedModel": "/train/saved_model", "tensorboard": "/train"}
    doc["spec"]["model"] = {"command": ["python", "keras_mnist.py"], "directories": dirs}
    if lead == "worker":
        doc["spec"]["strategy"] = "MultiWorkerMirrored"
        doc["spec"]["replicas"]["worker"]["template"] = {"spec": mount}
    else:
        doc["spec"]["replicas"]["chief"] = {"replicas": 1, "template": {"spec": mount}}
    job = validate_job(doc)
    assert job.spec.model.directories is not None and job.spec.model.directories.saved_model == "/train/saved_model"


def test_messages_read_like_the_api_servers() -> None:
    def errors(c: str) -> list[str]:
        (case,) = [x for x in INVALID if x.id == c]
        with pytest.raises(JobValidationError) as info:
            validate_job(case.manifest())
        return [str(e) for e in info.value.errors]

    assert errors("no-ps") == ["spec.replicas.ps.replicas: must be ≥ 1: a job needs a parameter server"]
    assert errors("steps-zero") == ["spec.training.steps: must be ≥ 1"]
    assert errors("missing-model-module") == [
        "spec.model: set module (a contract module) or command (your own program)"
    ]
    assert errors("unknown-spec-field") == ["spec.foo: unknown field"]
    assert errors("clean-pod-policy") == ["spec.runPolicy.cleanPodPolicy: must be one of 'All', 'Running' or 'None'"]
    assert errors("directories-not-under-a-lead-mount") == [
        "spec.model.directories.savedModel: must be at or under a volumeMount of the lead's template "
        "(spec.replicas.chief, else spec.replicas.worker): tfps reads it from that volume (the export Job and tfps "
        "tensorboard mount it read-only)"
    ]


def test_parsing_is_strict_like_the_api_server() -> None:
    for path, value in [
        (("training", "steps"), "300"),
        (("training", "checkNumerics"), 1),
        (("training", "steps"), 3.5),
    ]:
        obj = base_job()
        obj["spec"][path[0]][path[1]] = value
        with pytest.raises(JobValidationError, match="spec.training"):
            validate_job(obj)


@pytest.mark.parametrize("value", [0, 4, "500m", "1.5", "4Gi", "1e3", "+2"])
def test_quantities_int_or_string(value: object) -> None:
    obj = base_job()
    obj["spec"]["replicas"]["worker"]["resources"] = {"limits": {"cpu": value}}
    assert validate_job(obj).spec.replicas.worker.resources.limits["cpu"] == value


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"cpu": "1"}, "requests": {"cpu": "1000m"}},  # equal quantities, different notations
        {"limits": {"cpu": 2}, "requests": {"cpu": "1.5"}},
        {"limits": {"memory": "1Gi"}, "requests": {"memory": "1024Mi"}},
        {"limits": {"memory": "1G"}, "requests": {"memory": "953Mi"}},  # 999292928 < 10^9
        {"requests": {"cpu": "64", "memory": "1Ti"}},  # no limits: any request
        {"limits": {"nvidia.com/gpu": 1}},  # the request defaults to the limit
        {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}, "requests": {"nvidia.com/gpu": 2, "cpu": "500m"}},
        {"limits": {"example.com/fpga": "1k"}, "requests": {"example.com/fpga": "1e3"}},
        {
            "limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"},
            "requests": {"hugepages-2Mi": "4194304", "memory": "1Gi"},
        },
        {
            "limits": {"ephemeral-storage": "10Gi", "kubernetes.io/whatever": "500m"}
        },  # prefixed native: may be fractional
    ],
)
def test_resources_kubernetes_admits_are_accepted(resources: dict) -> None:
    obj = base_job()
    obj["spec"]["replicas"]["worker"]["resources"] = resources
    obj["spec"]["replicas"]["ps"] = {"replicas": 1, "template": {"spec": {"resources": resources}}}
    validate_job(obj)


@pytest.mark.parametrize(
    ("resources", "path", "text"),
    [
        ({"requests": {"nvidia.com/gpu": 1}}, "limits", "nvidia.com/gpu is requested without a limit"),
        ({"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": "1000m"}}, None, None),  # equal: accepted
        ({"limits": {"nvidia.com/gpu": "1000m"}}, "limits", "whole number"),  # == 1, but not written as one
        (
            {"limits": {"nvidia.com/gpu": "1.5"}},
            "limits",
            "nvidia.com/gpu: an extended resource must be a whole number",
        ),
        (
            {"limits": {"nvidia.com/gpu": 4}, "requests": {"nvidia.com/gpu": 2}},
            "requests",
            "nvidia.com/gpu: the request must equal the limit",
        ),
        (
            {"limits": {"cpu": "500m"}, "requests": {"cpu": "0.6"}},
            "requests",
            "cpu: the request must not exceed the limit",
        ),
        (
            {"limits": {"memory": "1Gi"}, "requests": {"memory": "1.1G"}},
            "requests",
            "memory: the request must not exceed",
        ),
        (
            {"limits": {"cpu": 1}, "requests": {"cpu": "1001m", "memory": "1"}},
            "requests",
            "cpu: the request must not exceed",
        ),
        ({"limits": {"gpu": 1}}, "limits", "gpu: not a container resource name"),
    ],
)
def test_resources_kubernetes_refuses_are_refused_naming_the_resource(
    resources: dict, path: str | None, text: str | None
) -> None:
    obj = base_job()
    obj["spec"]["replicas"]["worker"]["resources"] = resources
    if path is None:
        validate_job(obj)
        return
    with pytest.raises(JobValidationError) as info:
        validate_job(obj)
    (err,) = info.value.errors
    assert err.path == f"spec.replicas.worker.resources.{path}" and text in err.message, err


@pytest.mark.parametrize("value", [0.5, -1, "-1", "1 Gi", "lots", True, None, "1e1.5", "1e1000", "1K", "1" * 65])
def test_quantities_rejected(value: object) -> None:
    obj = base_job()
    obj["spec"]["replicas"]["worker"]["resources"] = {"limits": {"cpu": value}}
    with pytest.raises(
        JobValidationError, match=r"spec.replicas.worker.resources.limits.cpu: must be (a resource quantity|at most 64)"
    ):
        validate_job(obj)


def test_defaults() -> None:
    job = validate_job(base_job())
    s = job.spec
    assert s.replicas.chief.replicas == 1 and s.replicas.ps.replicas == 1 and s.replicas.evaluator.replicas == 0
    assert s.training.checkpoint.every_steps == 100 and s.training.port == 2222
    assert s.run_policy.clean_pod_policy == "Running" and s.run_policy.backoff_limit == 3
    assert s.export.formats == ["savedmodel", "tflite", "onnx"] and s.export.tflite.quantization == "none"
    assert s.storage.volume_claim_template is not None and s.storage.claim_name is None
    assert s.storage.mount_path == "/tfps"


def test_env_stays_plain_dicts() -> None:
    obj = base_job()
    env = [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    obj["spec"]["replicas"]["worker"]["template"] = {"spec": {"env": env}}
    job = validate_job(obj)
    assert job.spec.replicas.worker.template.spec.env == env
    assert job.to_wire()["spec"]["replicas"]["worker"]["template"]["spec"]["env"] == env


def _started(obj: dict) -> dict:
    old = copy.deepcopy(obj)
    old["status"] = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    return old


def test_chief_evaluator_and_data_service_counts_are_immutable_once_started_and_worker_and_ps_counts_resize() -> None:
    old = base_job()
    new = copy.deepcopy(old)
    new["spec"]["replicas"]["worker"]["replicas"] = 3
    new["spec"]["replicas"]["ps"] = {"replicas": 2}
    validate_job(new, old=old)  # not started
    validate_job(new, old=_started(old))  # a resize
    evaluated = copy.deepcopy(old)
    evaluated["spec"]["replicas"]["evaluator"] = {"replicas": 1}
    evaluated["spec"]["training"]["checkpoint"] = {"everySteps": 10}
    validate_job(evaluated, old=old)
    with pytest.raises(JobValidationError, match=r"^spec.replicas: chief, evaluator, dispatcher and dataWorker counts"):
        validate_job(evaluated, old=_started(old))
    served = copy.deepcopy(old)
    served["spec"]["replicas"].update(dispatcher={"replicas": 1}, dataWorker={"replicas": 2})
    validate_job(served, old=old)
    more = copy.deepcopy(served)
    more["spec"]["replicas"]["dataWorker"]["replicas"] = 3
    with pytest.raises(JobValidationError, match=r"^spec.replicas: chief, evaluator, dispatcher and dataWorker counts"):
        validate_job(more, old=_started(served))
    other = copy.deepcopy(old)
    other["spec"]["training"]["steps"] = 600  # other fields stay mutable
    validate_job(other, old=_started(old))
    same = copy.deepcopy(old)
    same["spec"]["replicas"]["worker"]["restartPolicy"] = "Never"
    validate_job(same, old=_started(old))
    spelled = copy.deepcopy(old)  # the strategy's defaults written out are the same counts
    spelled["spec"]["replicas"].update(chief={"replicas": 1}, ps={"replicas": 1})
    validate_job(spelled, old=_started(old))


def test_the_strategy_is_immutable_once_started_and_its_default_counts_follow_it() -> None:
    old = base_job()
    old["spec"]["model"] = {"command": ["python", "train.py"]}
    new = copy.deepcopy(old)
    new["spec"]["strategy"] = "MultiWorkerMirrored"
    new["spec"]["replicas"]["ps"] = {"replicas": 0}
    validate_job(new, old=old)
    with pytest.raises(JobValidationError) as err:
        validate_job(new, old=_started(old))
    assert [e.path for e in err.value.errors] == ["spec.replicas", "spec.strategy"], err.value.errors


def test_a_worker_only_job_needs_no_chief_or_ps() -> None:
    obj = base_job()
    obj["spec"].update(strategy="MultiWorkerMirrored", model={"command": ["python", "train.py"]})
    job = validate_job(obj)
    assert replica_counts(job) == {"chief": 0, "ps": 0, "worker": 2, "evaluator": 0, "dispatcher": 0, "dataworker": 0}
    obj["spec"]["replicas"]["chief"] = {"replicas": 1}
    obj["spec"]["runPolicy"] = {"successPolicy": "AllWorkers"}
    assert replica_counts(validate_job(obj))["chief"] == 1


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        job = validate_job(doc)
        assert job.metadata.name == path.stem


def test_quickstart_shape() -> None:
    job = validate_job(yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text()))
    s = job.spec
    assert s.model.module == "tfps_trainer.examples.linear"
    assert (s.replicas.chief.replicas, s.replicas.ps.replicas, s.replicas.worker.replicas) == (1, 1, 2)
    assert s.training.steps == 300 and s.training.checkpoint.every_steps == 100
    assert sorted(s.export.formats) == ["onnx", "savedmodel", "tflite"]


def test_wide_deep_shape() -> None:
    job = validate_job(yaml.safe_load((REPO / "examples" / "wide-deep.yaml").read_text()))
    s = job.spec
    assert s.model.module == "tfps_trainer.examples.wide_deep"
    assert s.replicas.ps.replicas == 2
    assert s.training.variable_partitioner is not None and s.training.variable_partitioner.max_shards == 2


def test_round_trip_wire_model_wire() -> None:
    """to_wire() of a parsed job parses back to an equal job (the client half of the round trip)."""
    from .full_job import full_job

    job = full_job()
    assert PSTrainingJob.model_validate(job.to_wire()) == job
    assert validate_job(job.to_wire()) == job


# --- the command -------------------------------------------------------------------------------------


def test_cli_ok_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(base_job()))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(next(c for c in INVALID if c.id == "no-ps").manifest()))
    assert tfps(["validate", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: OK\n"
    assert tfps(["validate", str(good), str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{good}: OK", f"{bad}: spec.replicas.ps.replicas: must be ≥ 1: a job needs a parameter server"]


def test_cli_multi_document_and_other_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "jobs.yaml"
    bad = base_job("b")
    bad["spec"]["training"]["steps"] = 0
    f.write_text(
        yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}, base_job("a"), bad])
    )
    assert tfps(["validate", str(f)]) == 1
    assert capsys.readouterr().out.splitlines() == [f"{f} (a): OK", f"{f} (b): spec.training.steps: must be ≥ 1"]


def test_cli_unreadable_and_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert tfps(["validate", str(empty), str(tmp_path / "missing.yaml")]) == 1
    captured = capsys.readouterr()
    assert f"{empty}: no PSTrainingJob document found" in captured.out
    assert "missing.yaml: cannot read" in captured.err


def test_cli_broken_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("spec: [unclosed\n")
    assert tfps(["validate", str(f)]) == 1
    assert "not valid YAML" in capsys.readouterr().out


def test_cli_rejects_every_invalid_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = []
    for c in INVALID:
        f = tmp_path / f"{c.id}.yaml"
        f.write_text(yaml.safe_dump(c.manifest(), allow_unicode=True))
        files.append((c, f))
    assert tfps(["validate", *[str(f) for _, f in files]]) == 1
    out = capsys.readouterr().out.splitlines()
    for c, f in files:
        mine = [line for line in out if line.startswith(f"{f}: ")]
        assert mine and not any(line.endswith(": OK") for line in mine), c.id
        assert any(line.startswith(f"{f}: {c.path}: ") for line in mine), (c.id, mine)


def test_yaml_timestamps_and_non_dict_mappings() -> None:
    from types import MappingProxyType

    doc = yaml.safe_load(yaml.safe_dump(base_job()) + "status:\n  startTime: 2026-01-01T00:00:00Z\n")
    assert not isinstance(doc["status"]["startTime"], str)  # YAML made it a datetime
    job = validate_job(MappingProxyType(doc))
    assert job.status is not None and job.status.start_time is not None and job.status.start_time.year == 2026


def test_rules_false_only_parses() -> None:
    bad = next(c for c in INVALID if c.id == "no-ps").manifest()
    assert validate_job(bad, rules=False).spec.replicas.ps.replicas == 0
    with pytest.raises(JobValidationError):
        validate_job(bad)


def test_every_cel_rule_is_broken_by_some_case() -> None:
    """The table covers each cross-field rule of the CRD (the transition rule has its own tests)."""
    from tfps_operator.api.crd import openapi_schema

    def rules(node: dict) -> list[dict]:
        out = list(node.get("x-kubernetes-validations", []))
        for sub in (node.get("properties") or {}).values():
            out += rules(sub)
        if isinstance(node.get("additionalProperties"), dict):
            out += rules(node["additionalProperties"])
        if "items" in node:
            out += rules(node["items"])
        return out

    every = {r["rule"]: r["message"] for r in rules(openapi_schema()) if "oldSelf" not in r["rule"]}
    seen: set[str | None] = set()
    for c in INVALID:
        try:
            validate_job(c.manifest())
        except JobValidationError as e:
            seen |= {err.rule for err in e.errors}
    missed = [every[r] for r in set(every) - seen]
    assert not missed, f"rules no case breaks: {missed}"
