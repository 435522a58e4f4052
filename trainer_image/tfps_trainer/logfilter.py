"""Keep a trainer's log readable when TensorFlow floods it: repeated lines are rate-limited, and the
lines are scanned for the classic failures (:mod:`.hints`).

:class:`StderrFilter` puts a pipe in place of file descriptor 2, so it sees what TensorFlow's C++ code
writes as well as Python's; a thread copies each line to the real stderr unless the same line (digits
and hex ids aside) already appeared :data:`BURST` times in the last :data:`WINDOW_SECONDS`. What was
held back is summed up in one line when the window ends and on close.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable

from .hints import Scanner

BURST = 5
"""Copies of one line kept per window."""
WINDOW_SECONDS = 60.0
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")


def shape(line: str) -> str:
    """A line with its numbers (timestamps, thread ids, step counts, addresses) blanked: repeats share it."""
    return _VARIABLE.sub("#", line.strip())[:300]


class RateLimiter:
    """Decides which lines to keep; pure apart from the clock it is given."""

    def __init__(self, burst: int = BURST, window: float = WINDOW_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.burst, self.window, self.clock = burst, window, clock
        self.counts: dict[str, int] = {}
        self.held: dict[str, tuple[int, str]] = {}
        self.started = clock()

    def feed(self, line: str) -> list[str]:
        """The lines to write for one input line: itself or nothing, after any summaries that are due."""
        out = self._roll() if self.clock() - self.started >= self.window else []
        key = shape(line)
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if n <= self.burst:
            out.append(line)
        else:
            held, _ = self.held.get(key, (0, line))
            self.held[key] = (held + 1, line)
        return out

    def close(self) -> list[str]:
        return self._roll()

    def _roll(self) -> list[str]:
        out = [
            f"[tfps] {n} more line(s) like this one were not logged: {line.strip()[:300]}\n"
            for n, line in self.held.values()
        ]
        self.counts.clear()
        self.held.clear()
        self.started = self.clock()
        return out


class StderrFilter:
    """Rate-limits and scans everything written to fd 2 until :meth:`close`."""

    def __init__(self, limiter: RateLimiter | None = None, on_fatal: Callable[[], None] | None = None) -> None:
        """``on_fatal`` is called (once, from the filter's thread) when a hint's ``fatal_after`` is reached."""
        self.limiter = limiter or RateLimiter()
        self.on_fatal = on_fatal
        self.scanner = Scanner()
        self.kept = self.dropped = 0
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
        """Put the real stderr back and write what is left (the summaries). Idempotent.

        With ``run_failed``, Python's logging is switched off first: TensorFlow's background threads (the
        coordinator logging each closure it cannot run) go on until the process exits, and past this point
        nothing would rate-limit them."""
        if run_failed:
            logging.disable(logging.CRITICAL)
        if self._real < 0:
            return
        import sys

        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._real, 2)  # the pipe's last writer is gone: the pump sees its end
        self._thread.join(timeout)
        os.close(self._real)
        self._real = -1

    def hint(self, extra: str = "") -> str:
        """``hint: ...`` for the most telling failure seen (or in ``extra``), else ""."""
        h = self.scanner.best(extra)
        return f"hint: {h.hint}" if h else ""
