"""Kubeflow training-operator v1: the binary (built once by benchmarks/tfjob/build.sh) and its TFJob CRD."""

from __future__ import annotations

import subprocess
import sys
from functools import lru_cache
from pathlib import Path

BUILD = Path(__file__).resolve().parents[1] / "tfjob" / "build.sh"


@lru_cache(maxsize=1)
def binary() -> Path:
    r = subprocess.run(["bash", str(BUILD)], text=True, stdout=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit("building training-operator failed (see above)")
    return Path(r.stdout.strip().splitlines()[-1])


def crd() -> Path:
    return binary().parent / "kubeflow.org_tfjobs.yaml"
