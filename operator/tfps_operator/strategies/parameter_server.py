"""ParameterServerStrategy: a chief drives training on workers that hold no state; the variables live on the
parameter servers.

The coordinator on the chief tolerates losing a worker (it reschedules the worker's closures and reconnects
when it comes back), so a worker is recreated alone. Losing the chief or a parameter server loses the
training state: the whole job restarts from the latest checkpoint. Parameter servers and workers serve until
they are stopped; only the chief (and the evaluator) exit when training is done. Only the chief and the
evaluator touch storage. On suspension the chief stops first: its SIGTERM save reads the variables from the
parameter servers.
"""

from __future__ import annotations

from . import DATA_SERVICE_STORAGE, TrainingStrategy

STRATEGY = TrainingStrategy(
    name="ParameterServer",
    restarts_job=frozenset({"chief", "ps"}),
    finishes=frozenset({"chief", "evaluator"}),
    storage_roles=frozenset({"chief", "evaluator", *DATA_SERVICE_STORAGE}),
    stops_first=frozenset({"chief"}),
    restart_grace_seconds=None,  # the chief saves its last step on SIGTERM while the parameter servers are there
    workers_leave_live=True,
)
