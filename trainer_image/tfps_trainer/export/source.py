"""What gets exported: the checkpoint to use, the restored model, and real input samples."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from tfps_wire.export_result import ExportError
from tfps_wire.job_settings import JobSettings
from tfps_wire.safepaths import inside
from tfps_wire.uri import is_uri, join

from ..contract import ContractError, ModelContract, load
from .errors import error_line

_CKPT = re.compile(r"^ckpt-(\d+)$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"


@dataclass(frozen=True)
class CheckpointRef:
    prefix: Path | str  # absolute checkpoint prefix (…/checkpoints/ckpt-N): a path, or a gs:// URI
    rel: str  # the prefix relative to the job root
    step: int


def program_mode(settings: JobSettings) -> bool:
    """Script mode without a contract module: the export takes the model the program saved."""
    return settings.script is not None and settings.model_module is None


def load_contract(settings: JobSettings) -> ModelContract:
    if program_mode(settings):
        from . import program

        return program.contract(settings)
    try:
        return load(settings.model_module or "")
    except ContractError as exc:
        raise ExportError("ContractError", str(exc)) from None


def find_checkpoint(settings: JobSettings, checkpoint: str | None, step: int | None) -> CheckpointRef:
    """``checkpoint``: None/'latest', a prefix, or a directory (its latest); relative = to the job root."""
    if is_uri(settings.paths.root):
        return _find_in_object_storage(settings.paths.root, checkpoint, step)
    root = Path(settings.paths.root)
    ckpt_dir = inside(root, "checkpoints", "checkpoint directory")
    if step is not None:
        prefix = inside(root, ckpt_dir / f"ckpt-{step}", "--step checkpoint")
    elif checkpoint in (None, "", "latest"):
        prefix = _latest(ckpt_dir)
    else:
        given = inside(root, checkpoint, "--checkpoint")
        prefix = _latest(given) if given.is_dir() else given
    prefix = inside(root, prefix, "checkpoint")
    for f in [Path(f"{prefix}.index"), *prefix.parent.glob(f"{prefix.name}.data-*")]:
        if f.is_symlink():
            raise ExportError("UnsafePath", f"checkpoint file {f} is a symlink; refusing to follow it")
    if not Path(f"{prefix}.index").is_file():
        raise ExportError("CheckpointNotFound", f"checkpoint {prefix} not found (no {prefix.name}.index)")
    rel = str(prefix.relative_to(Path(inside(root, ".", "job root"))))
    return CheckpointRef(prefix=prefix, rel=rel, step=_step_of(prefix))


def _find_in_object_storage(root: str, checkpoint: str | None, step: int | None) -> CheckpointRef:
    """:func:`find_checkpoint` under a ``gs://`` root: no symlinks exist there, and every name is taken
    relative to the root (``..`` refused), so nothing outside the job's prefix is read."""
    if (
        checkpoint is not None
        and checkpoint not in ("", "latest")
        and (".." in checkpoint.split("/") or is_uri(checkpoint))
    ):
        raise ExportError("UnsafePath", f"--checkpoint {checkpoint!r}: must be a path relative to the job root")
    ckpt_dir = join(root, "checkpoints")
    if step is not None:
        rel = f"checkpoints/ckpt-{step}"
    elif checkpoint in (None, "", "latest"):
        if not tf.io.gfile.isdir(ckpt_dir):
            raise ExportError("CheckpointNotFound", f"checkpoint directory {ckpt_dir} does not exist")
        found = tf.train.latest_checkpoint(ckpt_dir)
        if not found:
            raise ExportError("CheckpointNotFound", f"no checkpoint in {ckpt_dir}")
        rel = f"checkpoints/{found.rsplit('/', 1)[-1]}"
    else:
        given = join(root, checkpoint)
        rel = checkpoint.strip("/")
        if tf.io.gfile.isdir(given) and not tf.io.gfile.exists(given + ".index"):
            found = tf.train.latest_checkpoint(given)
            if not found:
                raise ExportError("CheckpointNotFound", f"no checkpoint in {given}")
            rel = f"{rel}/{found.rsplit('/', 1)[-1]}"
    prefix = join(root, rel)
    if not tf.io.gfile.exists(prefix + ".index"):
        raise ExportError("CheckpointNotFound", f"checkpoint {prefix} not found (no {rel.rsplit('/', 1)[-1]}.index)")
    return CheckpointRef(prefix=prefix, rel=rel, step=_step_of(prefix))


