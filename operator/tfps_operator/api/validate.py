"""Client-side validation of PSTrainingJobs with the API server's rules, and ``tfps validate``.

Two layers, each with one source:

1. **Fields** (types, required, enums, ranges, patterns, unknown fields): the pydantic models, which
   the CRD schema is generated from (:mod:`.parse`).
2. **Cross-field rules**: the CEL expressions declared on the models, evaluated with ``celpy`` at the
   place the generated CRD schema declares them (:mod:`.cel`).

``tfps validate`` also reports what the operator would refuse in the job's pod templates
(:mod:`.podsecurity`: Pod Security baseline plus no root), as it does by default; ``--relaxed`` for a
namespace the operator relaxes.

The operator parses admitted objects with :func:`.parse.parse_job` alone and so never loads celpy.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from . import podsecurity
from .cel import rule_errors
from .models import KIND, PSTrainingJob
from .parse import FieldError, JobValidationError, parse_job, wire_json

__all__ = ["FieldError", "JobValidationError", "main", "validate_documents", "validate_job"]


def validate_job(obj: dict[str, Any], old: dict[str, Any] | None = None, *, rules: bool = True) -> PSTrainingJob:
    """Parse and check a PSTrainingJob (wire form) with the API server's rules.

    ``old`` is the stored object for an update; with it the transition rules (immutable replica
    counts once started) apply too. ``rules=False`` skips the CEL rules (tens of ms in celpy) for
    objects the API server has already admitted. Raises :class:`JobValidationError`.
    """
    job = parse_job(obj)
    if not rules:
        return job
    old_wire = None
    if old is not None:
        old_wire = PSTrainingJob.model_validate_json(wire_json(old), strict=True).to_wire()
    errors = rule_errors(job.to_wire(), old_wire)
    if errors:
        raise JobValidationError(errors)
    return job


# --- tfps validate -------------------------------------------------------------------------------------


def pod_security_errors(job: PSTrainingJob, relaxed: bool = False) -> list[FieldError]:
    """What the operator refuses in the job's pod templates (nothing of it would be created)."""
    return [FieldError(v.path, v.detail) for v in podsecurity.refusals(job.spec, relaxed)]


def validate_documents(text: str, *, relaxed: bool = False) -> Iterator[tuple[str | None, list[FieldError]]]:
    """(job name, errors) for every PSTrainingJob document in a YAML text; other kinds are skipped.
    Besides the API server's rules, the operator's pod security refusals (``relaxed``: only those no
    namespace relaxes)."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        yield None, [FieldError("", f"not valid YAML: {e}")]
        return
    found = False
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") not in (None, KIND):
            continue
        found = True
        name = (doc.get("metadata") or {}).get("name") if isinstance(doc, dict) else None
        try:
            job = validate_job(doc)
        except JobValidationError as e:
            yield name, e.errors
        else:
            yield name, pod_security_errors(job, relaxed)
    if not found:
        yield None, [FieldError("", f"no {KIND} document found")]


def main(args: argparse.Namespace) -> int:
    """``tfps validate [--relaxed] FILE...``: ``FILE: OK`` or one ``FILE: path: message`` line per error."""
    failed = False
    for file in args.files:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except OSError as e:
            print(f"{file}: cannot read: {e.strerror}", file=sys.stderr)
            failed = True
            continue
        results = list(validate_documents(text, relaxed=bool(getattr(args, "relaxed", False))))
        for name, errors in results:
            label = f"{file} ({name})" if len(results) > 1 and name else file
            if errors:
                failed = True
                for err in errors:
                    print(f"{label}: {err}")
            else:
                print(f"{label}: OK")
    return 1 if failed else 0
