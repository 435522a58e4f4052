"""The one table of exit codes: the trainer's and the exporter's, and the documents that carry them."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from tfps_wire import exitcodes
from tfps_wire.export_result import ExportFailed, PreflightReport, Reason, exit_code

ROOT = Path(__file__).resolve().parents[3]


def test_every_export_failure_reason_has_exactly_one_failing_code():
    failing = [e.name for e in exitcodes.EXPORT_TABLE if e.code != exitcodes.ExportCode.OK]
    assert sorted(failing) == sorted(get_args(Reason)) and len(set(failing)) == len(failing)
    assert [e.code for e in exitcodes.EXPORT_TABLE] == list(exitcodes.ExportCode)


def test_the_exporter_exits_with_the_code_named_after_its_reason():
    assert exit_code(ExportFailed(reason="CheckpointNotFound", message="no checkpoint")) == 4
    assert exitcodes.EXPORT_REASON_BY_CODE[4] == "CheckpointNotFound"
    assert exit_code(PreflightReport(ok=True)) == 0
    assert exit_code(PreflightReport(ok=False)) == exitcodes.ExportCode.VERIFICATION_FAILED


def test_the_same_number_means_different_things_in_the_two_processes():
    assert exitcodes.BY_CODE[4].name == "Numerics" and exitcodes.EXPORT_REASON_BY_CODE[4] == "CheckpointNotFound"


def test_the_documents_carry_both_tables_as_the_module_writes_them():
    operator_doc = (ROOT / "docs" / "operator.md").read_text()
    assert exitcodes.markdown_table() in operator_doc, "docs/operator.md: paste tfps_wire.exitcodes.markdown_table()"
    assert exitcodes.export_markdown_table() in operator_doc, (
        "docs/operator.md: paste tfps_wire.exitcodes.export_markdown_table()"
    )
    assert exitcodes.markdown_table() in (ROOT / "trainer_image" / "README.md").read_text()
    assert (
        exitcodes.export_markdown_table()
        in (ROOT / "trainer_image" / "tfps_trainer" / "export" / "README.md").read_text()
    )
