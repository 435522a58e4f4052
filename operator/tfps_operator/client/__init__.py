"""Python client of PSTrainingJobs (``TFPSClient``) and the job-aware ``tfps`` verbs built on it.

Needs the ``kubernetes`` library (``pip install 'tfps-operator[client]'``); never imports TensorFlow.
"""

from .errors import (
    AlreadyExists,
    ApiError,
    ChecksumMismatch,
    ClientError,
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
    "WaitTimeout",
    "JobFailed",
    "NoExports",
    "ChecksumMismatch",
    "LogsUnavailable",
]
