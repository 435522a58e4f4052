"""Reading a job: the one loader of ``tfps run``, ``tfps check``, ``tfps submit`` and the Python client.

A job file holds exactly one PSTrainingJob document (documents of other kinds are left alone, so a file that
also carries its Namespace or ConfigMap still loads); a dict or a model works as well. Command-line
overrides are applied before the check, and the check is the API server's rules (``tfps validate``'s
messages), so an override cannot produce a job the API server would refuse. Every refusal is an
:class:`~.client.errors.InvalidJob` naming the file and each field with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..api.models import PSTrainingJob
from ..api.validate import FieldError, JobValidationError, validate_job
from .client.errors import InvalidJob


def load_job(
    source: str | Path | dict[str, Any] | PSTrainingJob,
    *,
    steps: int | None = None,
    no_export: bool = False,
    storage: str | None = None,
) -> PSTrainingJob:
    """The job in ``source`` with the overrides (``steps``: ``spec.training.steps``; ``no_export``: export
    off; ``storage``: a URI replacing ``spec.storage``), checked. Raises :class:`InvalidJob`."""
    where = None
    if isinstance(source, PSTrainingJob):
        doc: Any = source.to_wire()
    elif isinstance(source, dict):
        doc = source
    else:
        where = str(source)
        doc = _one_document(Path(source))
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if isinstance(spec, dict) and (steps is not None or no_export or storage is not None):
        doc = {**doc, "spec": spec}
        if steps is not None and isinstance(spec.get("training"), dict):
            spec["training"] = {**spec["training"], "steps": steps}
        if storage is not None:
            spec["storage"] = {"uri": storage}
        if no_export:
            export = spec.get("export")
            spec["export"] = {**export, "enabled": False} if isinstance(export, dict) else {"enabled": False}
    try:
        return validate_job(doc)
    except JobValidationError as exc:
        raise (InvalidJob(exc.errors, source=where) if where else InvalidJob(exc.errors)) from None


def _one_document(path: Path) -> Any:
    def refuse(message: str) -> InvalidJob:
        return InvalidJob([FieldError("", message)], source=str(path))

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise refuse(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise refuse(f"{path}: not valid YAML: {exc}") from None
    jobs = [d for d in docs if not isinstance(d, dict) or d.get("kind") in (None, "PSTrainingJob")]
    if not jobs:
        raise refuse(f"{path}: no PSTrainingJob document found")
    if len(jobs) > 1:
        raise refuse(f"{path}: expected exactly one PSTrainingJob document, found {len(jobs)}")
    if not isinstance(jobs[0], dict):
        raise refuse(f"{path}: expected a PSTrainingJob mapping, got {type(jobs[0]).__name__}")
    return jobs[0]


def companion_documents(path: str | Path) -> list[dict[str, Any]]:
    """The job file's documents other than the PSTrainingJob (ConfigMaps and Secrets its volumes name, for
    ``tfps run``); the file was read by :func:`load_job` first, so it parses."""
    docs = yaml.safe_load_all(Path(path).read_text(encoding="utf-8"))
    return [d for d in docs if isinstance(d, dict) and d.get("kind") not in (None, "PSTrainingJob")]


def refusal_text(exc: InvalidJob) -> str:
    """The refusal for a terminal: the file's own problem on one line, or each field and its reason."""
    if all(not e.path for e in exc.errors):
        return "; ".join(e.message for e in exc.errors)
    return f"{exc.source}: invalid PSTrainingJob:\n" + "\n".join(f"  {e}" for e in exc.errors)
