"""``python -m tfps_trainer.export [--checkpoint PATH|latest] [--step N] [--preflight]``.

Reads the job settings from env ``TFPS_JOB``, exports and verifies the checkpoint, publishes
``exports/<step>/`` atomically, prints the result line (see :mod:`.result`) as the last stdout
line, writes it to the termination log and exits with :func:`.result.exit_code`.

This process does not load TensorFlow: it runs the export in a worker process (:mod:`.worker`) and
watches it. A converter or runtime that crashes the worker (TFLite's int8 calibration can segfault
on some models) costs only that artifact: the journal says which one was in progress, it is recorded
as failed, and the export runs again without it. SIGTERM/SIGINT are passed on to the worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tfps_wire.export_result import ExportFailed, FormatFailure, encode, exit_code, parse_any
from tfps_wire.job_settings import JobSettings, SettingsError
from tfps_wire.termination import write_termination_log

from .journal import JOURNAL_ENV, crash_failure, last_begun
from .worker import Result, parser

MAX_ATTEMPTS = 8
"""Attempts at most (one per artifact that may crash, plus the last)."""


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


def _keras_env() -> dict[str, str]:
    """Script mode: the Keras the program ran with (``spec.model.keras``) is ``tf.keras`` in the worker
    too. Unreadable settings change nothing here: the worker reports them."""
    try:
        script = JobSettings.from_env().script
    except SettingsError:
        return {}
    return script.keras_env() if script is not None else {}


def supervise(argv: list[str]) -> Result:
    skipped: list[FormatFailure] = []
    child: subprocess.Popen[bytes] | None = None

    stopping: list[int] = []

    def interrupted() -> ExportFailed:
        name = signal.Signals(stopping[0]).name
        return ExportFailed(reason="Interrupted", message=f"received {name}; nothing was published")

    def forward(signum: int, _frame: Any) -> None:
        stopping.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    with tempfile.TemporaryDirectory(prefix="tfps-export-") as tmp:
        result_file, skip_file, journal = Path(tmp) / "result.json", Path(tmp) / "skip.json", Path(tmp) / "journal"
        for _ in range(MAX_ATTEMPTS):
            for f in (result_file, journal):
                f.unlink(missing_ok=True)
            if stopping:
                return interrupted()
            skip_file.write_text(json.dumps([f.model_dump(by_alias=True) for f in skipped]))
            cmd = [
                sys.executable,
                "-m",
                "tfps_trainer.export.worker",
                *argv,
                "--result",
                str(result_file),
                "--skip",
                str(skip_file),
            ]
            child = subprocess.Popen(cmd, env={**os.environ, **_keras_env(), JOURNAL_ENV: str(journal)})
            rc = child.wait()
            if result_file.is_file():
                return parse_any(result_file.read_text(encoding="utf-8"))
            if stopping:  # told to stop: a worker that died on the way is not retried
                return interrupted()
            begun = last_begun(journal)
            if begun is None or any(f.label == begun[0] for f in skipped):
                where = f"while converting/verifying {begun[0]}" if begun else "before any artifact was produced"
                return ExportFailed(
                    reason="InternalError",
                    message=(f"the exporter process died ({_describe(rc)}) {where} without a result; see its log"),
                )
            failure = crash_failure(begun[0], begun[1], _describe(rc))
            print(f"tfps_trainer.export: {failure.message}", file=sys.stderr, flush=True)
            skipped.append(failure)
    return ExportFailed(reason="InternalError", message=f"the exporter crashed {MAX_ATTEMPTS} times; see its log")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:  # --help
            raise
        result: Result = ExportFailed(reason="SettingsInvalid", message=f"bad command line (argparse exit {exc.code})")
    else:
        result = supervise(argv)
    line = encode(result)
    if not result.ok:
        reason = getattr(result, "reason", "RequiredFormatFailed")
        print(f"tfps_trainer.export: {reason}: {getattr(result, 'message', '')}", file=sys.stderr, flush=True)
    write_termination_log(line)
    print(line, flush=True)
    return exit_code(result)


if __name__ == "__main__":
    sys.exit(main())
