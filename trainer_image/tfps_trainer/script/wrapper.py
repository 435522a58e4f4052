"""The supervisor of a script-mode program: one per replica, the container's main process.

It starts the program (same TF_CONFIG, plus :mod:`.env`), forwards SIGTERM/SIGINT/SIGHUP to it,
streams its output line by line, keeps the last lines for the termination message and scans them for
the classic failures (:mod:`tfps_trainer.hints`), and exits with the program's exit code
(:func:`program_exit_code`), so the failure policy judges the program. A failure whose output shows a
known deterministic incompatibility exits :data:`~tfps_wire.exitcodes.INCOMPATIBLE` instead (permanent:
another attempt fails the same way); the reason keeps the program's own code and names the fix. A program
that fails as every attempt would before it trained (a missing module, a syntax error, a usage error, a
missing file its command line names: :mod:`.startup`) exits :data:`~tfps_wire.exitcodes.CANNOT_RUN`.
On the chief it serves the progress endpoint, fed by the checkpoints the program writes
(:class:`.follow.CheckpointFollower`) and by :func:`tfps_trainer.script.report`.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from tfps_wire import exitcodes
from tfps_wire.job_settings import JobSettings
from tfps_wire.strategy import lead_task
from tfps_wire.termination import format_success, termination_line, write_termination_log

from ..cluster import TaskConfig
from ..errors import TrainerError, report_failure
from ..hints import Hint, Scanner
from .env import expand, program_env
from .follow import CheckpointFollower
from .progress_file import read_report
from .startup import StartupFailure, classify

TAIL_LINES = 20
RECENT_LINES = 400
"""Lines kept for :func:`.startup.classify`: the last traceback, however deep the imports that led to it."""
POLL_SECONDS = 1.0
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def program_exit_code(returncode: int, terminated: bool = False) -> int:
    """The exit code this replica reports for the program's ``returncode`` (Popen's): its own code, or
    128 + N when it was killed by signal N, as a container runtime reports it; read through
    :mod:`tfps_wire.exitcodes` like the trainer's own. A program that failed after this replica was
    sent SIGTERM (preemption, drain, suspend, deletion) reports ``PREEMPTED``: the stop was no fault of
    the job, whatever the program made of the signal."""
    if terminated and returncode != 0:
        return exitcodes.PREEMPTED
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(argv: list[str], code: int, tail: list[str], hint: Hint | None = None) -> str:
    """The one-line reason of a failed program: what it was, how it ended, the hint its output matched,
    its last lines."""
    how = f"was killed by {signal.Signals(code - 128).name}" if 128 < code < 128 + 65 else f"exited with code {code}"
    last = " | ".join(line.strip() for line in tail[-5:] if line.strip())
    return (
        f"program {' '.join(argv)[:200]} {how}"
        + (f"; hint ({hint.name}): {hint.hint}" if hint else "")
        + (f"; last lines: {last}" if last else "")
    )


def cannot_run(argv: list[str], code: int, failure: StartupFailure) -> TrainerError:
    """The permanent error of a program that failed as every attempt would: how it ended and the hint."""
    how = f"exited with code {code}" if code < 128 else f"was killed by signal {code - 128}"
    return TrainerError(
        f"program {' '.join(argv)[:200]} {how} before it trained ({failure.kind}: {failure.subject}); {failure.hint}",
        exitcodes.CANNOT_RUN,
    )


def failure_code(code: int, hint: Hint | None) -> int:
    """The code a failed program's replica exits with: ``code`` (:func:`program_exit_code`), or the code of
    the hint its output matched (INCOMPATIBLE, LOST_CLUSTER); a preemption stays a preemption."""
    if code in (exitcodes.OK, exitcodes.PREEMPTED) or hint is None or hint.exit_code is None:
        return code
    return hint.exit_code


class _Output(threading.Thread):
    """Copies the program's output to ours, keeping the last lines and scanning every line for hints."""

    def __init__(self, stream: Any) -> None:
        super().__init__(name="tfps-program-output", daemon=True)
        self.stream = stream
        self.recent: collections.deque[str] = collections.deque(maxlen=RECENT_LINES)
        self.scanner = Scanner()

    @property
    def tail(self) -> list[str]:
        """The last lines, for the termination message."""
        return list(self.recent)[-TAIL_LINES:]

    def run(self) -> None:
        for raw in iter(self.stream.readline, b""):
            line = raw.decode(errors="replace")
            self.recent.append(line.rstrip("\n"))
            self.scanner.feed(line)
            try:
                sys.stdout.write(line)
                sys.stdout.flush()
            except (OSError, ValueError):
                pass


