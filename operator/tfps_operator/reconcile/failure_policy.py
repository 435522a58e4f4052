"""What a failed replica means for the job: one rule, used by the operator and by `tfps run`.

ParameterServerStrategy tolerates losing a worker (the coordinator reschedules its closures and
reconnects when it comes back), so a failed worker is recreated alone. A failed chief or PS loses
the training cluster's state: the whole job restarts from the latest checkpoint, counted against
``runPolicy.backoffLimit``. The evaluator sits outside the training cluster and is recreated alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..api.models import Role

Action = Literal["recreate_pod", "restart_job", "fail_job"]

RETRYABLE_EXIT_CODE_MIN = 128
"""With restartPolicy ExitCode, codes ≥ 128 (killed by a signal: OOM, preemption) are retryable."""


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    message: str


def on_failure(
    role: Role,
    restart_policy: Literal["OnFailure", "Never", "ExitCode"],
    exit_code: int | None,
    restarts: int,
    backoff_limit: int,
) -> Decision:
    """Decide what to do about one failed (or vanished: ``exit_code is None``) replica.

    ``restarts`` is the number of whole-job restarts already done.
    """
    code = "unknown" if exit_code is None else str(exit_code)
    if restart_policy == "Never":
        return Decision("fail_job", "ReplicaFailed", f"{role} failed (exit code {code}) and its restartPolicy is Never")
    if restart_policy == "ExitCode" and exit_code is not None and 0 < exit_code < RETRYABLE_EXIT_CODE_MIN:
        return Decision(
            "fail_job", "ReplicaFailed",
            f"{role} failed with permanent exit code {code} (restartPolicy ExitCode retries only codes ≥ {RETRYABLE_EXIT_CODE_MIN})",
        )
    if role in ("worker", "evaluator"):
        return Decision("recreate_pod", f"{role.capitalize()}Restarted", f"{role} failed (exit code {code}); recreating it")
    if restarts >= backoff_limit:
        return Decision(
            "fail_job", "BackoffLimitExceeded",
            f"{role} failed (exit code {code}) after {restarts} job restart(s); backoffLimit is {backoff_limit}",
        )
    return Decision(
        "restart_job", "JobRestarting",
        f"{role} failed (exit code {code}); restarting the job from the latest checkpoint ({restarts + 1}/{backoff_limit})",
    )
