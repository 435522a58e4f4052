"""The export step (against the exporter's result schema) and the progress display, without TensorFlow."""

from __future__ import annotations

import io
import json
import sys
import textwrap

from tfps_operator.api.models import PSTrainingJob
from tfps_operator.manifests.jobsettings import job_settings
from tfps_operator.tools.local.export import artifact_rows, notes_lines, run_export
from tfps_operator.tools.local.progress_display import PlainDisplay, Status
from tfps_operator.tools.local.supervisor import LocalJob
from tfps_wire.export_result import ArtifactResult, ExportFailed, ExportSucceeded, encode, human_size


class Events:
    def __init__(self):
        self.events = []

    def event(self, m):
        self.events.append(m)

    def update(self, s):
        pass

    def close(self):
        pass


def plan_with_exporter(tmp_path, script: str, backoff: int = 1) -> LocalJob:
    job = PSTrainingJob.model_validate(
        {
            "metadata": {"name": "ex"},
            "spec": {"model": {"module": "m"}, "training": {"steps": 5}, "export": {"backoffLimit": backoff}},
        }
    )
    return LocalJob(
        job=job,
        settings=job_settings(job, mount_path=str(tmp_path)),
        exporter=(sys.executable, "-c", textwrap.dedent(script)),
    )


SUCCESS = encode(
    ExportSucceeded(
        step=5,
        path="exports/5",
        manifest="exports/5/manifest.json",
        artifacts=[
            ArtifactResult(format=f, path=f"exports/5/{f}", bytes=2048, sha256="0" * 64, max_error=1e-6)
            for f in ("savedmodel", "tflite", "onnx")
        ],
    )
)
WRITE = "import os, sys; open(os.environ['TFPS_TERMINATION_LOG'], 'w').write(sys.argv[1]); sys.exit(int(sys.argv[2]))"


def test_success_lists_artifacts_with_absolute_paths(tmp_path):
    plan = plan_with_exporter(tmp_path, WRITE)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, SUCCESS, "0"))
    out = run_export(plan, Events(), poll=0.05)
    assert out.ok, out.message
    assert out.path == str(tmp_path / "default" / "ex" / "exports" / "5")
    rows = artifact_rows(out)
    assert [r[0] for r in rows] == ["savedmodel", "tflite", "onnx"]
    assert rows[1][2] == str(tmp_path / "default" / "ex" / "exports" / "5" / "tflite")
    assert rows[0][1] == "verified" and rows[0][3] == "2.0 KiB" and rows[0][4] == "1e-06"


def test_truncated_result_reads_the_manifest(tmp_path):
    root = tmp_path / "default" / "ex"
    (root / "exports" / "5").mkdir(parents=True)
    (root / "exports" / "5" / "manifest.json").write_text(
        json.dumps(
            {
                "artifacts": [
                    {"format": f, "path": p, "bytes": 10, "sha256": "1" * 64, "verification": {"maxAbsError": 0.5}}
                    for f, p in (("savedmodel", "savedmodel"), ("tflite", "model.tflite"), ("onnx", "model.onnx"))
                ]
            }
        )
    )
    msg = ExportSucceeded(step=5, path="exports/5", manifest="exports/5/manifest.json", truncated=True).model_dump_json(
        by_alias=True
    )
    plan = plan_with_exporter(tmp_path, WRITE)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, msg, "0"))
    out = run_export(plan, Events(), poll=0.05)
    assert out.ok, out.message
    assert {a.path for a in out.artifacts} == {
        str(root / "exports" / "5" / p) for p in ("savedmodel", "model.tflite", "model.onnx")
    }
    assert all(a.max_error == 0.5 for a in out.artifacts)


def test_permanent_failure_is_not_retried_and_names_the_reason(tmp_path):
    failed = encode(ExportFailed(reason="VerificationFailed", message="onnx: max abs error 3e-02 > 1e-04"))
    plan = plan_with_exporter(tmp_path, WRITE, backoff=3)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, failed, "7"))
    ev = Events()
    out = run_export(plan, ev, poll=0.05)
    assert not out.ok
    assert "VerificationFailed: onnx: max abs error 3e-02" in out.message
    assert "export.log" in out.message
    assert len([e for e in ev.events if e.startswith("exporting")]) == 1


def test_exporter_killed_then_retried(tmp_path):
    marker = tmp_path / "first-attempt"
    script = f"""
        import os, signal, sys
        from pathlib import Path
        m = Path({str(marker)!r})
        if not m.exists():
            m.write_text("x"); print("dying", flush=True); os.kill(os.getpid(), signal.SIGKILL)
        open(os.environ['TFPS_TERMINATION_LOG'], 'w').write(sys.argv[1])
    """
    plan = plan_with_exporter(tmp_path, script, backoff=1)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, SUCCESS))
    ev = Events()
    out = run_export(plan, ev, poll=0.05)
    assert out.ok, out.message
    assert any("attempt 1 failed (ExporterDied)" in e for e in ev.events), ev.events


