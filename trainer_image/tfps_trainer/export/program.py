"""Script mode: the model a program saved to ``$TFPS_MODEL_DIR``, seen as a model contract.

The export pipeline judges artifacts against "the contract's model"; here that model is the one the
program saved (``model.keras``, ``model.h5``, or a Keras SavedModel written by ``model.save(dir)``),
loaded back with its trained weights. Its serving inputs are the model's inputs. Verification inputs
come from ``$TFPS_SAMPLES_FILE`` (``samples.npz`` beside the model: one array per input name) when the
program wrote one, else from the synthetic inputs of :func:`synthetic_inputs`; the manifest records
which (``samples.origin``: ``samples_file`` or ``synthetic``). The exported step is the step of the
program's latest checkpoint (read from the checkpoint), 0 when it wrote none.
"""

from __future__ import annotations

import json
import re
import types
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from tfps_wire.export_result import ExportError
from tfps_wire.job_settings import JobSettings

from ..contract import ModelContract
from ..script.env import KERAS_FILE, SAMPLES_FILE
from ..script.follow import checkpoint_step, latest_prefix
from .errors import error_line

SYNTHETIC_SEED = 0
SYNTHETIC_INT_HIGH = 10
SYNTHETIC_FREE_DIM = 8
"""Synthetic inputs: float inputs standard normal (seed 0), integer inputs uniform in [0, 10), bool
inputs random, string inputs the digits "0".."9"; a non-batch dimension of unknown size is 8."""
_BAD = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class SavedModelRef:
    path: Path
    kind: str  # keras, h5, savedmodel
    rel: str


def find_model(settings: JobSettings) -> SavedModelRef:
    """The model the program saved under the model directory, or ExportError naming what to save."""
    root, model_dir = Path(settings.paths.root), Path(settings.model_dir)
    candidates = [(model_dir / KERAS_FILE, "keras"), (model_dir / "model.h5", "h5"), (model_dir, "savedmodel")]
    for path, kind in candidates:
        if (kind != "savedmodel" and path.is_file()) or (kind == "savedmodel" and (path / "saved_model.pb").is_file()):
            rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
            return SavedModelRef(path, kind, rel)
    own = settings.script is not None and settings.script.directories.saved_model is not None
    where = "spec.model.directories.savedModel" if own else "$TFPS_MODEL_DIR"
    raise ExportError(
        "ContractError",
        (
            f"script mode: the program saved no model in {model_dir} ({where}): save it there with "
            f"model.save(dir) (a SavedModel) or model.save(dir/{KERAS_FILE}), "
            + (
                "or correct spec.model.directories.savedModel"
                if own
                else "or name the directory the program saves to in spec.model.directories.savedModel"
            )
            + ", or name a contract module in spec.model.module for the export"
        ),
    )


def _saved_by(ref: SavedModelRef) -> str | None:
    """``keras3`` or ``legacy``: which Keras wrote a ``.keras`` file (its ``metadata.json``), if it says."""
    if ref.kind != "keras":
        return None
    try:
        with zipfile.ZipFile(ref.path) as z:
            version = str(json.loads(z.read("metadata.json")).get("keras_version", ""))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return "keras3" if version.startswith("3.") else "legacy" if version.startswith("2.") else None


def load_keras_model(ref: SavedModelRef, keras: str = "legacy") -> Any:
    """The saved Keras model with its trained weights: first with the Keras that wrote it (a ``.keras``
    file says), else the one the program ran with (``spec.model.keras``: legacy, tf_keras; keras3,
    Keras 3), then with the other."""
    if ref.kind == "savedmodel" and not (ref.path / "keras_metadata.pb").is_file():
        raise ExportError(
            "ContractError",
            (
                f"{ref.rel}: a SavedModel without Keras metadata (tf.saved_model.save): the export needs a Keras "
                "model: save it with model.save(...), or name a contract module in spec.model.module"
            ),
        )
    errors = []
    loaders = ("keras", "tf_keras") if (_saved_by(ref) or keras) == "keras3" else ("tf_keras", "keras")
    for name in loaders:
        try:
            module = __import__(name)
            return module.models.load_model(str(ref.path), compile=False)
        except Exception as exc:
            errors.append(f"{name}: {error_line(exc)[:300]}")
    raise ExportError("ContractError", f"{ref.rel}: cannot be loaded as a Keras model ({'; '.join(errors)})")


