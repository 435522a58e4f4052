"""TF_CONFIG for every role: the one builder used by the operator and by `tfps run`.

The training cluster is chief + ps + worker. The evaluator is NOT part of it (with it, the
ParameterServerStrategy coordinator waits for it and hangs: kubeflow/training-operator#1213,
tensorflow/tensorflow#46169); it gets a cluster of its own with just itself. The tf.data service's
dispatcher and data workers are not part of it either: each gets a cluster of its own role's addresses
(where its server listens); the training processes find the dispatcher in the job settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..api.models import DATA_SERVICE_ROLES, Role

TRAINING_ROLES: tuple[Role, ...] = ("chief", "ps", "worker")

AddressFn = Callable[[Role, int], str]
"""Maps (role, index) to ``host:port``."""


def cluster_spec(counts: dict[Role, int], address: AddressFn) -> dict[str, list[str]]:
    """The training cluster: every chief, ps and worker address, in index order."""
    return {
        role: [address(role, i) for i in range(counts.get(role, 0))]
        for role in TRAINING_ROLES
        if counts.get(role, 0) > 0
    }


def tf_config(counts: dict[Role, int], address: AddressFn, role: Role, index: int) -> dict[str, Any]:
    """TF_CONFIG (as a dict) for task ``role``/``index``."""
    if index < 0 or index >= counts.get(role, 0):
        raise ValueError(f"{role} index {index} out of range (replicas: {counts.get(role, 0)})")
    if role == "evaluator":
        return {
            "cluster": {"evaluator": [address("evaluator", index)]},
            "task": {"type": "evaluator", "index": index},
        }
    if role in DATA_SERVICE_ROLES:  # the tf.data service: its own servers, never in the training cluster
        return {
            "cluster": {role: [address(role, i) for i in range(counts[role])]},
            "task": {"type": role, "index": index},
        }
    return {"cluster": cluster_spec(counts, address), "task": {"type": role, "index": index}}


def tf_config_json(counts: dict[Role, int], address: AddressFn, role: Role, index: int) -> str:
    return json.dumps(tf_config(counts, address, role, index), sort_keys=True, separators=(",", ":"))
