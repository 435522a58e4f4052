"""The exporter's termination-message contract with the operator (TF-free)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tfps_wire.exitcodes import EXPORT_CODE_BY_REASON, EXPORT_REASON_BY_CODE, ExportCode
from tfps_wire.export_result import (
    ArtifactResult,
    ExportFailed,
    ExportSucceeded,
    encode,
    exit_code,
    parse_message,
)
from tfps_wire.termination import MAX_MESSAGE_BYTES, write_termination_log


def _success(n: int) -> ExportSucceeded:
    return ExportSucceeded(
        step=120,
        path="exports/120",
        manifest="exports/120/manifest.json",
        artifacts=[
            ArtifactResult(format="onnx", path=f"exports/120/m{i}.onnx", bytes=10, sha256="ab" * 32, max_error=1e-7)
            for i in range(n)
        ],
    )


def test_success_round_trips_with_camel_case_fields():
    line = encode(_success(2))
    assert "\n" not in line
    raw = json.loads(line)
    assert raw["ok"] is True and raw["artifacts"][0]["maxError"] == 1e-7
    assert parse_message(line) == _success(2)
    assert exit_code(parse_message(line)) == 0


def test_too_many_artifacts_are_dropped_to_fit_kubernetes_limit():
    line = encode(_success(40))
    assert len(line.encode()) < MAX_MESSAGE_BYTES
    parsed = parse_message(line)
    assert parsed.ok and parsed.truncated and parsed.artifacts == [] and parsed.manifest == "exports/120/manifest.json"


def test_long_failure_message_is_shortened_and_keeps_reason():
    line = encode(ExportFailed(reason="VerificationFailed", message="x" * 10000))
    assert len(line.encode()) < MAX_MESSAGE_BYTES
    parsed = parse_message(line)
    assert not parsed.ok and parsed.reason == "VerificationFailed"
    assert exit_code(parsed) == ExportCode.VERIFICATION_FAILED


def test_every_reason_has_a_distinct_nonzero_exit_code():
    codes = list(EXPORT_CODE_BY_REASON.values())
    assert len(set(codes)) == len(codes) and 0 not in codes
    assert all(EXPORT_REASON_BY_CODE[int(c)] == r for r, c in EXPORT_CODE_BY_REASON.items())


def test_malformed_message_is_rejected():
    with pytest.raises(ValueError):
        parse_message('{"ok": false, "reason": "Nope", "message": "x"}')
    with pytest.raises(ValueError):
        parse_message("not json")


def test_unwritable_termination_log_is_skipped(tmp_path):
    assert write_termination_log("x", str(tmp_path / "missing-dir" / "log")) is False
    assert write_termination_log("y", str(tmp_path / "log")) is True
    assert (tmp_path / "log").read_text() == "y"


def test_result_module_does_not_import_tensorflow():
    code = "import sys, tfps_wire.export_result; print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
