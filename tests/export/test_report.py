"""report.html: rendered from manifest.json alone, every figure of the manifest in it, drawn offline.

The Chromium tests load the file in headless Chromium (Debian's package, installed by hack/chromium
when missing) and read the figures back from the rendered DOM, and check the screenshot has content.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from support.chromium import dump_dom, png_ink, screenshot
from tfps_trainer.export import report_html as report
from tfps_wire import export_manifest as manifest_mod
from tfps_wire.export_result import human_size


def _output(
    name: str,
    kind: str,
    err: float | None,
    bound: float,
    agree: float | None = None,
    passed: bool = True,
    quantiles: dict[str, float] | None = None,
) -> dict[str, Any]:
    o = {
        "name": name,
        "kind": kind,
        "maxAbsError": err,
        "scale": 2.0,
        "maxRelError": None if err is None else err / 2,
        "bound": bound,
        "argmaxAgreement": agree,
        "decisiveSamples": 60 if agree is not None else None,
        "passed": passed,
    }
    if err is not None:
        o["errorQuantiles"] = quantiles or {"p50": err / 20, "p90": err / 4, "p99": err / 1.5, "max": err}
    return o


def _artifact(
    fmt: str, quant: str | None, size: int, outputs: list[dict[str, Any]], tol: dict[str, Any]
) -> dict[str, Any]:
    errs = [o["maxAbsError"] for o in outputs if o["maxAbsError"] is not None]
    agrees = [o["argmaxAgreement"] for o in outputs if o["argmaxAgreement"] is not None]
    return {
        "format": fmt,
        "path": f"{fmt}-{quant or 'float'}.bin",
        "bytes": size,
        "sha256": "0" * 64,
        "quantization": quant,
        "verification": {
            "samples": 64,
            "maxAbsError": max(errs),
            "maxRelError": max(errs) / 2,
            "argmaxAgreement": min(agrees) if agrees else None,
            "tolerance": tol,
            "passed": all(o["passed"] for o in outputs),
            "outputs": outputs,
            "warnings": [],
        },
    }


def sample_manifest() -> dict[str, Any]:
    """A two-output model (class probabilities and a score) exported to four artifacts, one format failed."""
    float_tol = {"maxAbs": 1e-4, "maxRel": 1e-4, "minArgmaxAgreement": None}
    arts = [
        _artifact(
            "savedmodel",
            None,
            183_112,
            [_output("probs", "classification", 0.0, 2e-4, 1.0), _output("score", "regression", 0.0, 2e-4)],
            {"maxAbs": 1e-5, "maxRel": 1e-5, "minArgmaxAgreement": None},
        ),
        _artifact(
            "tflite",
            "none",
            61_440,
            [_output("probs", "classification", 3.1e-7, 2e-4, 1.0), _output("score", "regression", 8.4e-7, 2e-4)],
            float_tol,
        ),
        _artifact(
            "tflite",
            "int8",
            19_872,
            [_output("probs", "classification", 0.0412, 0.2, 0.9667), _output("score", "regression", 0.0731, 0.2)],
            {"maxAbs": 0.0, "maxRel": 0.1, "minArgmaxAgreement": 0.9},
        ),
        _artifact(
            "onnx",
            None,
            60_914,
            [_output("probs", "classification", 2.2e-7, 2e-4, 1.0), _output("score", "regression", 5.9e-7, 2e-4)],
            float_tol,
        ),
    ]
    doc = manifest_mod.build(
        job="digits",
        namespace="ml",
        model="tfps_trainer.examples.digits",
        checkpoint_step=1200,
        checkpoint_path="checkpoints/ckpt-1200",
        inputs=[{"name": "pixels", "shape": [None, 64], "dtype": "float32"}],
        outputs=[
            {"name": "probs", "shape": [None, 10], "dtype": "float32", "kind": "classification"},
            {"name": "score", "shape": [None, 1], "dtype": "float32", "kind": "regression"},
        ],
        artifacts=arts,
        required=["savedmodel"],
        complete=True,
        failed=[
            {
                "format": "keras",
                "quantization": None,
                "reason": "ConversionFailed",
                "message": "keras: the model uses a Lambda layer that cannot be serialized",
            }
        ],
        samples={"count": 64, "origin": "dataset", "labels": True},
    )
    return doc


class _Cells(HTMLParser):
    """Every ``data-value`` in the page by the (artifact, output) of its row, the visible text, and the svgs."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str | None], list[float]] = {}
        self.text: list[str] = []
        self.svgs: list[str] = []
        self.scripts = 0
        self._row: tuple[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and "data-artifact" in a:
            self._row = (str(a["data-artifact"]), a.get("data-output"))
        if tag == "svg":
            self.svgs.append(str(a.get("data-output") or a.get("aria-label")))
        if tag == "script":
            self.scripts += 1
        if "data-value" in a and self._row is not None:
            self.values.setdefault(self._row, []).append(float(str(a["data-value"])))

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _label(a: dict[str, Any]) -> str:
    return a["format"] + (f" ({a['quantization']})" if a.get("quantization") not in (None, "none") else "")


def check_figures(page: str, manifest: dict[str, Any]) -> _Cells:
    """Every figure of ``manifest`` is in ``page``: exactly (``data-value``) and as printed."""
    cells = _Cells()
    cells.feed(page)
    text = " ".join(" ".join(cells.text).split())
    assert cells.scripts == 0
    for a in manifest["artifacts"]:
        v = a["verification"]
        row = cells.values[(_label(a), None)]
        assert a["bytes"] in row and v["maxAbsError"] in row and v["maxRelError"] in row
        if v["argmaxAgreement"] is not None:
            assert v["argmaxAgreement"] in row
        assert human_size(a["bytes"]) in text
        for o in v["outputs"]:
            orow = cells.values[(_label(a), o["name"])]
            for fig in (o["maxAbsError"], o["bound"], o["errorQuantiles"]["p50"], o["errorQuantiles"]["p99"]):
                assert fig in orow, (a["format"], o["name"], fig, orow)
            assert report.fmt(o["maxAbsError"]) in text
    for f in manifest["failed"]:
        assert f["reason"] in text and f["message"] in text
    names = {o["name"] for a in manifest["artifacts"] for o in a["verification"]["outputs"]}
    assert names <= set(cells.svgs), cells.svgs  # one chart per output
    assert f"step {manifest['checkpoint']['step']}" in text
    return cells


def test_report_holds_every_figure_of_the_manifest():
    m = sample_manifest()
    check_figures(report.render(m), m)


def test_names_from_the_model_are_escaped_and_non_finite_errors_are_named():
    m = sample_manifest()
    bad = m["artifacts"][1]
    bad["verification"]["outputs"][0].update(name="<script>alert(1)</script>", maxAbsError=None, maxRelError=None)
    bad["verification"]["outputs"][0].pop("errorQuantiles")
    page = report.render(m)
    cells = _Cells()
    cells.feed(page)
    assert cells.scripts == 0 and "&lt;script&gt;" in page
    assert "NaN/Inf" in page


def test_report_renders_in_headless_chromium(tmp_path: Path):
    m = sample_manifest()
    page = tmp_path / report.REPORT
    report.write(page, m)
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    check_figures(dump_dom(page), m)
    width, height, ink = png_ink(screenshot(page, tmp_path / "report.png"))
    assert (width, height) == (1200, 1400)
    assert ink > 0.02, f"the screenshot is almost blank ({ink:.1%} of pixels not white)"
