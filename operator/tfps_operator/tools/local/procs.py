"""One local child process: started in its own process group, logged to a file, never orphaned.

Every child runs in a new session (its own process group), so stopping it reaches anything it
started. If ``tfps run`` itself dies, even by SIGKILL, the kernel kills the child too
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``, set between fork and exec). The death signal is tied to the
thread that forked, so children are only ever started from the main thread.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(parent_pid: int) -> None:
    """preexec_fn: ask the kernel for SIGKILL when the parent dies; bail out if it already has."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def exit_code(returncode: int) -> int:
    """Popen's returncode as a container runtime reports it: killed by signal N -> 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class Child:
    """A named child process (``ps-0``, ``export``...) with its log and termination-log files."""

    name: str
    argv: Sequence[str]
    env: dict[str, str]
    log_path: Path
    termination_log: Path
    popen: subprocess.Popen | None = field(default=None, repr=False)
    started_at: float = 0.0
    starts: int = 0
    prepare: Callable[[], None] | None = field(default=None, repr=False)
    """Called before each start (a pod's volumes, made afresh for each incarnation)."""

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.termination_log.unlink(missing_ok=True)
        if self.prepare is not None:
            self.prepare()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            log.write(f"\n===== tfps run: {self.name} start #{self.starts} at {stamp} =====\n".encode())
            log.flush()
            parent = os.getpid()  # read here: preexec_fn runs in the child
            self.popen = subprocess.Popen(
                list(self.argv),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: _die_with_parent(parent),
                close_fds=True,
            )
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def poll(self) -> int | None:
        """The exit code once the process has ended (signals as 128 + N), else None."""
        if self.popen is None:
            return None
        rc = self.popen.poll()
        return None if rc is None else exit_code(rc)

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (also after the leader has exited)."""
        if self.popen is None:
            return
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reason(self) -> str:
        """The one-line reason the child wrote to its termination log, if any."""
        try:
            return self.termination_log.read_text(errors="replace").strip()
        except OSError:
            return ""

    def tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of the child's log (its latest start only)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        marker = f"===== tfps run: {self.name} start #"
        cut = text.rfind(marker)
        if cut >= 0:
            text = text[text.find("\n", cut) + 1 :]
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])

    def describe_failure(self, code: int | None, lines: int = 15, reason: str | None = None) -> str:
        """A failure message naming the process, its exit code, its reason and its log tail.

        ``reason`` replaces the termination log's text (for children that write JSON there).
        """
        head = f"{self.name} exited with code {code}" if code is not None else f"{self.name} vanished"
        if reason := (self.reason() if reason is None else reason):
            head += f": {reason}"
        if tail := self.tail(lines):
            indented = "\n".join("    " + ln for ln in tail.splitlines())
            return f"{head}\n  last lines of {self.log_path}:\n{indented}"
        return f"{head}\n  log (empty): {self.log_path}"


def stop_all(children: Iterable[Child], grace: float = 10.0) -> None:
    """SIGTERM every child's process group, wait up to ``grace`` seconds, then SIGKILL the rest."""
    started = [(c, c.popen) for c in children if c.popen is not None]
    for c, _ in started:
        c.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for _, popen in started:
        try:
            popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for c, popen in started:
        # SIGKILL the group even if the leader exited: it may have left processes behind.
        c.signal_group(signal.SIGKILL)
        try:
            popen.wait(timeout=5)
        except subprocess.TimeoutExpired:  # stuck in the kernel; nothing more we can do
            pass
