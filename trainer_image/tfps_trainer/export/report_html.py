"""``report.html``: the export at a glance, written beside ``manifest.json`` and rendered from it alone.

One static file, readable offline (no scripts, fonts or links to fetch): a table of every artifact
(size, error figures against their tolerance, argmax agreement), one inline-SVG chart per model output
with each artifact's per-input error distribution (median to 99th percentile as a bar, the largest as a
dot) on a log scale against its error bound, a chart of the sizes, and the formats that failed with
their reason. Every figure cell carries the exact value in ``data-value``. TF-free.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from tfps_wire.export_result import artifact_label, human_size

REPORT = "report.html"

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d232a}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d5dae0;padding-bottom:4px}
.meta{color:#55606b;font-size:13px}table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{padding:4px 8px;border-bottom:1px solid #e4e7eb;text-align:right}th{background:#f3f5f7}
td{white-space:nowrap}td.msg{white-space:normal}td.l,th.l{text-align:left}.ok{color:#17803d;font-weight:600}.bad{color:#b42318;font-weight:600}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;font-size:12px;font-weight:600}
.badge.ok{background:#dcf5e4}.badge.bad{background:#fde2e0}figure{margin:10px 0 18px}
figcaption{font-size:13px;color:#33404c;margin-bottom:4px}svg text{font-family:inherit;font-size:11px;fill:#33404c}
.warn{color:#8a5a00;font-size:12px}
"""
_PASSED = "<span class=ok>passed</span>"
_FAILED = "<span class=bad>failed</span>"


