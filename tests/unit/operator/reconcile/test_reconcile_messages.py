"""Reading the trainer's and the exporter's termination messages into what the state machine acts on."""

from __future__ import annotations

from tfps_operator.reconcile import messages
from tfps_wire.export_result import ExportFailed, ExportSucceeded, PreflightReport, encode
from tfps_wire.termination import FinalCheckpoint, format_success, termination_line

SUCCEEDED = ExportSucceeded(step=120, path="exports/120", manifest="exports/120/manifest.json")
FAILED = ExportFailed(reason="VerificationFailed", message="onnx: max abs error 3e-05 > 1e-05")


def test_a_chiefs_success_summary_names_its_final_checkpoint_and_a_failure_line_names_none():
    summary = termination_line("chief/0", format_success(300, 300, "/tfps/ns/j/checkpoints/ckpt-300"))
    assert messages.final_checkpoint(summary) == FinalCheckpoint(300, 300, "/tfps/ns/j/checkpoints/ckpt-300")
    assert messages.final_checkpoint("tfps-trainer chief/0: lost parameter server ps/0") is None
    assert messages.final_checkpoint("") is None


def test_the_exporters_result_reads_back_as_written():
    assert messages.export_result(encode(SUCCEEDED)) == SUCCEEDED
    assert messages.export_result(encode(FAILED) + "\n") == FAILED


def test_a_missing_or_foreign_export_message_says_why_there_is_no_result():
    assert messages.export_result("") == "no termination message"
    why = messages.export_result("Traceback (most recent call last): ...")
    assert isinstance(why, str) and why.startswith("termination message is not an export result (")
    assert "\n" not in why


def test_a_preflight_report_or_an_early_failure_reads_and_anything_else_is_none():
    report = PreflightReport(ok=True, warnings=["tflite: inconclusive"])
    assert messages.preflight_report(encode(report)) == report
    assert messages.preflight_report(encode(FAILED)) == FAILED
    assert messages.preflight_report("") is None
    assert messages.preflight_report("OOMKilled") is None


def test_a_failed_export_is_named_by_its_results_reason():
    assert messages.export_failure(7, encode(FAILED)) == "VerificationFailed: onnx: max abs error 3e-05 > 1e-05"


def test_without_a_result_the_exit_code_names_the_reason_and_the_output_is_quoted():
    assert messages.export_failure(4, "") == "CheckpointNotFound (exit code 4)"
    tail = messages.export_failure(9, "x" * 600 + "disk full")
    assert tail.startswith("PublishFailed (exit code 9); output: ") and tail.endswith("disk full")
    assert len(tail) == len("PublishFailed (exit code 9); output: ") + messages.OUTPUT_TAIL


def test_an_exporter_killed_without_a_result_is_reported_as_died():
    assert messages.export_failure(137, "") == "exporter died with exit code 137 without a result"
    assert messages.export_failure(137, "Killed") == "exporter died with exit code 137 without a result: Killed"


def test_an_export_pod_that_has_not_exited_gives_no_reason():
    assert messages.export_failure(None, "") is None
