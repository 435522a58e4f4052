"""``python -m tfps_trainer.export [--checkpoint PATH|latest] [--step N]``.

Reads the job settings from env ``TFPS_JOB``, exports and verifies the checkpoint, publishes
``exports/<step>/`` atomically, prints the result line (see :mod:`.result`) as the last stdout
line, writes it to the termination log and exits with :func:`.result.exit_code`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from ..config import JobSettings, SettingsError  # noqa: E402
from .errors import CANCELLED, ExportError  # noqa: E402
from .result import ExportFailed, ExportSucceeded, encode, exit_code, write_termination_log  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tfps_trainer.export", description=__doc__.split("\n\n")[1])
    p.add_argument("--checkpoint", default="latest",
                   help="'latest' (default), a checkpoint prefix or a checkpoint directory, relative to the job root")
    p.add_argument("--step", type=int, default=None, help="export checkpoints/ckpt-N (overrides --checkpoint)")
    return p


def _interrupted(signum: int, _frame: Any) -> None:
    """Stop at once (KeyboardInterrupt is not swallowed by ``except Exception`` in libraries) and set the
    flag the pipeline checks before publishing, in case something swallows it anyway."""
    CANCELLED.set()
    raise KeyboardInterrupt(signal.Signals(signum).name)


def run(argv: list[str] | None = None) -> ExportSucceeded | ExportFailed:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:  # --help
            raise
        return ExportFailed(reason="SettingsInvalid", message=f"bad command line (argparse exit {exc.code})")
    try:
        settings = JobSettings.from_env()
        if not settings.export.enabled:
            raise ExportError("SettingsInvalid", "TFPS_JOB.export.enabled is false: nothing to export")
        if args.step is not None and args.step < 0:
            raise ExportError("SettingsInvalid", f"--step: must be >= 0, got {args.step}")
        from .pipeline import export  # TensorFlow is imported here, after the cheap checks

        return export(settings, checkpoint=args.checkpoint, step=args.step)
    except SettingsError as exc:
        return ExportFailed(reason="SettingsInvalid", message=str(exc))
    except ExportError as exc:
        return exc.to_result()
    except KeyboardInterrupt as exc:
        return ExportFailed(reason="Interrupted", message=f"received {exc or 'SIGINT'}; nothing was published")
    except Exception as exc:  # noqa: BLE001 - report, never crash without a message
        traceback.print_exc()
        return ExportFailed(reason="InternalError", message=f"{type(exc).__name__}: {' '.join(str(exc).split())[:1000]}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    result = run(argv)
    line = encode(result)
    if not result.ok:
        logging.getLogger("tfps_trainer.export").error("%s: %s", result.reason, result.message)
    write_termination_log(line)
    print(line, flush=True)
    return exit_code(result)


if __name__ == "__main__":
    sys.exit(main())
