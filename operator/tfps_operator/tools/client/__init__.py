"""Python client of PSTrainingJobs (``TFPSClient``) and the job-aware ``tfps`` verbs built on it.

Needs the ``kubernetes`` library (``pip install 'tfps-operator[client]'``); never imports TensorFlow.
The names below load on first use: ``tfps`` registers the verbs' arguments from this package in every
process, the operator's included, which must not pay for the client-side validation (a CEL engine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import (
        AlreadyExists,
        ApiError,
        ChecksumMismatch,
        ClientError,
        InvalidCode,
        InvalidJob,
        JobFailed,
        LogsUnavailable,
        NoExports,
        NotFound,
        WaitTimeout,
    )
    from .jobs import TERMINAL_PHASES, Child, JobEvent, TFPSClient, build_job, load_job

__all__ = [
    "TFPSClient",
    "load_job",
    "build_job",
    "JobEvent",
    "Child",
    "TERMINAL_PHASES",
    "ClientError",
    "ApiError",
    "NotFound",
    "AlreadyExists",
    "InvalidJob",
    "InvalidCode",
    "WaitTimeout",
    "JobFailed",
    "NoExports",
    "ChecksumMismatch",
    "LogsUnavailable",
]
_FROM_JOBS = frozenset(__all__[:6])
"""The names :mod:`.jobs` defines; the others are :mod:`.errors`'."""


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = "jobs" if name in _FROM_JOBS else "errors"
    return getattr(importlib.import_module(f".{module}", __name__), name)
