"""The model contract: what a user's model module provides, loaded and checked.

A model module (``spec.model.module``, e.g. ``tfps_trainer.examples.linear``) defines:

Required
    ``build_model(args: dict) -> keras.Model``
        Builds the model. Called inside ``strategy.scope()`` on the chief, so variables land on the PS.
    ``dataset(input_context: tf.distribute.InputContext | None, batch_size: int, args: dict) -> tf.data.Dataset``
        Per-worker dataset of ``(features, labels)`` batches of ``batch_size``; should repeat forever.
        ``input_context`` is None outside distributed training (export calibration, verification).
    ``loss(labels, predictions) -> tf.Tensor``
        Per-example losses, shape ``[batch]``; the trainer averages them.
    ``optimizer(args: dict) -> keras.optimizers.Optimizer``
    ``input_signature(args: dict) -> dict[str, tf.TensorSpec]``
        The serving inputs, with a ``None`` batch dimension. Keys are the SavedModel/ONNX/TFLite input
        names; the model is called with a dict of these tensors (or, with one key, the tensor alone).

Optional
    ``custom_objects() -> dict[str, Any]``  Keras custom layers/functions needed to rebuild the model.
    ``sample_inputs(n: int, args: dict) -> dict[str, np.ndarray]``  Real inputs for verification and
        int8 calibration; default: the first ``n`` examples of ``dataset(None, n, args)``.
    ``metrics(labels, predictions) -> dict[str, tf.Tensor]``  Extra scalar metrics for the evaluator.
    ``eval_dataset(batch_size: int, args: dict) -> tf.data.Dataset``  The evaluator's data; default:
        ``dataset(None, batch_size, args)``.

Checkpoints hold ``tf.train.Checkpoint(model=..., optimizer=..., step=...)``; the exporter restores
``model`` only (``expect_partial``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

REQUIRED = ("build_model", "dataset", "loss", "optimizer", "input_signature")
OPTIONAL = ("custom_objects", "sample_inputs", "metrics", "eval_dataset")


class ContractError(ValueError):
    """The model module cannot be imported or does not satisfy the contract."""


@dataclass(frozen=True)
class ModelContract:
    """A loaded model module with its functions checked to exist."""

    module_name: str
    module: ModuleType

    def fn(self, name: str) -> Callable[..., Any] | None:
        return getattr(self.module, name, None)

    @property
    def build_model(self) -> Callable[..., Any]:
        return self.module.build_model

    @property
    def dataset(self) -> Callable[..., Any]:
        return self.module.dataset

    @property
    def loss(self) -> Callable[..., Any]:
        return self.module.loss

    @property
    def optimizer(self) -> Callable[..., Any]:
        return self.module.optimizer

    @property
    def input_signature(self) -> Callable[..., Any]:
        return self.module.input_signature

    def custom_objects(self) -> dict[str, Any]:
        fn = self.fn("custom_objects")
        return dict(fn()) if fn else {}


def load(module_name: str) -> ModelContract:
    """Import ``module_name`` and check it provides every required function.

    Raises :class:`ContractError` with a one-line reason naming the module and what is wrong.
    """
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ContractError(f"model module {module_name!r} is not a valid dotted Python module name")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ContractError(f"model module {module_name!r} cannot be imported: {exc}") from None
    except Exception as exc:
        raise ContractError(f"model module {module_name!r} raised {type(exc).__name__} on import: {exc}") from exc
    missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
    if missing:
        raise ContractError(f"model module {module_name!r} is missing required function(s): {', '.join(missing)}")
    for name in REQUIRED + OPTIONAL:
        fn = getattr(module, name, None)
        if fn is not None and not callable(fn):
            raise ContractError(f"model module {module_name!r}: {name} must be a function, got {type(fn).__name__}")
    _check_arity(module_name, module)
    return ModelContract(module_name=module_name, module=module)


_ARITY = {"build_model": 1, "dataset": 3, "loss": 2, "optimizer": 1, "input_signature": 1}


def _check_arity(module_name: str, module: ModuleType) -> None:
    for name, count in _ARITY.items():
        try:
            sig = inspect.signature(getattr(module, name))
        except (TypeError, ValueError):
            continue
        try:
            sig.bind(*([None] * count))
        except TypeError:
            raise ContractError(
                f"model module {module_name!r}: {name}{sig} must accept {count} positional argument(s)"
            ) from None