def _latest(directory: Path) -> Path:
    if not directory.is_dir():
        raise ExportError("CheckpointNotFound", f"checkpoint directory {directory} does not exist")
    found = tf.train.latest_checkpoint(str(directory))
    if not found:
        raise ExportError("CheckpointNotFound", f"no checkpoint in {directory}")
    return directory / Path(found).name  # the state file may hold paths from another mount point


def _step_of(prefix: Path | str) -> int:
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        if reader.has_tensor(STEP_KEY):
            return int(reader.get_tensor(STEP_KEY))
    except Exception as exc:
        raise ExportError("CheckpointCorrupt", f"checkpoint {prefix} cannot be read: {error_line(exc)}") from None
    m = _CKPT.match(str(prefix).rsplit("/", 1)[-1])
    if not m:
        raise ExportError("CheckpointCorrupt", f"checkpoint {prefix} has no 'step' variable and no ckpt-N name")
    return int(m.group(1))


def input_signature(contract: ModelContract, args: dict[str, Any]) -> dict[str, tf.TensorSpec]:
    """The contract's serving inputs, checked: identifier names, TensorSpecs, a None batch dimension."""
    try:
        sig = contract.input_signature(args)
    except Exception as exc:
        raise ExportError("ContractError", f"{contract.module_name}.input_signature raised {error_line(exc)}") from None
    if not isinstance(sig, dict) or not sig:
        raise ExportError("ContractError", f"{contract.module_name}.input_signature must return a non-empty dict")
    out = {}
    for name, spec in sig.items():
        where = f"{contract.module_name}.input_signature[{name!r}]"
        if not isinstance(name, str) or not _NAME.match(name):
            raise ExportError("ContractError", f"{where}: input names must be identifiers ([A-Za-z_][A-Za-z0-9_]*)")
        if not isinstance(spec, tf.TensorSpec):
            raise ExportError("ContractError", f"{where}: must be a tf.TensorSpec, got {type(spec).__name__}")
        if spec.shape.rank is None or spec.shape.rank < 1 or spec.shape[0] is not None:
            raise ExportError("ContractError", f"{where}: shape {spec.shape} must have a None batch dimension")
        out[name] = tf.TensorSpec(spec.shape, spec.dtype, name=name)
    return out


def call_with_dict(contract: ModelContract, args: dict[str, Any], sig: dict[str, tf.TensorSpec]) -> bool:
    """How the model is called: with the dict of inputs, or (one input, non-dict dataset) the tensor."""
    if len(sig) > 1:
        return True
    try:
        features = contract.dataset(None, 1, args).element_spec[0]
    except Exception:
        return False
    return isinstance(features, dict)


@dataclass
class Samples:
    """Real inputs (and, from the dataset, their labels) that every artifact is run on."""

    inputs: dict[str, np.ndarray]
    labels: Any = None
    """The dataset's labels for these inputs (an array, or a dict by output name); None from ``sample_inputs``."""
    origin: str = "dataset"
    """``sample_inputs`` or ``dataset``: where the inputs came from (recorded in the manifest)."""


def samples(
    contract: ModelContract,
    args: dict[str, Any],
    sig: dict[str, tf.TensorSpec],
    n: int,
    *,
    skip: int = 0,
    prefer_sample_fn: bool = True,
) -> Samples:
    """``n`` real inputs: the contract's ``sample_inputs`` or examples ``skip..skip+n`` of its dataset."""
    fn = contract.fn("sample_inputs") if prefer_sample_fn else None
    labels = None
    try:
        if fn is not None:
            raw = fn(n, args)
        else:
            raw, labels = _from_dataset(contract, args, sig, n, skip)
    except ExportError:
        raise
    except Exception as exc:
        src = "sample_inputs" if fn is not None else "dataset"
        raise ExportError("ContractError", f"{contract.module_name}.{src} raised {error_line(exc)}") from None
    if not isinstance(raw, dict):
        if len(sig) != 1:
            raise ExportError("ContractError", f"{contract.module_name}: samples must be a dict keyed by {list(sig)}")
        raw = {next(iter(sig)): raw}
    out = {}
    for name, spec in sig.items():
        if name not in raw:
            raise ExportError("ContractError", f"{contract.module_name}: samples lack input {name!r}")
        arr = np.asarray(raw[name])[:n]
        arr = arr.astype(object) if spec.dtype == tf.string else arr.astype(spec.dtype.as_numpy_dtype)
        if not spec.shape.is_compatible_with(arr.shape):
            raise ExportError(
                "ContractError",
                f"{contract.module_name}: sample input {name!r} has shape {arr.shape}, signature {spec.shape}",
            )
        out[name] = arr
    if any(len(v) < n for v in out.values()):
        raise ExportError("ContractError", f"{contract.module_name}: fewer than {n} samples available")
    origin = getattr(contract.module, "SAMPLES_ORIGIN", None) or ("sample_inputs" if fn is not None else "dataset")
    return Samples(out, labels, origin)


