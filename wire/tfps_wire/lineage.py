"""What produced an exported model: the lineage the operator (or ``tfps run``) hands the exporter, and the
``lineage`` section the exporter writes into ``manifest.json`` (:mod:`.export_manifest`).

Transport: the JSON form of :class:`Lineage` in the export process's environment variable ``TFPS_LINEAGE``
(:data:`LINEAGE_ENV`). The exporter holds no API credentials, so what only the API server knows comes
this way: the job's spec and its hash, the trainer image as the lead's pod status names it
(``containerStatuses[].imageID``, the digest the node resolved), and the end of training as the chief
reported it (step, loss, rate; ``status.progress``) with its final checkpoint. The exporter adds what it
sees itself: the code it was given (``spec.model.source``, mounted; :func:`code_digest`), the checkpoint it
restored and the library versions (the manifest's ``checkpoint`` and ``versions``).

The manifest's section (:func:`manifest_section`)::

    lineage:
      producer:  operator | tfps run | null (no TFPS_LINEAGE: the exporter run by hand)
      spec:      {sha256, value | omitted}   sha256 of the spec's canonical JSON (:func:`spec_sha256`)
      image:     {image, imageID, digest, pod} | null   digest null when the pod status had none
      code:      {configMap, sha256, files, bytes} | null   spec.model.source's files as the exporter read them
      training:  {step, targetSteps, finalCheckpoint, loss, stepsPerSecond, reportedStep, reportedAt} | null

TF-free and Kubernetes-free: the operator, ``tfps run`` and the exporter import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .job_settings import from_json_env

LINEAGE_ENV = "TFPS_LINEAGE"
"""Environment variable of the export process carrying the JSON-encoded :class:`Lineage`."""

MAX_SPEC_BYTES = 32 * 1024
"""A spec whose canonical JSON is larger travels as its hash alone (``omitted`` says so): the variable is
one of a container's environment strings, which Linux caps at 128 KiB each."""

_DIGEST = re.compile(r"(sha256:[0-9a-f]{64})$")


class _Wire(BaseModel):
    # extra="ignore": an exporter of another version than the operator reads what it knows
    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel, populate_by_name=True)


class ImageRef(_Wire):
    """The trainer image as a pod's status names it."""

    image: str
    """``containerStatuses[].image``: the image the container ran, as the node names it."""
    image_id: str
    """``containerStatuses[].imageID``: the image's content address the node resolved, e.g.
    ``docker.io/library/tfps@sha256:...``."""
    pod: str
    """The pod it was read from (the lead whose success ended training)."""

    @property
    def digest(self) -> str | None:
        return image_digest(self.image_id)


class TrainingOutcome(_Wire):
    """The end of training as the operator saw it: the final checkpoint (the lead's success summary) and the
    chief's last progress report (``status.progress``: its loss and rate, at its own step)."""

    step: int | None = Field(default=None, ge=0)
    """The step of the final checkpoint."""
    target_steps: int | None = Field(default=None, ge=0)
    final_checkpoint: str | None = None
    loss: float | None = None
    steps_per_second: float | None = None
    reported_step: int | None = Field(default=None, ge=0)
    """The step of the last progress report that ``loss`` and ``steps_per_second`` come from."""
    reported_at: str | None = None
    """When the chief made that report (ISO 8601)."""


class Lineage(_Wire):
    """What the exporter is told about the job that trained the model."""

    producer: Literal["operator", "tfps run"]
    spec_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    spec: dict[str, Any] | None = None
    """The spec itself; None when larger than :data:`MAX_SPEC_BYTES` (``spec_omitted`` says so)."""
    spec_omitted: str | None = None
    image: ImageRef | None = None
    """None where no pod status names one (``tfps run``, or a pod status without ``imageID``)."""
    training: TrainingOutcome | None = None
    code_source: str | None = None
    """The ConfigMap of ``spec.model.source``, when the code came from one."""

    def to_env(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Lineage | None:
        """``TFPS_LINEAGE`` read; None when it is not set. Raises :class:`SettingsError` naming the field."""
        raw = (os.environ if environ is None else environ).get(LINEAGE_ENV)
        if not raw:
            return None
        return from_json_env(cls, LINEAGE_ENV, raw)


def canonical_json(value: Any) -> bytes:
    """The form that is hashed: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def spec_sha256(spec: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the spec's canonical JSON: ``manifest.lineage.spec.value`` hashes to it."""
    return hashlib.sha256(canonical_json(spec)).hexdigest()


def of_spec(
    spec: Mapping[str, Any],
    producer: Literal["operator", "tfps run"],
    image: ImageRef | None = None,
    training: TrainingOutcome | None = None,
    code_source: str | None = None,
) -> Lineage:
    """The lineage of a job with ``spec`` (its JSON form), the spec itself kept when small enough."""
    size = len(canonical_json(spec))
    small = size <= MAX_SPEC_BYTES
    return Lineage(
        producer=producer,
        spec_sha256=spec_sha256(spec),
        spec=dict(spec) if small else None,
        spec_omitted=None if small else f"{size} bytes, over {MAX_SPEC_BYTES}: only its hash is recorded",
        image=image,
        training=training,
        code_source=code_source,
    )


def image_digest(image_id: str) -> str | None:
    """The ``sha256:<hex>`` an ``imageID`` ends with; None when it names no digest."""
    m = _DIGEST.search(image_id or "")
    return m.group(1) if m else None


_SKIPPED_DIRS = ("__pycache__",)
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def code_digest(directory: str | Path) -> dict[str, Any]:
    """``{sha256, files, bytes}`` of the code under ``directory``: ``sha256`` hashes the text
    ``"<sha256 of file>  <relative path>\\n"`` of every file sorted by path (the manifest's rule for a
    directory artifact). A ConfigMap volume's own entries (names starting with ``..``: kubelet's
    timestamped directory and its ``..data`` link) are skipped and the per-key links followed, so the
    mounted ConfigMap hashes as the files it holds; ``__pycache__`` and ``*.pyc`` are skipped too."""
    root = Path(directory)
    files: list[tuple[str, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("..") and d not in _SKIPPED_DIRS)
        for name in filenames:
            if name.startswith("..") or name.endswith(_SKIPPED_SUFFIXES):
                continue
            path = Path(dirpath) / name
            data = path.read_bytes()
            files.append((path.relative_to(root).as_posix(), hashlib.sha256(data).hexdigest(), len(data)))
    files.sort()
    listing = "".join(f"{sha}  {rel}\n" for rel, sha, _ in files)
    return {
        "sha256": hashlib.sha256(listing.encode()).hexdigest(),
        "files": len(files),
        "bytes": sum(n for _, _, n in files),
    }


def manifest_section(lineage: Lineage | None, code: Mapping[str, Any] | None) -> dict[str, Any]:
    """The manifest's ``lineage`` (module docstring); ``code`` from :func:`code_digest`, None without code."""
    spec: dict[str, Any] | None = None
    if lineage is not None:
        spec = {"sha256": lineage.spec_sha256}
        spec.update({"value": lineage.spec} if lineage.spec is not None else {"omitted": lineage.spec_omitted})
    image = None
    if lineage is not None and lineage.image is not None:
        image = {**lineage.image.model_dump(by_alias=True), "digest": lineage.image.digest}
    training = lineage.training.model_dump(by_alias=True) if lineage and lineage.training else None
    return {
        "producer": lineage.producer if lineage else None,
        "spec": spec,
        "image": image,
        "code": {"configMap": lineage.code_source if lineage else None, **code} if code is not None else None,
        "training": training,
    }
