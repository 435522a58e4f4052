"""Text of the job-aware ``tfps`` verbs: tables and the describe screen, from typed objects (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tfps_wire.export_result import human_size

from ...api.models import PSTrainingJob, PSTrainingJobStatus, replica_counts
from .jobs import Child, JobEvent


def age(when: datetime | None, now: datetime) -> str:
    """A short age like kubectl's: seconds up to 2 minutes, minutes up to 2 hours, then hours, then
    days (``95s``, ``12m``, ``3h``, ``2d``); ``-`` when unknown."""
    if when is None:
        return "-"
    s = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size * 2:
            return f"{s // size}{unit}"
    return f"{s}s"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded like ``kubectl get`` (three spaces between)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["   ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    return "\n".join(lines)


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "-" if x is None else format(x, fmt)


GET_HEADER = ("NAME", "PHASE", "STEP", "LOSS", "STEPS/S", "CHECKPOINT", "WORKERS", "RESTARTS", "AGE")


def get_row(job: PSTrainingJob, now: datetime, namespace: bool = False) -> list[str]:
    st = job.status or PSTrainingJobStatus()
    p, c = st.progress, st.checkpoint
    step = p.step if p and p.step is not None else (c.step if c else None)
    ckpt = "-" if not c or c.step is None else f"{c.step} ({age(c.time, now)} ago)" if c.time else str(c.step)
    created = (job.metadata.model_extra or {}).get("creationTimestamp")
    row = [
        job.metadata.name,
        st.phase or "-",
        f"{'-' if step is None else step}/{job.spec.training.steps}",
        _num(p.loss if p else None),
        _num(p.steps_per_second if p else None, ".3g"),
        ckpt,
        st.workers or "-",
        str(st.restarts),
        age(_time(created), now),
    ]
    return ([job.metadata.namespace] if namespace else []) + row


def get_table(jobs: Sequence[PSTrainingJob], now: datetime | None = None, namespace: bool = False) -> str:
    now = now or datetime.now(UTC)
    header = (("NAMESPACE",) if namespace else ()) + GET_HEADER
    return table(header, [get_row(j, now, namespace) for j in jobs])


def _time(v: Any) -> datetime | None:
    if isinstance(v, datetime):
        return v
    if isinstance(v, str) and v:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    return None


def status_artifacts_table(job: PSTrainingJob) -> str:
    """The export as ``status.export`` records it (no volume access needed)."""
    ex = job.status.export if job.status else None
    rows = [
        [a.format, a.quantization or "-", human_size(a.bytes), _num(a.max_error, ".3g"), "passed", a.path]
        for a in (ex.artifacts if ex else [])
    ]
    rows += [
        [f.format, f.quantization or "-", "-", "-", f"FAILED {f.reason}", f.message[:80]]
        for f in (ex.failed if ex else [])
    ]
    head = f"export of step {ex.step} at {ex.path}\n" if ex and ex.step is not None else ""
    body = table(("FORMAT", "QUANTIZATION", "SIZE", "MAX-ABS-ERROR", "VERIFICATION", "PATH"), rows)
    lin = ex.lineage if ex else None
    if lin is None:
        return head + body
    image = lin.image_id or (f"{lin.image} (digest unknown: no imageID in the pod status)" if lin.image else "-")
    return (
        head
        + body
        + f"\nlineage: spec sha256 {lin.spec_sha256 or '-'}\n"
        + f"  image {image}"
        + (f" (pod {lin.pod})" if lin.pod else "")
        + "\n  (the code, the end of training and the library versions: manifest.json, --download DIR)"
    )


def lineage_lines(manifest: dict[str, Any]) -> list[str]:
    """What produced the model, from a ``manifest.json``'s ``lineage``, ``checkpoint`` and ``versions``."""
    lin = manifest.get("lineage") or {}
    spec, image, code, training = (lin.get(k) or {} for k in ("spec", "image", "code", "training"))
    ck = manifest.get("checkpoint") or {}
    lines = [f"lineage (recorded by {lin.get('producer') or 'nobody: the exporter was run by hand'}):"]
    lines.append(
        f"  spec      sha256 {spec.get('sha256', '-')}" + (" (spec omitted: too large)" if "omitted" in spec else "")
    )
    if image:
        digest = image.get("digest") or "unknown"
        lines.append(f"  image     {image.get('image', '-')} digest {digest} (pod {image.get('pod', '-')})")
    else:
        lines.append("  image     - (no pod status named one)")
    if code:
        where = f"ConfigMap {code['configMap']}" if code.get("configMap") else "code directory"
        lines.append(
            f"  code      {where}: sha256 {code.get('sha256')} ({code.get('files')} files, {code.get('bytes')} B)"
        )
    else:
        lines.append("  code      in the image (no spec.model.source)")
    lines.append(f"  checkpoint step {ck.get('step', '-')} {ck.get('path') or ck.get('directory') or ''}".rstrip())
    if training:
        lines.append(
            f"  training  final step {_num(training.get('step'), 'd')}/{_num(training.get('targetSteps'), 'd')},"
            f" loss {_num(training.get('loss'), '.4g')} at step {_num(training.get('reportedStep'), 'd')},"
            f" {_num(training.get('stepsPerSecond'), '.3g')} steps/s"
        )
    versions = manifest.get("versions") or {}
    lines.append("  versions  " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return lines


def manifest_table(manifest: dict[str, Any]) -> str:
    """Every artifact of a ``manifest.json`` with its verification figures, then the failed formats."""
    rows = []
    for a in manifest.get("artifacts") or []:
        v = a.get("verification") or {}
        tol = v.get("tolerance") or {}
        rows.append(
            [
                a["format"],
                a.get("quantization") or "-",
                human_size(a.get("bytes")),
                _num(v.get("maxAbsError"), ".3g"),
                _num(v.get("maxRelError"), ".3g"),
                _num(v.get("argmaxAgreement"), ".3f"),
                f"{_num(tol.get('maxAbs'), 'g')}/{_num(tol.get('maxRel'), 'g')}",
                str(v.get("samples", "-")),
                "passed" if v.get("passed") else "FAILED",
            ]
        )
    for f in manifest.get("failed") or []:
        rows.append([f["format"], f.get("quantization") or "-", "-", "-", "-", "-", "-", "-", f"FAILED {f['reason']}"])
    step = manifest.get("checkpoint", {}).get("step")
    head = (
        f"export of step {step} ({'complete' if manifest.get('complete') else 'INCOMPLETE'}),"
        f" {manifest.get('samples', {}).get('count', '-')} verification samples\n"
    )
    return head + table(
        (
            "FORMAT",
            "QUANTIZATION",
            "SIZE",
            "MAX-ABS-ERR",
            "MAX-REL-ERR",
            "ARGMAX-AGREE",
            "TOL(ABS/REL)",
            "SAMPLES",
            "VERIFICATION",
        ),
        rows,
    )


def _elastic_range(job: PSTrainingJob) -> str:
    w = job.spec.replicas.worker
    if w.min_replicas is None and w.max_replicas is None:
        return ""
    return f" (workers {w.min_replicas or w.replicas}..{w.max_replicas if w.max_replicas is not None else '∞'})"


def _resize_lines(st: PSTrainingJobStatus, now: datetime) -> list[str]:
    """The run's size when it differs from the spec's, and the latest resize with its cost."""
    lines = []
    if st.cluster_size is not None:
        left = f", {st.workers_left_out} worker(s) left out" if st.workers_left_out else ""
        lines.append(f"Run size:    {st.cluster_size.worker} worker(s), {st.cluster_size.ps} ps{left}")
    rz = st.resize
    if rz is not None:
        when = f"done {age(rz.completed, now)} ago" if rz.completed else "in progress"
        cost = ""
        if rz.method == "Restart" and rz.resumed_from is not None:
            cost = f"; resumed from step {rz.resumed_from}, {rz.steps_lost or 0} step(s) lost"
        lines.append(
            f"Last resize: workers {rz.from_.worker} → {rz.to.worker}, ps {rz.from_.ps} → {rz.to.ps} "
            f"({rz.method}, {rz.reason}, {when}{cost}); resizes so far: {st.resizes}"
        )
    return lines


def describe(
    job: PSTrainingJob, children: Sequence[Child], events: Sequence[JobEvent], now: datetime | None = None
) -> str:
    """Conditions, progress, children and events of one job, on one screen."""
    now = now or datetime.now(UTC)
    st = job.status or PSTrainingJobStatus()
    p, c = st.progress, st.checkpoint
    lines = [
        f"Name:        {job.metadata.name}",
        f"Namespace:   {job.metadata.namespace}",
        f"Phase:       {st.phase or '-'}    Restarts: {st.restarts}/{job.spec.run_policy.backoff_limit}"
        + ("    Suspended: true" if job.spec.run_policy.suspend else ""),
        f"Model:       {job.spec.model.module}    Image: {job.spec.image or '(operator default)'}",
        f"Replicas:    {job.spec.strategy}: "
        + ", ".join(f"{role} {n}" for role, n in replica_counts(job).items() if n)
        + _elastic_range(job)
        + (f"    Workers running/in the run: {st.workers}" if st.workers else ""),
        *_resize_lines(st, now),
        f"Progress:    step {p.step if p and p.step is not None else '-'}/{job.spec.training.steps},"
        f" loss {_num(p.loss if p else None)}, {_num(p.steps_per_second if p else None, '.3g')} steps/s",
        "Checkpoint:  "
        + ("-" if not c or c.step is None else f"step {c.step}, {c.path or ''} ({age(c.time, now)} ago)"),
    ]
    if st.export:
        ex = st.export
        ok = (
            ", ".join(
                a.format + (f" ({a.quantization})" if a.quantization not in (None, "none") else "")
                for a in ex.artifacts
            )
            or "none"
        )
        lines.append(
            f"Export:      step {ex.step if ex.step is not None else '-'} at {ex.path or '-'}: {ok}"
            + (f"; failed: {', '.join(f.format for f in ex.failed)}" if ex.failed else "")
        )
    lines += ["", "Conditions:"]
    lines.append(
        table(
            ("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"),
            [
                [k.type, k.status, k.reason or "-", age(k.last_transition_time, now), k.message[:100]]
                for k in st.conditions
            ],
        )
        if st.conditions
        else "  <none>"
    )
    lines += ["", "Children:"]
    lines.append(
        table(("KIND", "NAME", "STATUS"), [[k.kind, k.name, k.status] for k in children]) if children else "  <none>"
    )
    lines += ["", "Events:"]
    lines.append(
        table(
            ("TYPE", "REASON", "AGE", "OBJECT", "MESSAGE"),
            [
                [
                    e.type,
                    e.reason,
                    age(e.time, now) + (f" (x{e.count})" if e.count > 1 else ""),
                    e.object,
                    e.message[:120],
                ]
                for e in events[-20:]
            ],
        )
        if events
        else "  <none>"
    )
    return "\n".join(lines)