def _signature(model: Any, rel: str) -> tuple[dict[str, tf.TensorSpec], bool]:
    """The model's serving inputs and whether it takes them as a dict."""
    nested = getattr(model, "_nested_inputs", None)
    if nested is None:
        nested = getattr(model, "input", None)
    if isinstance(nested, dict):
        return {k: tf.TensorSpec(v.shape, v.dtype, name=k) for k, v in nested.items()}, True
    inputs = list(getattr(model, "inputs", None) or [])
    if len(inputs) != 1:
        raise ExportError(
            "ContractError",
            (
                f"{rel}: the export needs a model with one input or a dict of named inputs (it has {len(inputs)} "
                "positional inputs): give the inputs names with a dict of keras.Input(name=...)"
            ),
        )
    t = inputs[0]
    name = _BAD.sub("_", str(getattr(t, "name", "input")).split(":")[0]) or "input"
    if not (name[0].isalpha() or name[0] == "_"):
        name = f"input_{name}"
    return {name: tf.TensorSpec(t.shape, t.dtype, name=name)}, False


def synthetic_inputs(sig: dict[str, tf.TensorSpec], n: int) -> dict[str, np.ndarray]:
    """Deterministic inputs of the serving signature (see :data:`SYNTHETIC_FREE_DIM`)."""
    rng = np.random.default_rng(SYNTHETIC_SEED)
    out = {}
    for name, spec in sig.items():
        shape = [n, *[SYNTHETIC_FREE_DIM if d is None else int(d) for d in spec.shape.as_list()[1:]]]
        dt = spec.dtype
        if dt.is_floating:
            out[name] = rng.standard_normal(shape).astype(dt.as_numpy_dtype)
        elif dt.is_integer:
            out[name] = rng.integers(0, SYNTHETIC_INT_HIGH, size=shape).astype(dt.as_numpy_dtype)
        elif dt == tf.bool:
            out[name] = rng.integers(0, 2, size=shape).astype(bool)
        elif dt == tf.string:
            out[name] = rng.integers(0, 10, size=shape).astype(str).astype(object)
        else:
            raise ExportError(
                "ContractError",
                f"input {name!r}: no synthetic input for dtype {dt.name}: write "
                f"{SAMPLES_FILE} ($TFPS_SAMPLES_FILE) with real inputs",
            )
    return out


def _read_samples(path: Path, sig: dict[str, tf.TensorSpec]) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            found = {k: data[k] for k in data.files}
    except Exception as exc:
        raise ExportError(
            "ContractError", f"{path.name} ($TFPS_SAMPLES_FILE) cannot be read: {error_line(exc)}"
        ) from None
    if len(sig) == 1 and len(found) == 1:
        return {next(iter(sig)): next(iter(found.values()))}
    missing = sorted(set(sig) - set(found))
    if missing:
        raise ExportError(
            "ContractError", f"{path.name} ($TFPS_SAMPLES_FILE) lacks input(s) {missing}; it has {sorted(found)}"
        )
    return {k: found[k] for k in sig}


def contract(settings: JobSettings) -> ModelContract:
    """The saved model as a :class:`ModelContract` the export pipeline runs on unchanged."""
    ref = find_model(settings)
    model = load_keras_model(ref, settings.script.keras if settings.script else "legacy")
    sig, as_dict = _signature(model, ref.rel)
    samples_path = Path(settings.paths.model) / SAMPLES_FILE

    def sample_inputs(n: int, _args: dict) -> dict[str, np.ndarray]:
        if samples_path.is_file():
            return _read_samples(samples_path, sig)
        return synthetic_inputs(sig, n)

    def dataset(_ctx: Any, batch_size: int, _args: dict) -> tf.data.Dataset:
        inputs = sample_inputs(max(batch_size, 64), {})
        features = inputs if as_dict else next(iter(inputs.values()))
        return tf.data.Dataset.from_tensor_slices(features).repeat().batch(batch_size)

    def unused(*_a: Any) -> Any:
        raise ExportError("ContractError", "script mode: the export does not train")

    mod = types.ModuleType(f"tfps-program-model:{ref.rel}")
    mod.__dict__.update(
        build_model=lambda _args: model,
        dataset=dataset,
        loss=unused,
        optimizer=unused,
        input_signature=lambda _args: dict(sig),
        sample_inputs=sample_inputs,
        SAMPLES_ORIGIN="samples_file" if samples_path.is_file() else "synthetic",
        SOURCE={"kind": ref.kind, "path": ref.rel},
    )
    return ModelContract(module_name=f"program model {ref.rel}", module=mod)


def exported_step(settings: JobSettings) -> tuple[int, str]:
    """The step of the program's latest checkpoint (read from it) and its path relative to the job
    root (absolute in a directory of the program's own outside it); (0, '') when there is none or it holds
    no step."""
    prefix = latest_prefix(settings.checkpoint_dir)
    if prefix is None:
        return 0, ""
    try:
        found = checkpoint_step(prefix)
    except Exception:
        return 0, ""
    root = Path(settings.paths.root)
    rel = str(Path(prefix).relative_to(root)) if Path(prefix).is_relative_to(root) else prefix
    return (found[0] if found else 0), rel
