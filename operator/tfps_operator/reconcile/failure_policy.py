"""What a failed replica means for the job: one rule, used by the operator and by `tfps run`.

The exit code's kind comes from the trainer's table (:mod:`tfps_wire.exitcodes`):

* ``permanent`` (bad arguments, invalid model, numerics): the job fails at once under every policy;
  a restart would repeat the failure.
* ``retryable`` (lost PS, preempted, infrastructure, killed by a signal, vanished) and ``unknown``
  (an unexpected error): ``OnFailure`` retries both; ``ExitCode`` retries only ``retryable``;
  ``Never`` retries nothing.

Retrying: the job's strategy (:mod:`..strategies`) says which roles are recreated alone (``alone``): a
ParameterServer job's workers (the coordinator reschedules their closures) and every job's evaluator (outside
the training cluster), each at most ``recreateLimit`` times. Any other failure loses the training cluster's
state (a chief or PS; any worker of an all-reduce job): the whole job restarts from the latest checkpoint,
counted against ``runPolicy.backoffLimit`` unless the stop was a preemption (a graceful exit code, or a pod
that vanished), which is no fault of the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tfps_wire import exitcodes

from ..api.models import Role

Action = Literal["recreate_pod", "restart_job", "fail_job"]


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    message: str
    counted: bool = True
    """For ``restart_job``: the restart counts against backoffLimit (False for a preemption)."""


def on_failure(
    role: Role,
    restart_policy: Literal["OnFailure", "Never", "ExitCode"],
    exit_code: int | None,
    restarts: int,
    backoff_limit: int,
    recreations: int = 0,
    recreate_limit: int | None = None,
    detail: str = "",
    *,
    alone: bool,
) -> Decision:
    """Decide what to do about one failed (or vanished: ``exit_code is None``) replica.

    ``restarts`` is the number of whole-job restarts already counted against ``backoff_limit``;
    ``recreations`` the times this replica type was already recreated alone; ``alone``: the strategy
    recreates a failed pod of this role by itself rather than restarting the job. ``detail`` (the pod's
    termination message: the reason and the traceback's tail) is appended to a failure's message.
    """
    what = f"{role} failed ({exitcodes.describe(exit_code)})"
    if exit_code is None:
        what = f"{role} vanished"
    tail = f": {detail}" if detail else ""
    kind = exitcodes.kind(exit_code)
    if kind == "permanent":
        return Decision(
            "fail_job",
            exitcodes.BY_CODE[exit_code].name if exit_code in exitcodes.BY_CODE else "ReplicaFailed",
            f"{what}; a permanent error, not retried{tail}",
        )
    if restart_policy == "Never":
        return Decision("fail_job", "ReplicaFailed", f"{what} and its restartPolicy is Never{tail}")
    if restart_policy == "ExitCode" and kind != "retryable":
        return Decision(
            "fail_job", "ReplicaFailed", f"{what}; restartPolicy ExitCode retries only retryable exit codes{tail}"
        )
    if alone:
        if recreate_limit is not None and recreations >= recreate_limit:
            return Decision(
                "fail_job",
                "RecreateLimitExceeded",
                f"{what} after {recreations} recreation(s); recreateLimit is {recreate_limit}{tail}",
            )
        return Decision("recreate_pod", f"{role.capitalize()}Restarted", f"{what}; recreating it")
    if exitcodes.preempted(exit_code):
        return Decision(
            "restart_job",
            "JobPreempted",
            f"{what}; restarting the job from the latest checkpoint (a preemption: not counted against backoffLimit)",
            counted=False,
        )
    if restarts >= backoff_limit:
        return Decision(
            "fail_job",
            "BackoffLimitExceeded",
            f"{what} after {restarts} job restart(s); backoffLimit is {backoff_limit}{tail}",
        )
    return Decision(
        "restart_job",
        "JobRestarting",
        f"{what}; restarting the job from the latest checkpoint ({restarts + 1}/{backoff_limit})",
    )
