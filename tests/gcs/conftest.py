"""Fixtures for the object-storage tests: a local GCS (tests/support/gcs.py) on 127.0.0.1."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.gcs import GcsEmulator


@pytest.fixture(scope="session")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    """fake-gcs-server + the TLS proxy for the whole session (built once, cached)."""
    emu = GcsEmulator(Path(tmp_path_factory.mktemp("gcs"))).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def bucket(gcs: GcsEmulator) -> str:
    """A fresh, empty bucket in the emulator."""
    return gcs.create_bucket(f"tfps-{secrets.token_hex(4)}")