def test_an_optional_format_that_failed_is_listed_and_the_run_succeeds(tmp_path):
    root = tmp_path / "default" / "ex"
    (root / "exports" / "5").mkdir(parents=True)
    failure = {
        "format": "tflite",
        "quantization": "none",
        "reason": "ConversionFailed",
        "message": "tflite: the model has a lookup table LiteRT's built-in ops cannot run",
    }
    (root / "exports" / "5" / "manifest.json").write_text(
        json.dumps(
            {
                "artifacts": [
                    {
                        "format": f,
                        "path": p,
                        "bytes": 10,
                        "sha256": "1" * 64,
                        "quantization": None,
                        "notes": [],
                        "verification": {"maxAbsError": 0.0, "warnings": w},
                    }
                    for f, p, w in (
                        ("savedmodel", "savedmodel", []),
                        ("onnx", "model.onnx", ["output 'y': inconclusive: outputs constant"]),
                    )
                ],
                "failed": [failure],
            }
        )
    )
    msg = encode(ExportSucceeded(step=5, path="exports/5", manifest="exports/5/manifest.json", failed=[failure]))
    plan = plan_with_exporter(tmp_path, WRITE)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, msg, "0"))
    out = run_export(plan, Events(), poll=0.05)
    assert out.ok and "not exported: tflite" in out.message
    rows = artifact_rows(out)
    assert [(r[0], r[1]) for r in rows] == [
        ("savedmodel", "verified"),
        ("onnx", "verified (see notes)"),
        ("tflite", "NOT EXPORTED"),
    ]
    assert notes_lines(out) == [
        "tflite: not exported: tflite: the model has a lookup table LiteRT's built-in ops cannot run",
        "onnx: output 'y': inconclusive: outputs constant",
    ]


def test_a_required_format_that_failed_fails_the_run_and_shows_what_was_published(tmp_path):
    root = tmp_path / "default" / "ex"
    (root / "exports" / "5").mkdir(parents=True)
    failure = {
        "format": "savedmodel",
        "reason": "VerificationFailed",
        "message": "savedmodel: output 'y': max abs error 1",
    }
    (root / "exports" / "5" / "manifest.json").write_text(
        json.dumps(
            {
                "artifacts": [
                    {"format": "onnx", "path": "model.onnx", "bytes": 10, "sha256": "1" * 64, "verification": {}}
                ],
                "failed": [failure],
            }
        )
    )
    msg = encode(
        ExportFailed(
            reason="VerificationFailed",
            message="required format(s) savedmodel failed: ...",
            step=5,
            path="exports/5",
            manifest="exports/5/manifest.json",
            failed=[failure],
        )
    )
    plan = plan_with_exporter(tmp_path, WRITE, backoff=3)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, msg, "7"))
    ev = Events()
    out = run_export(plan, ev, poll=0.05)
    assert not out.ok and "required format(s) savedmodel failed" in out.message
    assert [a.format for a in out.artifacts] == ["onnx"] and [f.format for f in out.failed] == ["savedmodel"]
    assert len([e for e in ev.events if e.startswith("exporting")]) == 1  # not retried


def test_missing_format_fails(tmp_path):
    partial = encode(
        ExportSucceeded(
            step=5,
            path="exports/5",
            manifest="exports/5/manifest.json",
            artifacts=[ArtifactResult(format="savedmodel", path="exports/5/savedmodel", bytes=1, sha256="0" * 64)],
        )
    )
    plan = plan_with_exporter(tmp_path, WRITE)
    plan = LocalJob(job=plan.job, settings=plan.settings, exporter=(*plan.exporter, partial, "0"))
    out = run_export(plan, Events(), poll=0.05)
    assert not out.ok and "no onnx, tflite artifact" in out.message


def test_status_parsing_and_plain_display():
    s = Status.from_json(
        {
            "step": 120,
            "loss": 0.5,
            "steps_per_second": 12.5,
            "state": "running",
            "checkpoint": {"step": 100, "path": "/x/ckpt-100", "time": "t"},
            "message": "resumed from checkpoint step 100",
        }
    )
    assert (s.step, s.loss, s.checkpoint_step, s.message) == (120, 0.5, 100, "resumed from checkpoint step 100")
    assert Status.from_json({"step": "x", "checkpoint": None}) == Status()
    buf = io.StringIO()
    d = PlainDisplay(target=300, out=buf, every=3600)
    d.update(s)
    d.update(Status(step=130, checkpoint_step=100))  # same checkpoint, too soon: not printed
    d.update(Status(step=200, checkpoint_step=200))  # new checkpoint: printed
    d.close()  # prints nothing new
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("step 120/300  loss 0.5  12.5 steps/s  checkpoint @ 100")
    assert lines[1].endswith("step 200/300  checkpoint @ 200")
    assert human_size(None) == "-" and human_size(512) == "512 B" and human_size(3 * 1024 * 1024) == "3.0 MiB"


def test_fetch_status_survives_bad_answers():
    """A chief that is starting, dying or cut off mid-answer must never crash the runner."""
    import socket
    import threading

    from tfps_operator.tools.local.progress_display import fetch_status

    answers = [
        b'HTTP/1.0 200 OK\r\nContent-Length: 547\r\n\r\n{"step": 1',  # cut off (IncompleteRead)
        b"HTTP/1.0 200 OK\r\n\r\nnot json",
        b"garbage",
        b'HTTP/1.0 200 OK\r\n\r\n{"step": 7, "loss": 0.25}',
    ]
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve():
        for answer in answers:
            conn, _ = srv.accept()
            conn.recv(4096)
            conn.sendall(answer)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/status"
    try:
        assert [fetch_status(url, timeout=5) for _ in range(3)] == [None, None, None]
        assert fetch_status(url, timeout=5) == Status(step=7, loss=0.25)
    finally:
        srv.close()
    t.join(5)
    assert fetch_status(url, timeout=1) is None  # nothing listening
