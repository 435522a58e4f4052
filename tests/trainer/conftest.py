"""Fixtures for the trainer tests: real trainer processes on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # trainer_cluster, placement_probe
