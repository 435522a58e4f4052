"""Property test: on random jobs (valid and invalid fields mixed) the API server and validate_job
agree — same accept/reject decision, the client's error paths all named by the server, and the
server's defaulted spec equal to the client's. Server-side dry-run only: nothing is stored."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tfps_operator.api import models as m
from tfps_operator.api.validate import JobValidationError, validate_job

from .cases import base_job, server_defaulted_spec

# path: (valid values, invalid values)
CHOICES: dict[str, tuple[list[Any], list[Any]]] = {
    "metadata.name": (["ok-name", "x" * 49], ["x" * 50, "9x", "a-"]),
    "spec.training.steps": ([1, 300], [0, -5, "10"]),
    "spec.training.batchSize": ([1, 64], [0]),
    "spec.training.stepsPerClosure": ([1, 20, 1000], [0, 1001]),
    "spec.training.checkpoint": (
        [{"everySteps": 10}, {"everySeconds": 30, "keep": 1}],
        [{"keep": 2}, {"everySteps": 0}, {}],
    ),
    "spec.training.variablePartitioner": (
        [{}, {"maxShards": 2}, {"minShardBytes": 1024, "maxShards": 3}, {"fixedShards": 3}, {"maxShardBytes": 65536}],
        [{"fixedShards": 2, "maxShards": 2}, {"minShardBytes": 1024, "maxShardBytes": 4096}, {"fixedShards": 0}],
    ),
    "spec.strategy": (["ParameterServer"], ["MultiWorkerMirrored", "Horovod"]),
    "spec.replicas.chief.replicas": ([1], [0, 2]),
    "spec.replicas.ps.replicas": ([1, 3], [0]),
    "spec.replicas.worker.replicas": ([1, 4], [0, 1001]),
    "spec.replicas.evaluator.replicas": ([0, 1], [2]),
    "spec.replicas.worker.restartPolicy": (["Never", "ExitCode"], ["Always"]),
    "spec.replicas.worker.resources": (
        [
            {"limits": {"cpu": "1"}},
            {"requests": {"memory": 1024}},
            {"limits": {"cpu": "1", "nvidia.com/gpu": 1}, "requests": {"cpu": "1000m", "nvidia.com/gpu": "1"}},
            {"limits": {"memory": "1Gi"}, "requests": {"memory": "1024Mi"}},
        ],
        [
            {"limits": {"cpu": 0.5}},
            {"limits": {"cpu": "-1"}},
            {"requests": {"nvidia.com/gpu": 1}},
            {"limits": {"nvidia.com/gpu": "500m"}},
            {"limits": {"cpu": "1"}, "requests": {"cpu": "1001m"}},
            {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}},
            {"limits": {"gpu": 1}},
        ],
    ),
    "spec.export.resources": (
        [{"limits": {"memory": "2Gi"}, "requests": {"memory": "2G"}}, {"limits": {"example.com/fpga": "1k"}}],
        [
            {"limits": {"memory": "1G"}, "requests": {"memory": "1Gi"}},
            {"limits": {"example.com/fpga": "1.5"}},
            {"requests": {"hugepages-2Mi": "2Mi", "cpu": "1"}},
        ],
    ),
    "spec.replicas.ps.template": (
        [
            {"spec": {"env": [{"name": "A", "value": "b"}]}},
            {"metadata": {"labels": {"a": "b"}}, "spec": {"nodeSelector": {"k": "v"}}},
        ],
        [{"spec": {"env": [{"name": "TFPS_A"}]}}, {"spec": {"env": [{"value": "x"}]}}],
    ),
    "spec.export.formats": ([["onnx"], ["tflite", "onnx"]], [[], ["onnx", "onnx"], ["pdf"]]),
    "spec.export.tflite": (
        [{"quantization": "int8", "calibrationSamples": 10}, {"quantization": "float16"}],
        [{"quantization": "int8"}, {"quantization": "q"}],
    ),
    "spec.export.verify": ([{"tolerances": {"onnx": {"maxAbs": 0.1}}}], [{"samples": 0}]),
    "spec.storage": (
        [{"claimName": "x"}, {"volumeClaimTemplate": {}}],
        [{}, {"claimName": "x", "volumeClaimTemplate": {}}, {"claimName": "x", "mountPath": "rel"}],
    ),
    "spec.runPolicy": (
        [{"cleanPodPolicy": "All"}, {"suspend": True}, {"successPolicy": "ChiefOrWorker0"}],
        [{"cleanPodPolicy": "Bad"}, {"backoffLimit": 101}, {"successPolicy": "AllWorkers"}],
    ),
}


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    """Each field unset or valid; then zero, one or two fields made invalid (so about a third are valid)."""
    choice = {p: draw(st.none() | st.sampled_from(valid)) for p, (valid, _) in CHOICES.items()}
    broken = draw(st.lists(st.sampled_from(sorted(CHOICES)), max_size=2, unique=True))
    for p in broken:
        choice[p] = draw(st.sampled_from(CHOICES[p][1]))
    return choice


def _put(obj: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        obj = obj.setdefault(key, {})
    obj[leaf] = copy.deepcopy(value)


def _manifest(choice: dict[str, Any]) -> dict:
    obj = base_job("prop")
    for path, value in choice.items():
        if value is not None:
            _put(obj, path, value)
    return obj


@given(jobs())
@settings(max_examples=100, deadline=None)
def test_client_accepts_what_it_parses_back(choice: dict[str, Any]) -> None:
    """Pure half: whatever validate_job accepts serialises to a wire form it accepts unchanged."""
    try:
        job = validate_job(_manifest(choice))
    except JobValidationError:
        return
    assert validate_job(job.to_wire()) == job


@pytest.mark.cluster
@given(choice=jobs())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_server_and_client_agree(choice: dict[str, Any], k8s: Any, api_namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    obj = _manifest(choice)
    try:
        expected: Any = server_defaulted_spec(obj)
    except JobValidationError as e:
        expected = e
    event("client rejects" if isinstance(expected, JobValidationError) else "client accepts")
    try:
        stored = client.CustomObjectsApi(k8s).create_namespaced_custom_object(
            m.GROUP, m.VERSION, api_namespace, m.PLURAL, obj, dry_run="All", field_validation="Strict"
        )
    except ApiException as e:
        assert e.status in (400, 422), e
        message = json.loads(e.body)["message"]
        assert isinstance(expected, JobValidationError), f"server rejected, client accepted: {message}"
        for err in expected.errors:
            assert err.path in message, f"client error {err} not named by the server: {message}"
        return
    assert not isinstance(expected, JobValidationError), f"server accepted, client rejected: {expected}"
    assert stored["spec"] == expected
