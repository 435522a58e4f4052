"""``manifest.json``: what was exported, from which checkpoint, how it was checked.

Schema (``schema: tfps.dev/export-manifest/v1``; all paths relative, POSIX, no ``..``, but ``directory``)::

    job, namespace, model (module), createdAt (UTC ISO 8601)
    checkpoint: {step, path}                 path relative to the job root; or {step, path: null, directory}:
                                             the checkpoint in the program's own directory (absolute, as its
                                             pods see it; spec.model.directories.checkpoints)
    signature:  {name: "serving_default", inputs: [{name, shape, dtype}], outputs: [{name, shape, dtype, kind}]}
                shape uses null for the (dynamic) batch dimension; kind is classification|regression
                (how quantized artifacts are judged, see verify.py)
    complete:   true when every required format passed (only then does ``exports/latest`` point here)
    required:   the required formats
    samples:    {count, origin: dataset|sample_inputs, labels: whether the dataset's labels were used}
    artifacts:  [{format, path, bytes, sha256, quantization, opset, inputs, outputs, files?,
                  calibrationSamples?, batch?, xnnpack?, notes: [..],
                  verification: {samples, maxAbsError, maxRelError, argmaxAgreement,
                                 tolerance: {maxAbs, maxRel, minArgmaxAgreement}, passed, warnings: [..],
                                 outputs: [{name, kind, maxAbsError, scale, maxRelError, bound,
                                            argmaxAgreement, decisiveSamples, accuracy?, passed,
                                            errorQuantiles?: {p50, p90, p99, max}, problem?, warning?}]}}]
                only artifacts that passed verification; the figures of each output on its own;
                errorQuantiles: the distribution over the inputs of each input's largest |error|.
    failed:     [{format, quantization, reason, message}] the requested artifacts that did not pass
                path relative to the export directory; for a directory artifact (SavedModel)
                ``bytes`` is the sum of its files and ``sha256`` is the SHA-256 of the text
                ``"<sha256 of file>  <relative path>\\n"`` for every file sorted by path (the output
                of ``sha256sum`` run inside it, sorted); ``files`` lists each file.
    versions:   {python, numpy, tensorflow, keras, tf_keras?, tf2onnx, onnx, onnxruntime, ai-edge-litert,
                 protobuf, tfps-operator}: the libraries the export ran with
    lineage:    what produced the model: the job's spec and its hash, the trainer image's digest, the
                code, the end of training (:mod:`tfps_wire.lineage`); with ``checkpoint`` and ``versions``
                above, the whole of it
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .safepaths import check_absolute, check_relative

SCHEMA = "tfps.dev/export-manifest/v1"
_DISTS = (
    "numpy",
    "tensorflow",
    "keras",
    "tf_keras",
    "tf2onnx",
    "onnx",
    "onnxruntime",
    "ai-edge-litert",
    "protobuf",
    "tfps-operator",
)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digest(path: Path) -> tuple[int, str, list[dict[str, Any]] | None]:
    """(bytes, sha256, files) of a file or a directory tree (see the module docstring)."""
    if path.is_file():
        return path.stat().st_size, file_sha256(path), None
    files: list[dict[str, Any]] = []
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            p = Path(dirpath) / name
            files.append({"path": p.relative_to(path).as_posix(), "bytes": p.stat().st_size, "sha256": file_sha256(p)})
    files.sort(key=lambda f: f["path"])
    listing = "".join(f"{f['sha256']}  {f['path']}\n" for f in files)
    return sum(f["bytes"] for f in files), hashlib.sha256(listing.encode()).hexdigest(), files


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in _DISTS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def build(
    *,
    job: str,
    namespace: str,
    model: str,
    checkpoint_step: int,
    checkpoint_path: str | None,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    artifacts: list[dict[str, Any]],
    failed: list[dict[str, Any]] | None = None,
    required: list[str] | None = None,
    complete: bool = True,
    samples: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    lineage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``checkpoint_path`` None: a script-mode program's saved model exported without a checkpoint;
    ``source`` (script mode) says which saved model was exported. Both are relative to the job root (``path``),
    or, for a program's own directory outside it (``spec.model.directories``), absolute as its pods see it
    (``directory``: never read through the manifest, only shown); ``lineage``: the section of
    :func:`tfps_wire.lineage.manifest_section`."""
    checkpoint: dict[str, Any] = {"step": checkpoint_step, "path": None}
    if checkpoint_path is not None and checkpoint_path.startswith("/"):
        checkpoint["directory"] = check_absolute(checkpoint_path, "manifest checkpoint.directory")
    elif checkpoint_path is not None:
        check_relative(checkpoint_path, "manifest checkpoint.path")
        checkpoint["path"] = checkpoint_path
    if source is not None and str(source.get("path", "")).startswith("/"):
        source = {"kind": source["kind"], "directory": check_absolute(source["path"], "manifest source.directory")}
    elif source is not None:
        check_relative(source["path"], "manifest source.path")
    for a in artifacts:
        check_relative(a["path"], f"manifest artifact {a['format']} path")
        for f in a.get("files") or []:
            check_relative(f["path"], f"manifest artifact {a['format']} file")
    return {
        "schema": SCHEMA,
        "job": job,
        "namespace": namespace,
        "model": model,
        "createdAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "checkpoint": checkpoint,
        **({"source": source} if source is not None else {}),
        "signature": {"name": "serving_default", "inputs": inputs, "outputs": outputs},
        "complete": complete,
        "required": required or [],
        "samples": samples or {},
        "artifacts": artifacts,
        "failed": failed or [],
        "versions": versions(),
        **({"lineage": lineage} if lineage is not None else {}),
    }


def write(path: Path, manifest: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
