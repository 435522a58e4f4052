"""TensorFlow settings read from the environment when TensorFlow is imported, chosen per role.

Every role is quiet and fails fast on a dead task. A parameter server also takes its large buffers from the
system allocator (``TF_ONEDNN_USE_SYSTEM_ALLOCATOR=true``). With oneDNN on (TensorFlow's default on x86
Linux), allocations over 256 KiB come from a BFC pool that keeps what it frees, so a PS stays at the peak of
its temporaries: those of Keras' random initial values and of a restore left each PS holding 1.5-2.8 times its
share of the model. With the system allocator a PS holds its share, at the same steps/s (benchmarks/README.md,
"Checkpoint restore and PS memory"). The kernels are unchanged. A value the pod's own env sets wins."""

from __future__ import annotations

from collections.abc import MutableMapping

EVERY_ROLE = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "GRPC_FAIL_FAST": "use_caller",  # PSS: fail fast on a dead task (TF guidance)
}
PARAMETER_SERVER = {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "true"}


def defaults(task_type: str) -> dict[str, str]:
    """The settings a process of ``task_type`` gets unless its environment sets them."""
    return {**EVERY_ROLE, **(PARAMETER_SERVER if task_type == "ps" else {})}


def apply(env: MutableMapping[str, str], task_type: str) -> None:
    """Add :func:`defaults` to ``env`` where it does not set them; call before TensorFlow is imported."""
    for name, value in defaults(task_type).items():
        env.setdefault(name, value)
