"""Steps per second over a sliding window of progress samples.

The chief learns of finished steps in bursts: closures are scheduled ahead, several finish together, and
a checkpoint's join reports the step right after the last sample. A rate from two consecutive samples
then reads thousands of steps per second. The rate here spans the samples of the last ``window``
seconds (all of them since the start or resume when that is shorter), and is only renewed once they
span more than ``min_span`` seconds.
"""

from __future__ import annotations

from collections import deque


class StepRate:
    def __init__(self, window: float = 10.0, min_span: float = 0.0) -> None:
        self.window, self.min_span = window, min_span
        self.samples: deque[tuple[float, int]] = deque()
        self.rate: float | None = None

    def reset(self, now: float, step: int) -> None:
        """Start over at ``step`` (a resume: steps before it were not run by this process)."""
        self.samples.clear()
        self.samples.append((now, step))
        self.rate = None

    def add(self, now: float, step: int) -> float | None:
        """Record that ``step`` was reached at ``now``; the rate over the window (None until it spans
        ``min_span`` seconds)."""
        if self.samples and step <= self.samples[-1][1]:
            return self.rate
        self.samples.append((now, step))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()
        first_t, first_step = self.samples[0]
        if now - first_t > self.min_span:
            self.rate = (step - first_step) / (now - first_t)
        return self.rate
