"""The progress endpoint of the chief and the evaluator (TF-free).

``GET /status`` returns the role's :class:`~tfps_wire.progress_report.ProgressReport` as JSON.
``GET /metrics`` returns the same numbers in Prometheus text format (its own registry, so nothing
global leaks in). The server binds ``TFPS_PROGRESS_HOST`` (default ``0.0.0.0`` so the operator can
reach a pod; tests and ``tfps run`` use ``127.0.0.1``) and the job's ``progress_port``, overridable
with ``TFPS_PROGRESS_PORT`` (``0`` picks a free port).
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tfps_wire.progress_report import STATES, CheckpointReport, ProgressReport, State

HOST_ENV = "TFPS_PROGRESS_HOST"
PORT_ENV = "TFPS_PROGRESS_PORT"
DEFAULT_HOST = "0.0.0.0"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class CheckpointInfo:
    step: int
    path: str
    time: str


@dataclass
class Progress:
    """Thread-safe progress of one role; the HTTP handler sends its :meth:`report`."""

    role: str
    target_steps: int
    job: str = ""
    state: State = "running"
    message: str = ""
    step: int = 0
    loss: float | None = None
    steps_per_second: float | None = None
    checkpoint: CheckpointInfo | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    updated: str = field(default_factory=now_iso)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, **changes: Any) -> None:
        with self._lock:
            for key, value in changes.items():
                if not hasattr(self, key) or key.startswith("_"):
                    raise AttributeError(key)
                setattr(self, key, value)
            self.updated = now_iso()

    def report(self) -> ProgressReport:
        """What ``GET /status`` answers now (a NaN or infinite number is reported as null)."""
        with self._lock:
            ck = self.checkpoint
            return ProgressReport(
                role=self.role,
                job=self.job,
                state=self.state,
                message=self.message,
                step=self.step,
                target_steps=self.target_steps,
                loss=_finite_or_none(self.loss),
                steps_per_second=_finite_or_none(self.steps_per_second),
                checkpoint=None if ck is None else CheckpointReport(step=ck.step, path=ck.path, time=ck.time),
                metrics={k: _finite_or_none(v) for k, v in self.metrics.items()},
                updated=self.updated,
            )

    def snapshot(self) -> dict[str, Any]:
        """:meth:`report` as the JSON object it is sent as."""
        return self.report().model_dump()


def _finite_or_none(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def prometheus_text(report: ProgressReport) -> bytes:
    """Render a report as Prometheus text using a fresh registry."""
    reg = CollectorRegistry(auto_describe=False)
    labels = {"role": report.role or "", "job": report.job or ""}
    names = list(labels)

    def gauge(name: str, doc: str, value: float | None, extra: dict[str, str] | None = None) -> None:
        if value is None:
            return
        lab = dict(labels, **(extra or {}))
        g = Gauge(name, doc, list(lab), registry=reg)
        g.labels(**lab).set(value)

    gauge("tfps_step", "Global training step (evaluator: step of the last evaluated checkpoint).", report.step)
    gauge("tfps_target_steps", "Target number of training steps.", report.target_steps)
    gauge("tfps_loss", "Latest training loss (evaluator: evaluation loss).", report.loss)
    gauge("tfps_steps_per_second", "Training throughput.", report.steps_per_second)
    ck = report.checkpoint
    if ck is not None:
        gauge("tfps_checkpoint_step", "Step of the latest checkpoint.", ck.step)
        at = ck.at
        ts = None if at is None else at.timestamp()
        gauge("tfps_checkpoint_timestamp_seconds", "Unix time of the latest checkpoint.", ts)
    state = Gauge("tfps_state", "1 for the current state of the role.", names + ["state"], registry=reg)
    for s in STATES:
        state.labels(**labels, state=s).set(1.0 if report.state == s else 0.0)
    if report.metrics:
        metric = Gauge(
            "tfps_metric", "Evaluation metrics of the last evaluated checkpoint.", names + ["name"], registry=reg
        )
        for name, value in report.metrics.items():
            if value is not None:
                metric.labels(**labels, name=name).set(value)
    return generate_latest(reg)


class _Handler(BaseHTTPRequestHandler):
    progress: Progress  # set on the subclass built by serve()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/status":
            body, ctype = self.progress.report().model_dump_json().encode(), "application/json"
        elif path == "/metrics":
            body, ctype = prometheus_text(self.progress.report()), CONTENT_TYPE_LATEST
        elif path in ("/healthz", "/"):
            body, ctype = b"ok\n", "text/plain"
        else:
            self.send_error(404, "unknown path (try /status or /metrics)")
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the poller gave up waiting (a busy process); it asks again

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ProgressServer:
    """Serves a :class:`Progress` over HTTP from a daemon thread."""

    def __init__(self, progress: Progress, host: str, port: int) -> None:
        handler = type("ProgressHandler", (_Handler,), {"progress": progress})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="tfps-progress", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> ProgressServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve(progress: Progress, default_port: int, environ: dict[str, str] | None = None) -> ProgressServer:
    """Start the endpoint on ``TFPS_PROGRESS_HOST``:``TFPS_PROGRESS_PORT`` (or the job's port)."""
    env = os.environ if environ is None else environ
    host = env.get(HOST_ENV, DEFAULT_HOST)
    port = int(env.get(PORT_ENV, default_port))
    return ProgressServer(progress, host, port).start()
