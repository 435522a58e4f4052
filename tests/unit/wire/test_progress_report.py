"""The schema of a trainer role's ``GET /status`` answer, as the writer sends it and the readers read it."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from tfps_trainer.status_server import CheckpointInfo, Progress
from tfps_wire.progress_report import CheckpointReport, ProgressReport, parse_time, read_report

CK_TIME = "2026-01-01T11:59:30+00:00"


def test_what_the_writer_sends_reads_back_as_the_same_report():
    p = Progress(role="chief", target_steps=50, job="mnist")
    p.update(step=7, loss=1.5, steps_per_second=3.0, checkpoint=CheckpointInfo(5, "/d/ckpt-5", CK_TIME))
    sent = p.report().model_dump_json()
    assert read_report(sent) == p.report()
    assert json.loads(sent) == p.snapshot()
    assert p.snapshot()["checkpoint"] == {"step": 5, "path": "/d/ckpt-5", "time": CK_TIME}  # time as written


def test_the_writer_reports_a_nan_or_infinite_number_as_null():
    p = Progress(role="evaluator", target_steps=10)
    p.update(loss=float("nan"), steps_per_second=float("inf"), metrics={"auc": float("nan"), "acc": 0.5})
    snap = p.snapshot()
    assert snap["loss"] is None and snap["steps_per_second"] is None
    assert snap["metrics"] == {"auc": None, "acc": 0.5}


@pytest.mark.parametrize(
    "field,value",
    [
        ("step", "120"),
        ("step", -1),
        ("step", 1.5),
        ("step", True),
        ("loss", "0.2"),
        ("loss", True),
        ("loss", float("nan")),
        ("state", "sleeping"),
        ("job", 5),
        ("message", ["x"]),
        ("updated", "yesterday"),
        ("checkpoint", "ckpt-100"),
    ],
)
def test_a_bad_field_reads_as_absent_and_the_rest_still_counts(field, value):
    doc = {"role": "chief", "step": 120, "loss": 0.25, "state": "running", "job": "j", "message": "m"}
    report = read_report(json.dumps(doc | {field: value}))
    assert getattr(report, field) is None
    assert {k: getattr(report, k) for k in doc if k != field} == {k: v for k, v in doc.items() if k != field}


def test_each_checkpoint_field_is_read_on_its_own():
    report = read_report(json.dumps({"checkpoint": {"step": 100, "path": "", "time": "t"}}))
    assert report.checkpoint == CheckpointReport(step=100, path=None, time=None)


def test_an_integer_counts_as_a_number_and_metrics_that_are_not_an_object_read_as_empty():
    report = read_report(json.dumps({"loss": 1, "metrics": [1, 2]}))
    assert report.loss == 1.0 and report.metrics == {}
    assert read_report(json.dumps({"metrics": {"auc": "high", "acc": 0.5}})).metrics == {"auc": None, "acc": 0.5}


@pytest.mark.parametrize("raw", [b"", b"not json", b"\xff\xfe", b"[1, 2]", b"42", b"null", b'"text"'])
def test_an_answer_that_is_not_a_json_object_is_no_report(raw):
    assert read_report(raw) is None


def test_a_role_that_is_not_a_string_makes_no_report_and_an_empty_object_is_an_empty_report():
    assert read_report(b'{"role": 5, "step": 1}') is None
    assert read_report(b"{}") == ProgressReport()


def test_a_time_without_a_zone_is_utc_and_z_is_accepted():
    assert parse_time("2026-01-01T11:59:30") == datetime(2026, 1, 1, 11, 59, 30, tzinfo=UTC)
    assert read_report(json.dumps({"updated": "2026-01-01T11:59:30Z"})).updated_at == parse_time(CK_TIME)
    assert CheckpointReport(time="2026-01-01T11:59:30").at == parse_time(CK_TIME)


def test_the_schema_module_loads_neither_tensorflow_nor_the_http_server():
    code = "import sys, tfps_wire.progress_report; print(sorted({'tensorflow', 'http.server'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
