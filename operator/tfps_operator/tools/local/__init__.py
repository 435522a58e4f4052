"""`tfps run`: a whole PSTrainingJob on this machine, as local processes on loopback ports.

Modules: ``cli`` (validate, run, report), ``supervisor`` (the processes and the failure rules),
``procs`` (one child: process group, logs, no orphans), ``ports``, ``progress``, ``export``; ``volumes``
(a pod's volumes on this machine), ``sandbox`` and ``mountns`` (each process's own mount namespace with them).
"""

from .cli import main

__all__ = ["main"]