def fmt(x: Any, spec: str = ".3g") -> str:
    """How the report prints a figure: 3 significant digits, ``–`` when absent."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        return format(x, spec)
    return str(x)


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _cell(x: Any, spec: str = ".3g", cls: str = "") -> str:
    value = "" if x is None else f' data-value="{_e(repr(x))}"'
    return f'<td class="{cls}"{value}>{_e(fmt(x, spec))}</td>' if cls else f"<td{value}>{_e(fmt(x, spec))}</td>"


def _label(a: dict[str, Any]) -> str:
    return artifact_label(a["format"], a.get("quantization"))


def _summary_table(artifacts: list[dict[str, Any]], failed: list[dict[str, Any]]) -> str:
    rows = []
    for a in artifacts:
        v = a.get("verification") or {}
        tol = v.get("tolerance") or {}
        verdict = '<span class="ok">passed</span>' if v.get("passed", True) else '<span class="bad">failed</span>'
        rows.append(
            f'<tr data-artifact="{_e(_label(a))}"><td class="l">{_e(_label(a))}</td>'
            f'<td data-value="{a.get("bytes")}">{_e(human_size(a.get("bytes")))}</td>'
            f"{_cell(v.get('maxAbsError'))}{_cell(v.get('maxRelError'))}{_cell(v.get('argmaxAgreement'), '.4g')}"
            f"{_cell(tol.get('maxAbs'), 'g')}{_cell(tol.get('maxRel'), 'g')}{_cell(tol.get('minArgmaxAgreement'), 'g')}"
            f'<td>{_e(v.get("samples", "–"))}</td><td class="l">{verdict}</td></tr>'
        )
    for f in failed:
        rows.append(
            f'<tr data-artifact="{_e(_label(f))}"><td class="l">{_e(_label(f))}</td>'
            + "<td>–</td>" * 8
            + f'<td class="l"><span class="bad">{_e(f.get("reason", "failed"))}</span></td></tr>'
        )
    head = (
        "<tr><th class='l'>artifact</th><th>size</th><th>max abs error</th><th>max rel error</th>"
        "<th>argmax agreement</th><th>tol. maxAbs</th><th>tol. maxRel</th><th>tol. min agreement</th>"
        "<th>samples</th><th class='l'>verification</th></tr>"
    )
    return f'<table id="artifacts">{head}{"".join(rows)}</table>'


def _outputs_table(artifacts: list[dict[str, Any]]) -> str:
    rows = []
    for a in artifacts:
        for o in (a.get("verification") or {}).get("outputs") or []:
            q = o.get("errorQuantiles") or {}
            acc = o.get("accuracy") or {}
            note = o.get("problem") or o.get("warning") or ""
            rows.append(
                f'<tr data-artifact="{_e(_label(a))}" data-output="{_e(o["name"])}"><td class="l">{_e(_label(a))}</td>'
                f'<td class="l">{_e(o["name"])}</td><td class="l">{_e(o.get("kind", ""))}</td>'
                f"{_cell(q.get('p50'))}{_cell(q.get('p99'))}{_cell(o.get('maxAbsError'))}{_cell(o.get('bound'))}"
                f"{_cell(o.get('maxRelError'))}{_cell(o.get('argmaxAgreement'), '.4g')}"
                f"{_cell(acc.get('model'), '.4g')}{_cell(acc.get('artifact'), '.4g')}"
                f'<td class="l msg">{_PASSED if o.get("passed", True) else _FAILED}'
                f"{' <span class=warn>' + _e(note) + '</span>' if note else ''}</td></tr>"
            )
    head = (
        "<tr><th class='l'>artifact</th><th class='l'>output</th><th class='l'>kind</th><th>median err</th>"
        "<th>p99 err</th><th>max abs err</th><th>bound</th><th>max rel err</th><th>argmax agree</th>"
        "<th>acc. model</th><th>acc. artifact</th><th class='l'>verdict</th></tr>"
    )
    return f'<table id="outputs">{head}{"".join(rows)}</table>'


def _error_chart(output: str, rows: list[tuple[str, dict[str, Any]]]) -> str:
    """Per artifact: the per-input error from median to p99 (bar), the largest (dot) and the bound (red
    tick), on a log axis. An exact artifact (error 0) is written as such."""
    values = [
        v
        for _, o in rows
        for v in [*(o.get("errorQuantiles") or {}).values(), o.get("maxAbsError"), o.get("bound")]
        if isinstance(v, (int, float)) and v > 0
    ]
    lo = 10 ** math.floor(math.log10(min(values))) if values else 1e-8
    hi = 10 ** math.ceil(math.log10(max(values))) if values else 1.0
    if hi <= lo:
        hi = lo * 10
    left, width, row_h, top = 130, 520, 26, 8
    height = top + row_h * len(rows) + 30

    def x(v: float) -> float:
        v = min(max(v, lo), hi)
        return left + width * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" role="img" '
        f'aria-label="per-input error of output {_e(output)}" data-output="{_e(output)}">'
    ]
    decades = range(int(round(math.log10(lo))), int(round(math.log10(hi))) + 1)
    for d in decades:
        xd = x(10.0**d)
        parts.append(
            f'<line x1="{xd:.1f}" y1="{top}" x2="{xd:.1f}" y2="{height - 22}" stroke="#e4e7eb"/>'
            f'<text x="{xd:.1f}" y="{height - 8}" text-anchor="middle">1e{d}</text>'
        )
    for i, (label, o) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        q = o.get("errorQuantiles") or {}
        parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{_e(label)}</text>')
        err, bound = o.get("maxAbsError"), o.get("bound")
        color = "#2f6fde" if o.get("passed", True) else "#b42318"
        if err is None:
            parts.append(f'<text x="{left + 4}" y="{y + 4:.1f}" fill="#b42318">NaN/Inf</text>')
        elif err == 0:
            parts.append(f'<text x="{left + 4}" y="{y + 4:.1f}">exact (error 0)</text>')
        else:
            p50, p99 = q.get("p50", err), q.get("p99", err)
            if p50 and p99:
                parts.append(
                    f'<rect x="{x(p50):.1f}" y="{y - 6:.1f}" width="{max(2.0, x(p99) - x(p50)):.1f}" height="12" '
                    f'fill="{color}" fill-opacity="0.45" rx="2">'
                    f"<title>median {fmt(p50)} – p99 {fmt(p99)}</title></rect>"
                )
            parts.append(
                f'<circle cx="{x(err):.1f}" cy="{y:.1f}" r="4" fill="{color}"><title>max {fmt(err)}</title></circle>'
            )
        if isinstance(bound, (int, float)) and bound > 0:
            parts.append(
                f'<line x1="{x(bound):.1f}" y1="{y - 10:.1f}" x2="{x(bound):.1f}" y2="{y + 10:.1f}" stroke="#b42318" '
                f'stroke-width="2"><title>bound {fmt(bound)}</title></line>'
            )
        parts.append(f'<text x="{left + width + 8}" y="{y + 4:.1f}">{_e(fmt(err))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _size_chart(artifacts: list[dict[str, Any]]) -> str:
    if not artifacts:
        return ""
    biggest = max((a.get("bytes") or 0) for a in artifacts) or 1
    left, width, row_h = 130, 420, 22
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 100}" height="{row_h * len(artifacts) + 8}" '
        'role="img" aria-label="artifact sizes">'
    ]
    for i, a in enumerate(artifacts):
        y = 4 + i * row_h
        w = max(1.0, width * (a.get("bytes") or 0) / biggest)
        parts.append(
            f'<text x="{left - 8}" y="{y + 14}" text-anchor="end">{_e(_label(a))}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="14" fill="#6b7c93" rx="2"/>'
            f'<text x="{left + w + 6:.1f}" y="{y + 14}">{_e(human_size(a.get("bytes")))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render(manifest: dict[str, Any]) -> str:
    """The HTML of ``manifest`` (a ``tfps.dev/export-manifest/v1`` document)."""
    artifacts = manifest.get("artifacts") or []
    failed = manifest.get("failed") or []
    ckpt = manifest.get("checkpoint") or {}
    samples = manifest.get("samples") or {}
    complete = manifest.get("complete", True)
    title = f"Export of {manifest.get('namespace', '')}/{manifest.get('job', '')} at step {ckpt.get('step', '?')}"
    ckpt_at = ckpt.get("path") or ckpt.get("directory") or ""
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)} <span class='badge {'ok' if complete else 'bad'}'>"
        f"{'complete' if complete else 'incomplete: a required format failed'}</span></h1>",
        f"<div class='meta'>model {_e(manifest.get('model', ''))} · checkpoint {_e(ckpt_at)} · "
        f"created {_e(manifest.get('createdAt', ''))} · verified on {_e(samples.get('count', '?'))} inputs from "
        f"{_e(samples.get('origin', '?'))} · required: {_e(', '.join(manifest.get('required') or []) or '–')}</div>",
        "<h2>Artifacts</h2>",
        _summary_table(artifacts, failed),
    ]
    outputs: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for a in artifacts:
        for o in (a.get("verification") or {}).get("outputs") or []:
            outputs.setdefault(o["name"], []).append((_label(a), o))
    if outputs:
        out.append("<h2>Error against the TensorFlow model, per output</h2>")
        out.append(
            "<div class='meta'>bar: median to 99th percentile of each input's largest |artifact − model|; "
            "dot: the largest; red tick: the error bound (maxAbs + maxRel × scale). Log scale.</div>"
        )
        for name, rows in outputs.items():
            out.append(f"<figure><figcaption>output <b>{_e(name)}</b></figcaption>{_error_chart(name, rows)}</figure>")
        out.append(_outputs_table(artifacts))
    if artifacts:
        out += ["<h2>Sizes</h2>", _size_chart(artifacts)]
    if failed:
        out.append(
            "<h2>Failed formats</h2><table id='failed'><tr><th class='l'>artifact</th><th class='l'>reason</th>"
            "<th class='l'>message</th></tr>"
        )
        out += [
            f"<tr><td class='l'>{_e(_label(f))}</td><td class='l bad'>{_e(f.get('reason', ''))}</td>"
            f"<td class='l msg'>{_e(f.get('message', ''))}</td></tr>"
            for f in failed
        ]
        out.append("</table>")
    sig = manifest.get("signature") or {}
    if sig.get("inputs") or sig.get("outputs"):
        out.append(
            "<h2>Signature</h2><table><tr><th class='l'>tensor</th><th class='l'>name</th><th class='l'>shape</th>"
            "<th class='l'>dtype</th></tr>"
        )
        for role in ("inputs", "outputs"):
            for t in sig.get(role) or []:
                shape = "[" + ", ".join("batch" if d is None else str(d) for d in t.get("shape") or []) + "]"
                out.append(
                    f"<tr><td class='l'>{role[:-1]}</td><td class='l'>{_e(t.get('name'))}</td>"
                    f"<td class='l'>{_e(shape)}</td><td class='l'>{_e(t.get('dtype'))}</td></tr>"
                )
        out.append("</table>")
    versions = manifest.get("versions") or {}
    if versions:
        out.append(f"<p class='meta'>{_e(' · '.join(f'{k} {v}' for k, v in versions.items()))}</p>")
    out.append("</body></html>\n")
    return "".join(out)


def write(path: Path, manifest: dict[str, Any]) -> None:
    path.write_text(render(manifest), encoding="utf-8")
