"""After a rollback the operator reads jobs stored under a newer CRD: Helm leaves the newer CRD installed, and
the API server defaults its new fields into every stored job. The operator leaves out what it does not know
(docs/install.md, "Upgrading"); ``tfps validate`` and every other reader of a user's file still refuse it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tfps_operator.api.parse import JobValidationError, parse_job
from tfps_operator.controller import parse_job as operator_parse_job
from tfps_operator.controller import parse_status
from tfps_operator.reconcile.writes import status_write

STORED: dict[str, Any] = {
    "apiVersion": "tfps.dev/v1alpha1",
    "kind": "PSTrainingJob",
    "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u-1", "generation": 1, "resourceVersion": "7"},
    "spec": {
        "model": {"module": "tfps_trainer.examples.linear"},
        "training": {"steps": 100},
        "replicas": {"ps": {"replicas": 2}, "worker": {"replicas": 3, "laterKnob": 5}, "laterRole": {"replicas": 0}},
        "laterSection": {"mode": "Default"},
    },
    "status": {"phase": "Running"},
}


def test_the_operator_leaves_out_spec_fields_a_newer_crd_defaulted_and_keeps_the_rest() -> None:
    job = operator_parse_job(copy.deepcopy(STORED))
    assert job.spec.replicas.ps.replicas == 2
    assert job.spec.replicas.worker.replicas == 3
    assert job.spec.training.steps == 100


def test_a_users_file_with_an_unknown_field_is_still_refused_naming_it() -> None:
    with pytest.raises(JobValidationError, match=r"spec\.laterSection: unknown field"):
        parse_job(copy.deepcopy(STORED))


def test_a_real_error_beside_unknown_fields_is_still_reported_by_the_operator() -> None:
    body = copy.deepcopy(STORED)
    body["spec"]["replicas"]["ps"]["replicas"] = "2"
    with pytest.raises(JobValidationError, match=r"spec\.replicas\.ps\.replicas: must be an integer") as err:
        operator_parse_job(body)
    assert "laterSection" not in str(err.value)


def test_a_status_with_a_newer_operators_fields_at_any_depth_is_kept_not_rebuilt() -> None:
    written = {
        "phase": "Exporting",
        "restarts": 2,
        "startTime": "2026-01-01T12:00:00Z",
        "export": {"jobName": "mnist-export", "laterDetail": {"x": 1}},
        "conditions": [
            {
                "type": "Exporting",
                "status": "True",
                "reason": "ExportStarted",
                "message": "",
                "lastTransitionTime": "2026-01-01T12:05:00Z",
                "laterField": "x",
            }
        ],
        "laterTopLevel": {"a": 1},
    }
    status = parse_status(written)
    assert status.phase == "Exporting"
    assert status.restarts == 2
    assert status.export is not None and status.export.job_name == "mnist-export"
    assert [c.type for c in status.conditions] == ["Exporting"]


def test_a_status_write_leaves_a_newer_operators_top_level_fields_alone() -> None:
    """The write is a merge patch of the fields this version owns: a field it does not know is not in it (not
    even as null), so the API server keeps it; objects merge key by key, lists (conditions) are replaced."""
    written = {
        "phase": "Running",
        "restarts": 1,
        "laterTopLevel": {"a": 1},
        "export": {"jobName": "mnist-export", "laterDetail": 1},
    }
    current = parse_status(written)
    new = current.model_copy(update={"phase": "Restarting", "restarts": 2})
    patch = status_write(current, new)
    assert patch is not None and patch["phase"] == "Restarting"
    assert "laterTopLevel" not in patch
    assert patch["export"]["jobName"] == "mnist-export" and "laterDetail" not in patch["export"]