class _LeadWatch(threading.Thread):
    """Feeds the lead's (the chief's, or worker 0's without one) progress from the program's checkpoints and
    reports."""

    def __init__(self, settings: JobSettings, progress: Any, progress_file: str, role: str) -> None:
        super().__init__(name="tfps-checkpoint-follower", daemon=True)
        self.role = role
        self.follower = CheckpointFollower(settings.checkpoint_dir)
        self.progress, self.progress_file = progress, progress_file
        self.stopped = threading.Event()
        self._reported: tuple[int, float] | None = None
        self._noted = 0

    def run(self) -> None:
        # Reading a checkpoint needs TensorFlow; importing it takes seconds, so it starts now rather
        # than on the first checkpoint (which could be gone, or superseded, by then).
        import tensorflow  # noqa: F401

        while not self.stopped.wait(POLL_SECONDS):
            self.once()

    def once(self) -> None:
        info = self.follower.poll()
        if info is not None:
            step = max(info.step, self.progress.snapshot()["step"])
            self.progress.update(checkpoint=info, step=step)
            print(f"tfps-trainer {self.role}: checkpoint step {info.step} -> {info.path}", flush=True)
        for note in self.follower.notes[self._noted :]:
            print(f"tfps-trainer {self.role}: {note}", flush=True)
        self._noted = len(self.follower.notes)
        doc = read_report(self.progress_file)
        if doc is not None:
            now, step = time.monotonic(), doc["step"]
            changes: dict[str, Any] = {"step": step}
            if isinstance(doc.get("loss"), (int, float)):
                changes["loss"] = float(doc["loss"])
            if self._reported is not None and step > self._reported[0]:
                changes["steps_per_second"] = (step - self._reported[0]) / max(now - self._reported[1], 1e-9)
            if self._reported is None or step != self._reported[0]:
                self._reported = (step, now)
                self.progress.update(**changes)

    def stop(self) -> None:
        self.stopped.set()
        self.once()  # the final checkpoint, written just before the program exited

    @property
    def trained(self) -> bool:
        """Whether the program has shown training: a checkpoint or a progress report."""
        return self.follower.latest is not None or self._reported is not None


def _progress_file(settings: JobSettings, task: TaskConfig) -> str:
    base = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"tfps-progress-{settings.job_name}-{task.task_type}-{task.task_index}.json")


def run(task: TaskConfig, settings: JobSettings) -> int:
    """Run this replica's program to its end; return the exit code (failures already reported)."""
    assert settings.script is not None
    role = task.name
    argv_raw = settings.script.programs.get(task.task_type)
    if not argv_raw:
        return report_failure(role, TrainerError(f"no program for role {task.task_type} in TFPS_JOB.script", 2))
    progress_file = _progress_file(settings, task)
    try:
        os.unlink(progress_file)
    except OSError:
        pass
    env = program_env(settings, task.task_type, task.task_index, progress_file)
    argv = expand(argv_raw, env)
    for d in (settings.checkpoint_dir, settings.tensorboard_dir, settings.model_dir, settings.paths.model):
        try:
            os.makedirs(d, exist_ok=True)
        except OSError:
            pass  # a read-only or missing volume: the program reports it in its own words
    progress = server = watch = None
    if task.task_type != "evaluator" and (task.task_type, task.task_index) == lead_task(task.cluster):
        from .. import status_server as progress_mod

        progress = progress_mod.Progress(role=task.task_type, target_steps=settings.steps or 0, job=settings.job_name)
        server = progress_mod.serve(progress, settings.progress_port)
        print(
            f"tfps-trainer {role}: progress on http://{server.httpd.server_address[0]!s}:{server.port}/status",
            flush=True,
        )
        watch = _LeadWatch(settings, progress, progress_file, role)
        watch.start()
    print(f"tfps-trainer {role}: running {' '.join(argv)}", flush=True)
    try:
        try:
            child = subprocess.Popen(
                argv,
                env=env,
                cwd=settings.code_dir or None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        except OSError as exc:
            return _fail(
                role,
                progress,
                TrainerError(
                    f"cannot start program {' '.join(argv)[:200]}: {exc.strerror or exc}"
                    + (f" ({exc.filename})" if getattr(exc, "filename", None) else ""),
                    exitcodes.PROGRAM_NOT_FOUND,
                ),
            )
        received: set[int] = set()

        def forward(signum: int, _frame: Any) -> None:
            received.add(signum)
            _forward(child, signum)

        previous = {s: signal.signal(s, forward) for s in FORWARDED}
        output = _Output(child.stdout)
        output.start()
        try:
            returncode = child.wait()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
        output.join(timeout=5)
        code = program_exit_code(returncode, terminated=signal.SIGTERM in received)
        if watch is not None:
            watch.stop()
        if code != exitcodes.OK:
            startup = None
            if code != exitcodes.PREEMPTED and not (watch is not None and watch.trained):
                startup = classify(list(output.recent), argv, program_exit_code(returncode))
            if startup is not None:
                return _fail(role, progress, cannot_run(argv, program_exit_code(returncode), startup))
            hint = output.scanner.best() if code != exitcodes.PREEMPTED else None
            reason = describe_exit(argv, program_exit_code(returncode), output.tail, hint)
            if code == exitcodes.PREEMPTED:
                reason += " (after SIGTERM: preempted)"
            return _fail(role, progress, TrainerError(reason, failure_code(code, hint)))
        summary = _summary(settings, progress)
        if progress is not None:
            progress.update(state="succeeded", message=summary)
        print(termination_line(role, summary), flush=True)
        write_termination_log(termination_line(role, summary))
        return exitcodes.OK
    finally:
        if watch is not None:
            watch.stopped.set()
        if server is not None:
            server.stop()


def _summary(settings: JobSettings, progress: Any) -> str:
    if progress is None:
        return "program finished"
    snap = progress.snapshot()
    ck = snap["checkpoint"]
    step = ck["step"] if ck else snap["step"]
    return format_success(step, settings.steps or step, ck["path"] if ck else None)


def _fail(role: str, progress: Any, error: TrainerError) -> int:
    if progress is not None:
        progress.update(state="failed", message=error.reason)
    return report_failure(role, error)


def _forward(child: subprocess.Popen, signum: int) -> None:
    try:
        child.send_signal(signum)
    except (ProcessLookupError, OSError):
        pass
