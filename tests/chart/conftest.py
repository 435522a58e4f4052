"""Fixtures of the chart tests that install the chart into hack/cluster."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def helm(cluster: Any) -> str:
    """hack/cluster's helm (the pinned version)."""
    path = cluster.bin / "helm"
    assert path.exists(), f"hack/cluster did not provide helm at {path}"
    return str(path)
