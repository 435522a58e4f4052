"""Calling a user's model module: every failure becomes a one-line contract error (exit 3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from . import optimizers
from .contract import ModelContract
from .errors import ContractFailure


def call(contract: ModelContract, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` (the contract function ``name``); wrap any exception as :class:`ContractFailure`."""
    try:
        return fn(*args)
    except Exception as exc:
        raise ContractFailure(
            f"model module {contract.module_name!r}: {name}() raised {type(exc).__name__}: {exc}"
        ) from exc


def build(contract: ModelContract, args: dict) -> Any:
    """``build_model(args)``, with its variables created (subclassed models are called once)."""
    model = call(contract, "build_model", contract.build_model, args)
    if not callable(model) or not hasattr(model, "trainable_variables"):
        raise ContractFailure(
            f"model module {contract.module_name!r}: build_model() must return a Keras model, "
            f"got {type(model).__name__}"
        )
    if not model.trainable_variables:
        model(sample_batch(contract, args))
    if not model.trainable_variables:
        raise ContractFailure(f"model module {contract.module_name!r}: the model has no trainable variables")
    return model


def sample_batch(contract: ModelContract, args: dict, n: int = 1) -> Any:
    """Zeros matching ``input_signature(args)`` with batch ``n`` (a dict, or the tensor alone for one key)."""
    sig = call(contract, "input_signature", contract.input_signature, args)
    if not isinstance(sig, dict) or not sig or not all(isinstance(s, tf.TensorSpec) for s in sig.values()):
        raise ContractFailure(
            f"model module {contract.module_name!r}: input_signature() must return a non-empty dict of tf.TensorSpec"
        )
    zeros = {k: tf.zeros([n if d is None else d for d in s.shape.as_list()], s.dtype) for k, s in sig.items()}
    return zeros


def make_optimizer(contract: ModelContract, args: dict, variables: list) -> tuple[Any, str]:
    """``optimizer(args)`` with its slots built, sparse where that gives the same result
    (:mod:`.optimizers`); and a line for the log saying how it updates embedding rows."""
    opt = call(contract, "optimizer", contract.optimizer, args)
    if not hasattr(opt, "apply_gradients"):
        raise ContractFailure(
            f"model module {contract.module_name!r}: optimizer() must return a Keras optimizer, "
            f"got {type(opt).__name__}"
        )
    swapped = optimizers.sparse_equivalent(opt)
    if hasattr(opt, "build") and not getattr(opt, "built", False):
        opt.build(variables)  # create slots now, inside the strategy scope (on the PS)
    return opt, optimizers.describe(opt, swapped)
