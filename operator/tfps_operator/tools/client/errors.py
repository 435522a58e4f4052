"""Errors of the Python client, each with the exit code ``tfps`` returns for it.

Exit codes (scripts can branch on them; ``tfps wait`` documents them too):

    0  success              3  the job (or namespace) does not exist
    1  any other error      4  timed out
    2  bad usage or input   5  the job failed (``tfps wait``)
                            6  no export to read      7  a downloaded file does not match manifest.json
"""

from __future__ import annotations

from ...api.validate import FieldError


class ClientError(Exception):
    """Base of every error the client raises; ``exit_code`` is what ``tfps`` exits with."""

    exit_code = 1


class ApiError(ClientError):
    """The API server refused a request; ``message`` is its own explanation."""

    def __init__(self, status: int, reason: str, message: str, what: str):
        super().__init__(f"{what}: {status} {reason}: {message}" if message else f"{what}: {status} {reason}")
        self.status, self.reason, self.message, self.what = status, reason, message, what


class NotFound(ApiError):
    """404: the job, its namespace or a child does not exist."""

    exit_code = 3


class AlreadyExists(ApiError):
    """409 on create: a job of that name exists."""


class InvalidJob(ClientError):
    """A job broke the API's rules: client-side (``errors`` as ``tfps validate`` prints them) or as the
    API server answered (422, ``errors`` from its causes)."""

    exit_code = 2

    def __init__(self, errors: list[FieldError], source: str = "client-side validation"):
        self.errors, self.source = errors, source
        super().__init__("; ".join(map(str, errors)))


class InvalidCode(ClientError):
    """The code directory of a submission cannot be packed (too large for a ConfigMap, empty, unreadable)."""

    exit_code = 2


class WaitTimeout(ClientError):
    """The job did not reach what was waited for in time; ``last`` is the phase it was in."""

    exit_code = 4

    def __init__(self, message: str, last: str | None):
        super().__init__(message)
        self.last = last


class JobFailed(ClientError):
    """The job ended Failed while something else was waited for; the message has the operator's reason."""

    exit_code = 5


class NoExports(ClientError):
    """The job has published no export (yet, or at the step asked for)."""

    exit_code = 6


class ChecksumMismatch(ClientError):
    """A downloaded file differs from what ``manifest.json`` records (size or SHA-256)."""

    exit_code = 7


class LogsUnavailable(ClientError):
    """The API server could not give a container's logs (pod not started, or its kubelet unreachable)."""
