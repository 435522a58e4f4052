"""Training progress: read the chief's /status endpoint and show it (rich bar on a TTY, log lines otherwise)."""

from __future__ import annotations

import http.client
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from tfps_wire.progress_report import ProgressReport, read_report


@dataclass(frozen=True)
class Status:
    """The fields of the chief's ``GET /status`` that ``tfps run`` shows (a checkpoint's step is shown
    even when its path or time is unusable)."""

    step: int | None = None
    loss: float | None = None
    steps_per_second: float | None = None
    checkpoint_step: int | None = None
    checkpoint_path: str | None = None
    state: str | None = None
    message: str | None = None

    @classmethod
    def from_report(cls, report: ProgressReport) -> Status:
        ckpt = report.checkpoint
        return cls(
            step=report.step,
            loss=report.loss,
            steps_per_second=report.steps_per_second,
            checkpoint_step=ckpt.step if ckpt else None,
            checkpoint_path=ckpt.path if ckpt else None,
            state=report.state,
            message=report.message or None,
        )

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Status:
        """The decoded ``/status`` answer (raises ``ValueError`` when it is no report)."""
        return cls.from_report(ProgressReport.model_validate(doc))


def fetch_status(url: str, timeout: float = 0.5) -> Status | None:
    """One GET of the chief's status endpoint (a loopback URL); None while it is not up."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            report = read_report(resp.read())
    except (OSError, ValueError, http.client.HTTPException):  # not up yet, going away, or half an answer
        return None
    return None if report is None else Status.from_report(report)


class Display(Protocol):
    def event(self, message: str) -> None: ...
    def update(self, status: Status) -> None: ...
    def close(self) -> None: ...


def _details(status: Status, checkpoint_label: str) -> list[str]:
    """Loss, speed and latest checkpoint, those the chief has reported."""
    parts = []
    if status.loss is not None:
        parts.append(f"loss {status.loss:.4g}")
    if status.steps_per_second is not None:
        parts.append(f"{status.steps_per_second:.1f} steps/s")
    if status.checkpoint_step is not None:
        parts.append(f"{checkpoint_label} {status.checkpoint_step}")
    return parts


def _fmt(status: Status, target: int) -> str:
    step = f"step {status.step if status.step is not None else '-'}" + (f"/{target}" if target else "")
    return "  ".join([step, *_details(status, "checkpoint @")])


class PlainDisplay:
    """Timestamped log lines: every event, and progress at most every ``every`` seconds or on a new checkpoint."""

    def __init__(self, target: int, out: TextIO | None = None, every: float = 5.0) -> None:
        self.target, self.out, self.every = target, out or sys.stdout, every
        self._last_line = 0.0
        self._last: Status | None = None
        self._printed: Status | None = None

    def _print(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", file=self.out, flush=True)

    def event(self, message: str) -> None:
        self._print(message)

    def update(self, status: Status) -> None:
        now = time.monotonic()
        new_ckpt = self._last is None or status.checkpoint_step != self._last.checkpoint_step
        if status != self._last and (new_ckpt or now - self._last_line >= self.every):
            self._print(_fmt(status, self.target))
            self._last_line, self._printed = now, status
        self._last = status

    def close(self) -> None:
        if self._last is not None and self._last != self._printed:
            self._print(_fmt(self._last, self.target))
            self._printed = self._last


class RichDisplay:
    """A live progress bar (step/target, loss, steps/s, latest checkpoint) with events printed above it."""

    def __init__(self, target: int, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.target = target
        self.console = console or Console()
        self.progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self.task = self.progress.add_task("training", total=target, detail="starting")
        self.progress.start()

    def event(self, message: str) -> None:
        self.progress.console.print(message, highlight=False, markup=False)

    def update(self, status: Status) -> None:
        detail = "  ".join(_details(status, "ckpt"))
        self.progress.update(self.task, completed=min(status.step or 0, self.target), detail=detail)

    def close(self) -> None:
        self.progress.stop()


def make_display(target: int, tty: bool | None = None) -> Display:
    if tty is None:
        tty = sys.stdout.isatty()
    return RichDisplay(target) if tty else PlainDisplay(target)