def _from_dataset(
    contract: ModelContract, args: dict[str, Any], sig: dict[str, tf.TensorSpec], n: int, skip: int
) -> tuple[dict[str, np.ndarray], Any]:
    ds = contract.dataset(None, n, args)
    got: dict[str, list[np.ndarray]] = {}
    labels: list[Any] = []
    count = 0
    for element in ds.unbatch().skip(skip).batch(n).take(1):
        features = element[0] if isinstance(element, tuple) else element
        if isinstance(element, tuple) and len(element) > 1:
            labels.append(tf.nest.map_structure(lambda t: t.numpy(), element[1]))
        if not isinstance(features, dict):
            features = {next(iter(sig)): features}
        for k, v in features.items():
            got.setdefault(k, []).append(v.numpy())
        count = len(next(iter(features.values())))
    if count < n:
        raise ExportError("ContractError", f"{contract.module_name}.dataset yielded {count} examples, need {n}")
    return {k: np.concatenate(v) for k, v in got.items()}, (labels[0] if labels else None)


def labels_by_output(labels: Any, output_names: list[str]) -> dict[str, np.ndarray]:
    """The dataset's labels matched to the serving outputs: one array for a one-output model, or a dict
    whose keys are output names. Anything else (unmatched structures) gives no labels."""
    if labels is None:
        return {}
    if isinstance(labels, dict):
        return {k: np.asarray(v) for k, v in labels.items() if k in output_names}
    if isinstance(labels, (list, tuple)):
        return {n: np.asarray(v) for n, v in zip(output_names, labels)} if len(labels) == len(output_names) else {}
    return {output_names[0]: np.asarray(labels)} if len(output_names) == 1 else {}


def build_model(contract: ModelContract, args: dict[str, Any], sample: dict[str, np.ndarray], as_dict: bool) -> Any:
    """The contract's model with fresh weights, its variables created by one call on ``sample``."""
    import keras

    try:
        with keras.saving.custom_object_scope(contract.custom_objects()):
            model = contract.build_model(args)
            model(sample if as_dict else next(iter(sample.values())), training=False)
    except Exception as exc:
        raise ExportError("ContractError", f"{contract.module_name}.build_model failed: {error_line(exc)}") from None
    return model


def build_and_restore(
    contract: ModelContract, args: dict[str, Any], ckpt: CheckpointRef, sample: dict[str, np.ndarray], as_dict: bool
) -> Any:
    """Build the contract's model, create its variables, restore ``model`` from the checkpoint."""
    model = build_model(contract, args, sample, as_dict)
    try:
        status = tf.train.Checkpoint(model=model).restore(str(ckpt.prefix))
        status.expect_partial()
        status.assert_existing_objects_matched()
    except Exception as exc:
        raise ExportError(
            "CheckpointCorrupt",
            f"checkpoint {ckpt.rel} cannot be restored into {contract.module_name}: {error_line(exc)}",
        ) from None
    for var in model.weights:
        value = tf.convert_to_tensor(var)
        # counted in TensorFlow: a numpy copy would hold a second copy of a large table
        if value.dtype.is_floating and not bool(tf.reduce_all(tf.math.is_finite(value))):
            bad = int(tf.size(value)) - int(tf.math.count_nonzero(tf.math.is_finite(value)))
            raise ExportError(
                "CheckpointCorrupt",
                f"checkpoint {ckpt.rel}: variable {getattr(var, 'path', var.name)} has {bad} NaN/Inf value(s)",
            )
    return model
