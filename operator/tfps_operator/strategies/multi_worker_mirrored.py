"""MultiWorkerMirroredStrategy and the other collective (all-reduce) strategies: every worker (and the optional
chief, which is one more worker) holds a full replica of the variables and trains in lock step.

A collective cannot go on with a member missing, so any chief or worker failure restarts every pod from the
latest checkpoint. Every training task ends on its own when training is done, and every one of them writes to
storage (worker 0 or the chief writes the real checkpoint; the others write to temporary directories, as
TensorFlow's checkpoint managers and ``BackupAndRestore`` require). On suspension all stop at once: their
SIGTERM handlers (``PreemptionCheckpointHandler``, ``BackupAndRestore``) agree on the save step among
themselves. A restart stops them with a short grace period: with a member gone the collective can save
nothing, and a process holding a MultiWorkerMirroredStrategy outlives SIGTERM (TensorFlow's preemption
watcher takes the signal), so the pod's own grace period would be spent waiting.
"""

from __future__ import annotations

from . import DATA_SERVICE_STORAGE, TrainingStrategy

STRATEGY = TrainingStrategy(
    name="MultiWorkerMirrored",
    restarts_job=frozenset({"chief", "worker"}),
    finishes=frozenset({"chief", "worker", "evaluator"}),
    storage_roles=frozenset({"chief", "worker", "evaluator", *DATA_SERVICE_STORAGE}),
    stops_first=frozenset(),
    restart_grace_seconds=5,
    workers_leave_live=False,
)
