"""`tfps run`: a whole PSTrainingJob on this machine, as local processes on loopback ports.

Modules: ``cli`` (validate, run, report), ``supervisor`` (the processes and the failure rules),
``procs`` (one child: process group, logs, no orphans), ``ports``, ``progress``, ``export``.
"""

from .cli import main

__all__ = ["main"]
