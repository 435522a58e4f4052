"""The chaos suite drives the operator with the harness of tests/operator (imported, not copied)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
