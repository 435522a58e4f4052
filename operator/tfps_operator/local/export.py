"""The export step of `tfps run`: run ``python -m tfps_trainer.export`` and show what it produced.

The exporter reads the same TFPS_JOB, writes ``<root>/exports/<step>/`` with a manifest, and on
success writes a JSON result (step, path, artifacts) to its termination log. It is retried up to
``spec.export.backoffLimit`` times, as the operator's export Job is.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tfps_trainer.config import SETTINGS_ENV

from ..api.models import Artifact
from .procs import Child, stop_all
from .progress import Display
from .supervisor import LocalJob


@dataclass
class ExportOutcome:
    ok: bool
    message: str
    step: int | None = None
    path: str | None = None
    artifacts: list[Artifact] = field(default_factory=list)


def parse_result(text: str) -> tuple[int | None, str | None, list[Artifact]]:
    """Read the exporter's JSON result (snake_case or camelCase keys). Raises ValueError if malformed."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("export result is not a JSON object")
    try:
        artifacts = [Artifact.model_validate(_known(a)) for a in doc.get("artifacts") or []]
    except ValidationError as exc:
        raise ValueError(f"export result has a malformed artifact: {exc.errors()[0]['msg']}") from None
    step = doc.get("step")
    return (int(step) if isinstance(step, int) else None), doc.get("path"), artifacts


def _known(a: Any) -> Any:
    """Keep only the artifact fields the status model knows (the exporter may report more)."""
    if not isinstance(a, dict):
        return a
    known = {"format", "path", "bytes", "sha256", "max_error", "maxError", "quantization"}
    return {k: v for k, v in a.items() if k in known}


def run_export(plan: LocalJob, display: Display, grace: float = 10.0, poll: float = 0.5) -> ExportOutcome:
    """Run the exporter (with retries) to a verified export; stops it on any interruption."""
    env = {**plan.base_env(), SETTINGS_ENV: plan.settings.to_env()}
    child = plan.child("export", list(plan.exporter), env)
    attempts = plan.job.spec.export.backoff_limit + 1
    formats = ", ".join(plan.settings.export.formats)
    last = ""
    for attempt in range(1, attempts + 1):
        display.event(f"exporting {formats} (attempt {attempt}/{attempts}); log: {child.log_path}")
        try:
            child.start()
            while (code := child.poll()) is None:
                time.sleep(poll)
        finally:
            stop_all([child], grace)
        if code == 0:
            try:
                step, path, artifacts = parse_result(child.reason())
            except ValueError as exc:
                last = f"export exited 0 but its result in {child.termination_log} is unreadable: {exc}"
                continue
            missing = set(plan.settings.export.formats) - {a.format for a in artifacts}
            if missing:
                last = f"export exited 0 but produced no {', '.join(sorted(missing))} artifact"
                continue
            return ExportOutcome(True, f"exported step {step} to {path}", step=step, path=path, artifacts=artifacts)
        last = child.describe_failure(code)
        display.event(f"export attempt {attempt} failed: {child.reason() or f'exit code {code}'}")
    return ExportOutcome(False, f"ExportFailed: {last}")


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def artifact_rows(artifacts: list[Artifact]) -> list[tuple[str, str, str, str]]:
    """(format, path, size, verified max error) per artifact."""
    return [
        (a.format, a.path, human_size(a.bytes), "-" if a.max_error is None else f"{a.max_error:.3g}")
        for a in artifacts
    ]
