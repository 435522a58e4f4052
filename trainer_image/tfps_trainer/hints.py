"""The classic failures of TensorFlow parameter-server training, recognised in a process's output, each
with a one-line hint that points to the cause (TF-free: the patterns are plain text).

The first matching entry of :data:`HINTS` wins: they are ordered from cause to symptom (a resource
created outside ``strategy.scope()`` produces "unknown device" errors by the thousand, then a thread
exhaustion abort; the first is the one to fix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tfps_wire import exitcodes


@dataclass(frozen=True)
class Hint:
    name: str
    pattern: re.Pattern[str]
    hint: str
    fatal_after: int | None = None
    """After this many matching lines the run cannot recover (TensorFlow retries the failing closures
    without end): the process stops with a permanent error instead of flooding until it aborts."""
    exit_code: int | None = None
    """Script mode: a program that failed with this in its output exits with this code rather than its own:
    :data:`~tfps_wire.exitcodes.INCOMPATIBLE` (permanent) for a failure that repeats on every attempt,
    :data:`~tfps_wire.exitcodes.LOST_CLUSTER` (retryable) for one caused by another task's loss."""


KERAS3_FIX = (
    "this program is written for Keras 2 (tf.keras of TF <= 2.15) and ran under Keras 3: set "
    "spec.model.keras: legacy (TF_USE_LEGACY_KERAS=1 with tf_keras; the default in script mode), or port it "
    "to Keras 3 (model.fit does not take ParameterServerStrategy datasets: use a custom loop with "
    "ClusterCoordinator; save with model.save('...keras') or model.export(dir); weights end in .weights.h5; "
    "optimizer.learning_rate, not optimizer.lr)"
)

HINTS: tuple[Hint, ...] = (
    Hint(
        "Keras3Incompatible",
        re.compile(
            r"you need to pass this dataset to ClusterCoordinator\.create_per_worker_dataset|"
            r"filepath provided must end in `\.weights\.h5`|The filename must end in `\.weights\.h5`|"
            r"Invalid filepath extension for saving|"
            r"'\w*(Optimizer|SGD|Adam\w*|Adagrad|RMSprop|Ftrl|Nadam|Adadelta|Lion)' object has no attribute 'lr'"
        ),
        KERAS3_FIX,
        exit_code=exitcodes.INCOMPATIBLE,
    ),
    Hint(
        "CollectivePeerLost",
        re.compile(
            r"Collective ops is aborted by|stopped sending heartbeats|"
            r"(CollectiveReduce|AllReduce|collective)\w*.*(UNAVAILABLE|Socket closed|failed to connect)",
            re.IGNORECASE,
        ),
        "another task of this all-reduce job stopped (the first pod that failed has the cause); the job "
        "restarts every worker from the latest checkpoint",
        exit_code=exitcodes.LOST_CLUSTER,
    ),
    Hint(
        "OutsideScope",
        re.compile(
            r"outside (of )?(the )?(strategy\.)?scope|created (within|under|in) the (strategy\.)?scope|"
            r"not created within the scope|ClosureInputError|unknown device",
            re.IGNORECASE,
        ),
        "a resource used by the training step (a Keras preprocessing layer such as StringLookup or "
        "Normalization, a lookup table, a variable) was created outside strategy.scope(), e.g. at module "
        "level: create it in build_model() (run under the scope) or inside dataset()",
        fatal_after=200,
    ),
    Hint(
        "ParameterServerUnreachable",
        re.compile(
            r"/job:ps/replica:\d+/task:\d+.*(UNAVAILABLE|Socket closed|failed to connect)|"
            r"parameter server\(s\) .* not reachable",
            re.IGNORECASE,
        ),
        "a parameter server cannot be reached: check that its pod runs, that its address in TF_CONFIG "
        "resolves, and that no NetworkPolicy blocks the gRPC port",
    ),
    Hint(
        "ThreadsExhausted",
        re.compile(
            r"pthread_create\(\) failed|Resource temporarily unavailable.*thread|can't start new thread", re.IGNORECASE
        ),
        "the process ran out of threads: raise the pod's pids limit, or look for the first error above "
        "(a flood of failing steps starts threads without end)",
    ),
)


def find(text: str) -> Hint | None:
    """The first hint whose pattern occurs in ``text``."""
    return next((h for h in HINTS if h.pattern.search(text)), None)


def hopeless(text: str) -> Hint | None:
    """The hint of a failure that never recovers (one with ``fatal_after``) that ``text`` shows, if any.

    TensorFlow may raise such a failure in the main thread before its flood reaches ``fatal_after`` lines
    (how many lines come first depends on the machine's speed): the error names the cause by itself."""
    hint = find(text)
    return hint if hint is not None and hint.fatal_after is not None else None


class Scanner:
    """Remembers which hints the lines fed so far match (cheap enough for every line of a flood)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.counts: dict[str, int] = {}
        self.fatal: tuple[Hint, str] | None = None
        """The first hint whose ``fatal_after`` was reached, with its first matching line."""
        self._first: dict[str, str] = {}

    def feed(self, line: str) -> Hint | None:
        """Scan one line; returns the hint that has just become fatal (once), else None."""
        for h in HINTS:
            if (h.name in self.seen and h.fatal_after is None) or not h.pattern.search(line):
                continue
            self.seen.add(h.name)
            self._first.setdefault(h.name, line.strip())
            n = self.counts[h.name] = self.counts.get(h.name, 0) + 1
            if h.fatal_after is not None and n == h.fatal_after and self.fatal is None:
                self.fatal = (h, self._first[h.name])
                return h
        return None

    def best(self, extra: str = "") -> Hint | None:
        """The highest-priority hint seen in the lines, or in ``extra`` (e.g. the failure's reason)."""
        found = find(extra) if extra else None
        for h in HINTS:
            if h.name in self.seen or h is found:
                return h
        return None
