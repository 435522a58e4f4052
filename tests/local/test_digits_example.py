"""The README's headline example: examples/digits.yaml trained by `tfps run`, every artifact's test accuracy.

Runs benchmarks/digits_accuracy.py (the command that produces the README's table) with one Keras fit and
checks what must hold on every run; the PS-vs-fit comparison (within a point of the mean of several fits)
is the benchmark's, since one fit moves by a point between seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


def test_digits_trains_to_a_real_classifier_and_every_artifact_keeps_its_accuracy(tmp_path):
    out = tmp_path / "digits.json"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "digits_accuracy.py"),
            "--fits",
            "1",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["testImages"] == 359
    assert result["psTrainingAccuracy"] >= 0.95 and result["kerasFitAccuracy"] >= 0.95
    artifacts = result["artifactAccuracy"]
    assert set(artifacts) == {"savedmodel", "keras", "weights", "tflite", "tflite (int8)", "onnx"}, result["failed"]
    for label, accuracy in artifacts.items():
        assert abs(accuracy - result["psTrainingAccuracy"]) <= 0.01, (label, accuracy)
    assert abs(result["int8VsFloatPoints"]) <= 1.0
    assert "Keras fit, one process" in run.stdout and "artifact: tflite (int8)" in run.stdout
