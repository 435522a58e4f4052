"""Keep a trainer's log readable when TensorFlow floods it: repeated lines are limited by count, and the
lines are scanned for the classic failures (:mod:`.hints`).

:class:`StderrFilter` puts a pipe in place of file descriptor 2, so it sees what TensorFlow's C++ code
writes as well as Python's; a thread copies each line to the real stderr unless the same line (digits
and hex ids aside) already appeared :data:`BURST` times. Past that, a line is counted, not copied: one
summary with the count is written each time the count reaches a power of ten, and one on close. A flood
of ``n`` copies of a line therefore leaves at most ``BURST + log10(n) + 1`` lines in the log, however long
it lasts and however slowly the machine runs.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import threading
from collections.abc import Callable

from .hints import Scanner

BURST = 5
"""Copies of one line kept in full."""
MAX_SHAPES = 10_000
"""Distinct lines counted; lines of further shapes are copied uncounted (memory stays bounded)."""
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")


def shape(line: str) -> str:
    """A line with its numbers (timestamps, thread ids, step counts, addresses) blanked: repeats share it."""
    return _VARIABLE.sub("#", line.strip())[:300]


def summary(held: int, line: str, *, final: bool = True) -> str:
    so_far = "" if final else " so far"
    return f"[tfps] {held} more line(s) like this one were not logged{so_far}: {line.strip()[:300]}\n"


def most_lines(copies: int, burst: int = BURST) -> int:
    """The most lines the limiter writes for ``copies`` copies of one line (summaries included)."""
    held = max(0, copies - burst)
    return min(copies, burst) + (int(math.log10(held)) + 1 if held else 0)


class RateLimiter:
    """Decides which lines to keep; pure (no clock: the bound depends on counts only)."""

    def __init__(self, burst: int = BURST, max_shapes: int = MAX_SHAPES) -> None:
        self.burst, self.max_shapes = burst, max_shapes
        self.counts: dict[str, int] = {}
        self.held: dict[str, tuple[int, str]] = {}
        """Per shape: copies not logged so far and the newest of them, until the next summary."""

    def feed(self, line: str) -> list[str]:
        """The lines to write for one input line: itself, a summary of its shape's count, or nothing."""
        key = shape(line)
        if key not in self.counts and len(self.counts) >= self.max_shapes:
            return [line]
        n = self.counts[key] = self.counts.get(key, 0) + 1
        if n <= self.burst:
            return [line]
        held = n - self.burst
        if _power_of_ten(held):
            self.held.pop(key, None)
            return [summary(held, line, final=False)]
        self.held[key] = (held, line)
        return []

    def close(self) -> list[str]:
        """Summaries of every shape whose count changed since its last summary."""
        out = [summary(held, line) for held, line in self.held.values()]
        self.held.clear()
        return out


def _power_of_ten(n: int) -> bool:
    return n >= 10 and str(n).rstrip("0") == "1"


class StderrFilter:
    """Rate-limits and scans everything written to fd 2 until :meth:`close`."""

    def __init__(self, limiter: RateLimiter | None = None, on_fatal: Callable[[], None] | None = None) -> None:
        """``on_fatal`` is called (once, from the filter's thread) when a hint's ``fatal_after`` is reached."""
        self.limiter = limiter or RateLimiter()
        self.on_fatal = on_fatal
        self.scanner = Scanner()
        self.kept = self.dropped = 0
        self._closed = False
        self._real = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._thread = threading.Thread(target=self._pump, args=(read,), name="tfps-stderr-filter", daemon=True)
        self._thread.start()

    def _write(self, lines: list[str]) -> None:
        for line in lines:
            self.kept += 1
            try:
                os.write(self._real, line.encode(errors="replace"))
            except OSError:
                pass

    def _pump(self, read: int) -> None:
        pending = b""
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    text = raw.decode(errors="replace") + "\n"
                    if self.scanner.feed(text) is not None and self.on_fatal is not None:
                        self.on_fatal()
                    out = self.limiter.feed(text)
                    self.dropped += 0 if text in out else 1
                    self._write(out)
        if pending:
            text = pending.decode(errors="replace")
            self.scanner.feed(text)
            self._write(self.limiter.feed(text))
        self._write(self.limiter.close())

    def close(self, timeout: float = 5.0, *, run_failed: bool = False) -> None:
        """Stop filtering and write what is left (the summaries). Idempotent.

        Normally the real stderr goes back on fd 2. With ``run_failed`` the run's end is decided while
        TensorFlow's background threads (the coordinator logging each closure it cannot run, gRPC) go on
        writing until the process exits: fd 2 then goes to /dev/null, Python's logging is switched off, and
        ``sys.stderr`` writes to the real stderr through a descriptor of its own, so that the failure
        reported next is the log's last line, however long the process takes to exit."""
        if run_failed:
            logging.disable(logging.CRITICAL)
        if self._closed:
            return
        self._closed = True
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if run_failed:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)  # the pipe's last writer is gone: the pump sees its end
            os.close(devnull)
            sys.stderr = open(os.dup(self._real), "w", buffering=1, errors="backslashreplace")  # noqa: SIM115
        else:
            os.dup2(self._real, 2)
        self._thread.join(timeout)
        if not self._thread.is_alive():  # else it may still write there: the descriptor stays open
            os.close(self._real)

    def hint(self, extra: str = "") -> str:
        """``hint: ...`` for the most telling failure seen (or in ``extra``), else ""."""
        h = self.scanner.best(extra)
        return f"hint: {h.hint}" if h else ""
