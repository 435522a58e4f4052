"""``python -m tfps_trainer.export.worker``: one attempt at the export, in the process that loads TensorFlow.

Started by :mod:`.__main__`, which supervises it. Writes its result (the termination-message JSON) to
``--result``; the artifacts to leave out (those that crashed an earlier attempt) come in ``--skip``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfps_wire.export_result import ExportError, ExportFailed, ExportSucceeded, FormatFailure, PreflightReport
from tfps_wire.job_settings import JobSettings, SettingsError
from tfps_wire.lineage import Lineage

from .errors import CANCELLED, COMMITTING, error_line

Result = ExportSucceeded | ExportFailed | PreflightReport


def parser(prog: str = "python -m tfps_trainer.export") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Export and verify a checkpoint of the job in TFPS_JOB.")
    p.add_argument(
        "--checkpoint",
        default="latest",
        help="'latest' (default), a checkpoint prefix or a checkpoint directory, relative to the job root",
    )
    p.add_argument("--step", type=int, default=None, help="export checkpoints/ckpt-N (overrides --checkpoint)")
    p.add_argument(
        "--preflight",
        action="store_true",
        help="convert and verify a model with fresh weights in a scratch directory; publish nothing",
    )
    return p


def _interrupted(signum: int, _frame: Any) -> None:
    """Stop at once (KeyboardInterrupt is not swallowed by ``except Exception`` in libraries) and set the
    flag the pipeline checks before publishing, in case something swallows it anyway. Once the pipeline
    publishes (:data:`COMMITTING`) the export is let finish."""
    CANCELLED.set()
    if not COMMITTING.is_set():
        raise KeyboardInterrupt(signal.Signals(signum).name)


def attempt(args: argparse.Namespace, skip: list[FormatFailure]) -> Result:
    try:
        settings = JobSettings.from_env()
        if not settings.export.enabled:
            raise ExportError("SettingsInvalid", "TFPS_JOB.export.enabled is false: nothing to export")
        if args.step is not None and args.step < 0:
            raise ExportError("SettingsInvalid", f"--step: must be >= 0, got {args.step}")
        from . import pipeline  # TensorFlow is imported here, after the cheap checks

        skipped = {f.label: f for f in skip}
        if args.preflight:
            return pipeline.preflight(settings, skip=skipped)
        lineage = Lineage.from_env()
        return pipeline.export(settings, checkpoint=args.checkpoint, step=args.step, skip=skipped, lineage=lineage)
    except SettingsError as exc:
        return ExportFailed(reason="SettingsInvalid", message=str(exc))
    except ExportError as exc:
        return exc.to_result()
    except KeyboardInterrupt as exc:
        return ExportFailed(reason="Interrupted", message=f"received {exc or 'SIGINT'}; nothing was published")
    except Exception as exc:
        traceback.print_exc()
        if CANCELLED.is_set() and not COMMITTING.is_set():  # a library turned the KeyboardInterrupt into its own
            why = f"received a termination signal ({error_line(exc, 300)}); nothing was published"
            return ExportFailed(reason="Interrupted", message=why)
        return ExportFailed(
            reason="InternalError", message=f"{type(exc).__name__}: {' '.join(str(exc).split())[:1000]}"
        )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    p = parser("python -m tfps_trainer.export.worker")
    p.add_argument("--result", required=True, help="file to write the result JSON to")
    p.add_argument("--skip", default=None, help="JSON file: a list of FormatFailure to record instead of producing")
    args = p.parse_args(argv)
    skip = []
    if args.skip:
        skip = [FormatFailure.model_validate(f) for f in json.loads(Path(args.skip).read_text())]
    result = attempt(args, skip)
    Path(args.result).write_text(result.model_dump_json(by_alias=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
