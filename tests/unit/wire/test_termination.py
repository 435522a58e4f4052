"""The termination message every trainer and exporter process writes: one writer, one limit, one ``one_line``."""

from __future__ import annotations

import os

import pytest

from tfps_trainer.export.errors import error_line
from tfps_wire.job_settings import DEFAULT_TERMINATION_LOG, TERMINATION_LOG_ENV
from tfps_wire.termination import (
    MAX_MESSAGE_BYTES,
    TRACEBACK_LINES,
    failure_text,
    one_line,
    termination_line,
    write_termination_log,
)


def test_the_message_goes_to_the_file_the_environment_names_exactly_as_given(tmp_path, monkeypatch):
    log = tmp_path / "term"
    monkeypatch.setenv(TERMINATION_LOG_ENV, str(log))
    assert write_termination_log('{"ok":true}') is True
    assert log.read_text() == '{"ok":true}'


def test_an_explicit_path_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(TERMINATION_LOG_ENV, str(tmp_path / "env"))
    assert write_termination_log("x", str(tmp_path / "given")) is True
    assert (tmp_path / "given").read_text() == "x" and not (tmp_path / "env").exists()


def test_an_unwritable_log_is_skipped_without_an_exception(tmp_path):
    assert write_termination_log("x", str(tmp_path / "missing-dir" / "log")) is False


@pytest.mark.skipif(os.path.exists(DEFAULT_TERMINATION_LOG), reason="runs inside a container that has one")
def test_the_kubernetes_default_is_never_created_outside_a_pod(monkeypatch):
    monkeypatch.delenv(TERMINATION_LOG_ENV, raising=False)
    assert write_termination_log("x") is False
    assert not os.path.exists(DEFAULT_TERMINATION_LOG)


def test_a_failure_keeps_the_reason_last_and_the_traceback_tail_within_the_limit():
    line = termination_line("chief/0", "model module 'm' raised KeyError on import: 'units'")
    assert line == "tfps-trainer chief/0: model module 'm' raised KeyError on import: 'units'"
    trace = "".join(f'  File "m.py", line {i}, in f{"x" * 300}\n' for i in range(100))
    text = failure_text(line, trace)
    lines = text.splitlines()
    assert lines[-1] == line and len(text.encode()) <= MAX_MESSAGE_BYTES
    assert 0 < len(lines) - 1 <= TRACEBACK_LINES and lines[-2] == trace.splitlines()[-1]
    assert failure_text(line, "") == line


def test_one_line_collapses_whitespace_and_marks_a_cut():
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 20, limit=10) == "x" * 7 + "..."


def test_a_library_error_reads_as_its_type_and_its_message_on_one_line():
    assert error_line(ValueError("bad\nshape  (3,)")) == "ValueError: bad shape (3,)"
    assert error_line(OSError("y" * 50), limit=10) == "OSError: " + "y" * 7 + "..."
